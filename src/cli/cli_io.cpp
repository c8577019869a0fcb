// Reading the CLI's inputs: float tensors under --dtype, typed .npy files, JSON.

#include "cli/commands.hpp"
#include "io/npy.hpp"
#include "io/read_file.hpp"

namespace qexact::cli {

CLI::Option* add_dtype_option(CLI::App& sub, std::string& dtype) {
  return sub
      .add_option("--dtype", dtype,
                  "dtype of the input: f32 ('<f4'), f16 ('<f2') or bf16 (bit patterns in a '<u2' array); "
                  "default: the file's")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}));
}

Tensor read_float_input(const std::filesystem::path& path, const std::string& dtype) {
  const std::string name = path.string();
  Tensor t = npy::read(path);
  if (dtype == "bf16") {
    if (t.dtype() != DType::u16)
      fail(ErrorKind::bad_argument, name + ": --dtype bf16 reads a '<u2' array of bf16 bit patterns, the file holds " +
                                        dtype_name(t.dtype()));
    return npy::reinterpret_u16_as_bf16(t);
  }
  if (t.dtype() == DType::u16)
    fail(ErrorKind::bad_argument,
         name + ": holds uint16 ('<u2') values; pass --dtype bf16 if they are bf16 bit patterns");
  if (!is_float_dtype(t.dtype()))
    fail(ErrorKind::bad_argument, name + ": holds " + dtype_name(t.dtype()) +
                                      " values; the input must be f32, f16, or bf16 bit patterns ('<u2' with --dtype bf16)");
  if (!dtype.empty() && t.dtype() != parse_dtype(dtype))
    fail(ErrorKind::bad_argument,
         name + ": holds " + dtype_name(t.dtype()) + " values, not the " + dtype + " given by --dtype");
  return t;
}

Tensor decode_npy_expecting(std::span<const std::uint8_t> bytes, DType expected, const std::string& source) {
  Tensor t = npy::decode(bytes, source);
  if (expected == DType::bf16 && t.dtype() == DType::u16) t = npy::reinterpret_u16_as_bf16(t);
  if (t.dtype() != expected)
    fail(ErrorKind::bad_file, source + ": holds " + dtype_name(t.dtype()) + " values, expected " + dtype_name(expected));
  return t;
}

nlohmann::ordered_json parse_json(std::span<const std::uint8_t> bytes, const std::filesystem::path& path) {
  if (bytes.size() > io::kMaxJsonBytes)
    fail(ErrorKind::bad_file, path.string() + ": larger than the " + std::to_string(io::kMaxJsonBytes) +
                                  "-byte limit for a JSON document");
  io::check_json_depth(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), io::kMaxJsonDepth,
                       path.string());
  const auto j = nlohmann::ordered_json::parse(bytes.begin(), bytes.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) fail(ErrorKind::bad_file, path.string() + ": not valid JSON");
  return j;
}

}  // namespace qexact::cli
