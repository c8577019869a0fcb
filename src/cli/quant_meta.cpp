#include "cli/quant_meta.hpp"

#include <charconv>

#include "cli/commands.hpp"
#include "contracts/contract_json.hpp"
#include "contracts/family_table.hpp"
#include "io/checksum.hpp"

namespace qexact::cli {
namespace {

using Json = nlohmann::ordered_json;

Json tensor_json(const TensorMeta& t, const std::string& file) {
  Json j;
  if (!file.empty()) j["file"] = file;
  j["shape"] = t.shape;
  j["dtype"] = dtype_name(t.dtype);
  if (t.file) {
    j["bytes"] = t.file->bytes;
    j["fnv1a64"] = io::hex64(t.file->fnv1a64);
  }
  return j;
}

class MetaReader {
 public:
  explicit MetaReader(const std::string& source) : source_(source) {}

  const Json& member(const Json& obj, const char* key, const std::string& where) const {
    if (!obj.is_object()) malformed(where + " is not an object");
    const auto it = obj.find(key);
    if (it == obj.end()) malformed("missing \"" + std::string(key) + "\" in " + where);
    return *it;
  }

  std::string string(const Json& obj, const char* key, const std::string& where) const {
    const Json& v = member(obj, key, where);
    if (!v.is_string()) malformed("\"" + std::string(key) + "\" in " + where + " is not a string");
    return v.get<std::string>();
  }

  TensorMeta tensor(const Json& root, const std::string& key) const {
    const Json& obj = member(root, key.c_str(), "the document");
    const std::string where = "\"" + key + "\"";
    TensorMeta t;
    const Json& shape = member(obj, "shape", where);
    if (!shape.is_array()) malformed("the shape of " + where + " is not an array");
    for (const Json& d : shape) {
      if (!d.is_number_integer() || d.get<std::int64_t>() < 0)
        malformed("the shape of " + where + " holds something other than a non-negative integer");
      t.shape.push_back(d.get<std::int64_t>());
    }
    try {
      t.dtype = parse_dtype(string(obj, "dtype", where));
    } catch (const Error& e) {
      malformed(std::string("the dtype of ") + where + ": " + e.what());
    }
    const bool has_bytes = obj.contains("bytes"), has_sum = obj.contains("fnv1a64");
    if (has_bytes != has_sum) malformed(where + " records \"bytes\" or \"fnv1a64\" without the other");
    if (has_bytes) {
      const Json& bytes = obj.at("bytes");
      if (!bytes.is_number_unsigned()) malformed("\"bytes\" of " + where + " is not a non-negative integer");
      const std::string sum = string(obj, "fnv1a64", where);
      std::uint64_t v = 0;
      const auto [p, ec] = sum.size() == 18 && sum.compare(0, 2, "0x") == 0
                               ? std::from_chars(sum.data() + 2, sum.data() + sum.size(), v, 16)
                               : std::from_chars_result{sum.data(), std::errc::invalid_argument};
      if (ec != std::errc() || p != sum.data() + sum.size())
        malformed("\"fnv1a64\" of " + where + " is not 0x and 16 hex digits");
      t.file = FileCheck{bytes.get<std::uint64_t>(), v};
    }
    return t;
  }

  [[noreturn]] void malformed(const std::string& what) const { fail(ErrorKind::bad_file, source_ + ": " + what); }

 private:
  const std::string& source_;
};

}  // namespace

std::string output_file(const std::string& name) { return name + ".npy"; }

std::vector<std::string> quantize_dir_files(const Contract& c) {
  std::vector<std::string> files;
  for (const std::string& name : output_names(c)) files.push_back(output_file(name));
  files.push_back(kMetaFile);
  return files;
}

FileCheck file_check(std::span<const std::uint8_t> bytes) { return FileCheck{bytes.size(), io::fnv1a64(bytes)}; }

void check_recorded_file(const std::string& path, std::span<const std::uint8_t> bytes, const TensorMeta& recorded) {
  if (!recorded.file) return;
  const FileCheck got = file_check(bytes);
  if (got.bytes != recorded.file->bytes || got.fnv1a64 != recorded.file->fnv1a64)
    fail(ErrorKind::bad_file, path + ": " + std::to_string(got.bytes) + " bytes with checksum " + io::hex64(got.fnv1a64) +
                                  ", but " + kMetaFile + " records " + std::to_string(recorded.file->bytes) +
                                  " bytes with " + io::hex64(recorded.file->fnv1a64) +
                                  ": the files of this directory were not written together");
}

std::string meta_to_json(const QuantMeta& m) {
  Json j;
  j["qexact_version"] = kVersion;
  contract_to_json(j, m.contract);
  j["preset_description"] = preset_description(m.contract.preset);  // what the bytes reproduce
  j["preset_verified"] = preset_verified(m.contract.preset);
  j["path"] = m.path;
  j["engine"] = engine_name(m.engine);
  j["input"] = tensor_json(m.input, "");
  for (const OutputMeta& o : m.outputs) j[o.name] = tensor_json(o.tensor, output_file(o.name));
  return j.dump(2) + "\n";
}

QuantMeta meta_from_json(const Json& j, const std::string& source) {
  const MetaReader r(source);
  QuantMeta m;
  m.contract = contract_from_json(j, source, "the document");
  m.path = r.string(j, "path", "the document");
  m.input = r.tensor(j, "input");
  // The contract says which outputs the directory holds (a tensor_scale for nvfp4 amax).
  for (const std::string& name : output_names(m.contract)) m.outputs.push_back({name, r.tensor(j, name)});
  return m;
}

}  // namespace qexact::cli
