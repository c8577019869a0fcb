// `qexact dequantize DIR [--engine E] [--threads N] --out OUT.npy`: fp32 values of a `qexact
// quantize` output directory, under the contract meta.json records: payload.npy, scale.npy and,
// for a contract with a tensor scale (nvfp4 tensor_scale=amax), tensor_scale.npy.
// `qexact dequantize QUANTIZED_FOLDER --out FOLDER [--dtype D]`: a model folder unquantized
// (model/dequantize_folder.hpp).
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "cli/quant_meta.hpp"
#include "io/atomic_file.hpp"
#include "io/dir_files.hpp"
#include "io/read_file.hpp"
#include "io/npy.hpp"
#include "model/dequantize_folder.hpp"
#include "model/folder.hpp"
#include "qexact/quantize.hpp"

namespace qexact::cli {
namespace {

struct DequantizeOptions {
  std::string dir;
  std::string out;
  EngineArgs engine;
  std::string dtype;  // a model folder's output dtype
  bool force = false;
};

// The file is read once: its bytes are checked against meta.json's record, then decoded.
Tensor read_recorded(const io::DirFiles& dir, const char* name, const TensorMeta& recorded) {
  const std::filesystem::path path = dir.path(name);
  const std::vector<std::uint8_t> bytes = dir.read(name);
  check_recorded_file(path.string(), bytes, recorded);
  Tensor t = decode_npy_expecting(bytes, recorded.dtype, path.string());
  if (t.shape() != recorded.shape)
    fail(ErrorKind::bad_file, path.string() + ": shape " + shape_str(t.shape()) + " differs from " +
                                  shape_str(recorded.shape) + " recorded in " + kMetaFile);
  return t;
}

// A quantized model folder (config.json or safetensors shards, no meta.json) into an unquantized one.
bool is_model_folder(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!model::is_folder(dir) || std::filesystem::exists(dir / kMetaFile, ec)) return false;
  if (std::filesystem::exists(dir / model::kConfigName, ec)) return true;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().extension() == ".safetensors") return true;
  return false;
}

int run_dequantize(const DequantizeOptions& o) {
  if (is_model_folder(o.dir)) {
    const auto names = model::dequantize_folder(o.dir, o.out, {o.dtype, o.engine.options(), o.force});
    std::cout << "dequantized " << names.size() << " tensors of " << o.dir << " into " << o.out << "\n";
    return 0;
  }
  if (!o.dtype.empty() || o.force) fail(ErrorKind::bad_argument, "--dtype and --force apply to a model folder");
  const std::filesystem::path dir = o.dir;
  // Every file a quantize directory may hold is an input: the output is none of them.
  io::check_output_file(o.out, {dir / kMetaFile, dir / "payload.npy", dir / "scale.npy", dir / "tensor_scale.npy"});
  // One directory handle for every file: a directory replaced meanwhile is read whole or not at all.
  const io::DirFiles files(dir);
  const QuantMeta meta = meta_from_json(parse_json(files.read(kMetaFile, io::kMaxJsonBytes), files.path(kMetaFile)),
                                        files.path(kMetaFile).string());
  std::vector<Tensor> outputs;  // output_specs order: payload, scale, tensor_scale where the contract has one
  for (const OutputMeta& m : meta.outputs) {
    const std::string file = output_file(m.name);
    try {
      outputs.push_back(read_recorded(files, file.c_str(), m.tensor));
    } catch (const Error& e) {
      // Read through the directory handle; the path is asked only to say why the read failed.
      std::error_code ec;
      if (e.kind() != ErrorKind::io || std::filesystem::exists(files.path(file), ec)) throw;
      fail(ErrorKind::bad_file, "missing " + files.path(file).string() + ": the contract in " + kMetaFile +
                                    " (preset " + meta.contract.preset + ") has the output \"" + m.name + "\"");
    }
  }
  if (!meta.outputs.front().tensor.file)
    std::cerr << "qexact: note: " << (dir / kMetaFile).string()
              << " records no sizes or checksums (written by an older qexact): payload and scale are not checked "
                 "against it\n";
  const TensorView tensor_scale = outputs.size() > 2 ? outputs[2].view() : TensorView{};
  const Tensor x = dequantize(meta.contract, outputs[0].view(), outputs[1].view(), tensor_scale, meta.input.shape,
                              o.engine.options());
  io::write_file_atomic(o.out, npy::encode(x.view()));
  return 0;
}

}  // namespace

void add_dequantize(CLI::App& app, Action& action) {
  auto opts = std::make_shared<DequantizeOptions>();
  CLI::App* sub = app.add_subcommand(
      "dequantize", "fp32 values of a `qexact quantize` output directory, or a quantized model folder unquantized");
  sub->add_option("dir", opts->dir,
                  "directory written by `qexact quantize` (meta.json), or a quantized model folder (any --format but gguf)")
      ->required();
  sub->add_option("--out", opts->out, "output OUT.npy (fp32); for a model folder, the output folder")->required();
  sub->add_option("--dtype", opts->dtype,
                  "model folder: the dequantized tensors' dtype (default: config.json's dtype, else F32)")
      ->check(CLI::IsMember({"F32", "BF16", "F16"}));
  sub->add_flag("--force", opts->force, "model folder: replace an existing output folder (atomically)");
  add_engine_options(*sub, opts->engine);
  sub->callback([opts, &action] { action = [opts] { return run_dequantize(*opts); }; });
}

}  // namespace qexact::cli
