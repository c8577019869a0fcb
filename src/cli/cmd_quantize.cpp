// `qexact quantize --preset NAME [--dtype D] [--param key=value ...] [--engine E] [--threads N]
// [--scale SCALE.npy] IN.npy --out DIR`:
// DIR/<name>.npy for every output of the contract (payload.npy, scale.npy, and tensor_scale.npy
// for nvfp4 tensor_scale=amax) and DIR/meta.json (quant_meta.hpp), published together. --scale:
// quantize with these scales (quantize_with_scales), which scale.npy then holds.
// With IN.safetensors, `--out OUT.safetensors [--include GLOB] [--exclude GLOB] [--strict]`
// quantizes a whole checkpoint into one file (quantize_checkpoint.hpp). With a model folder,
// `--out FOLDER [--format F]` writes a model folder in a loader's format (qexact/model.hpp).
#include <iostream>
#include <memory>
#include <stdexcept>

#include "cli/commands.hpp"
#include "cli/quant_meta.hpp"
#include "cli/quantize_checkpoint.hpp"
#include "io/atomic_file.hpp"
#include "io/npy.hpp"
#include "model/folder.hpp"
#include "model/reshard.hpp"
#include "qexact/model.hpp"
#include "qexact/quantize.hpp"

namespace qexact::cli {
namespace {

struct QuantizeOptions {
  std::string preset;
  std::string dtype;
  std::vector<std::string> params;
  std::string input;
  std::string out;
  std::string scale;  // --scale: given scales (.npy), "" for the contract's own
  EngineArgs engine;
  std::vector<std::string> include, exclude;
  bool strict = false;
  bool force = false;
  std::string format;  // "" : none given
  std::string activations = "none";
  std::string max_shard_size;  // "" : the input's shards
};

bool is_checkpoint(const std::string& path) {
  const std::string ext = ".safetensors";
  return path.size() >= ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0;
}

void expect_shape(const char* what, const Shape& got, const Shape& expected) {
  if (got != expected)
    throw std::logic_error(std::string("the quantizer returned a ") + what + " of shape " + shape_str(got) +
                           ", the contract gives " + shape_str(expected));
}

int run_quantize(const QuantizeOptions& o) {
  const bool folder = model::is_folder(o.input);
  if (o.activations != "none" && !folder)
    fail(ErrorKind::bad_argument, "--activations applies to model folders");
  if (!o.max_shard_size.empty() && !folder)
    fail(ErrorKind::bad_argument, "--max-shard-size applies to model folders");
  if (!o.format.empty() && !folder)
    fail(ErrorKind::bad_argument, "--format applies to model folders (a directory with config.json and "
                                  ".safetensors shards); " + o.input + " is not a directory");
  std::string preset = o.preset;
  if (preset.empty()) preset = folder && !o.format.empty() ? model::default_preset(o.format) : "";
  if (preset.empty())
    fail(ErrorKind::bad_argument, "--preset is required" +
                                      std::string(folder ? " (or --format with a loader format, which names its own)" : ""));
  const Contract c = make_contract(preset, o.params);
  if (folder) {
    if (!o.dtype.empty())
      fail(ErrorKind::bad_argument, "--dtype applies to .npy inputs; a model folder's shards name each tensor's dtype");
    if (!o.scale.empty()) fail(ErrorKind::bad_argument, "--scale applies to .npy inputs, not to a model folder");
    FolderCliOptions fo{o.input, o.out,
                        {o.format.empty() ? "qexact" : o.format, false, o.activations == "dynamic", {o.include, o.exclude, o.strict, o.force, o.engine.options()}, std::nullopt,
                         o.max_shard_size.empty() ? 0 : model::parse_shard_size(o.max_shard_size)}};
    return quantize_model_folder(c, fo, std::cout);
  }
  if (is_checkpoint(o.input)) {
    if (!o.dtype.empty())
      fail(ErrorKind::bad_argument, "--dtype applies to .npy inputs; a .safetensors file names each tensor's dtype");
    if (!o.scale.empty()) fail(ErrorKind::bad_argument, "--scale applies to .npy inputs, not to a checkpoint");
    CheckpointOptions co{o.input, o.out, {o.include, o.exclude, o.strict, o.force, o.engine.options()}};
    return quantize_checkpoint(c, co, std::cout);
  }
  if (!o.include.empty() || !o.exclude.empty() || o.strict)
    fail(ErrorKind::bad_argument, "--include, --exclude and --strict apply to .safetensors checkpoints only");
  // The target is checked before any work: an existing directory needs --force, an input inside it is refused.
  io::OutputDir out(o.out, quantize_dir_files(c), o.force, {o.input});
  const Tensor x = read_float_input(o.input, o.dtype);
  // The outputs the contract gives this input: checks rank and tail before any work, and pins
  // what the quantizer must return.
  const std::vector<OutputSpec> specs = output_specs(c, x.shape());

  const RunOptions run = o.engine.options();
  QuantResult r;
  if (o.scale.empty()) {
    r = quantize(c, x.view(), run);
  } else {
    // quantize_with_scales names the dtype and shape the file must have (scale.npy's).
    const Tensor given = npy::read(o.scale);
    r = quantize_with_scales(c, x.view(), given.view(), run);
  }
  const auto named = r.named();
  if (named.size() != specs.size())
    throw std::logic_error("the quantizer returned " + std::to_string(named.size()) + " outputs, the contract gives " +
                           std::to_string(specs.size()));

  QuantMeta meta;
  meta.contract = c;
  meta.input = {x.shape(), x.dtype(), std::nullopt};
  meta.path = r.path;
  meta.engine = run.engine;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const Tensor& t = *named[i].second;
    if (named[i].first != specs[i].name)
      throw std::logic_error("the quantizer's output " + std::to_string(i) + " is " + named[i].first +
                             ", the contract gives " + specs[i].name);
    expect_shape(specs[i].name.c_str(), t.shape(), specs[i].shape);
    std::vector<std::uint8_t> bytes = npy::encode(t.view());
    meta.outputs.push_back({specs[i].name, {t.shape(), t.dtype(), file_check(bytes)}});
    out.add(output_file(specs[i].name), std::move(bytes));
  }
  out.add(kMetaFile, meta_to_json(meta));
  out.publish();
  return 0;
}

}  // namespace

void add_quantize(CLI::App& app, Action& action) {
  auto opts = std::make_shared<QuantizeOptions>();
  CLI::App* sub = app.add_subcommand(
      "quantize", "Quantize a .npy tensor, or every matching tensor of a .safetensors checkpoint, under a named contract");
  sub->footer("Checkpoint output (one .safetensors): " + std::string(checkpoint::kNaming) + ". fp8.scaled and nvfp4: " +
              checkpoint::kNamingScaled +
              ". __metadata__ holds qexact.preset, qexact.param.<key> for every parameter, qexact.naming, "
              "qexact.quantized and qexact.skipped (JSON).");
  std::string defaults, formats;
  for (const model::FormatInfo& f : model::folder_formats()) {
    formats += (formats.empty() ? "" : ", ") + f.name + " (" + f.about + (f.preset.empty() ? ", the default" : "; preset " + f.preset) + ")";
    if (!f.preset.empty()) defaults += (defaults.empty() ? "" : ", ") + f.name + ": " + f.preset;
  }
  sub->add_option("--preset", opts->preset,
                  "named contract (see `qexact presets`); required but with a model folder and a loader --format, "
                  "which picks its own (" + defaults + ")");
  sub->add_option("--max-shard-size", opts->max_shard_size,
                  "model folder, loader formats: output shards of at most this size (5GB, 500MB, 2GiB, bytes), "
                  "named as transformers names them (default: each input shard gives one output shard)");
  sub->add_option("--activations", opts->activations,
                  "model folder, compressed-tensors: also declare dynamic activation quantization in the config "
                  "(FP8: per token, or per group of 128 beside 128x128 blocks; MXFP4: per group of 32), as "
                  "llm-compressor's FP8_DYNAMIC, FP8_BLOCK and MXFP4 schemes; the weights are the same")
      ->check(CLI::IsMember({"none", "dynamic"}));
  sub->add_option("--format", opts->format, "model folder: the output's format: " + formats);
  add_dtype_option(*sub, opts->dtype);
  add_engine_options(*sub, opts->engine);
  sub->add_option("--param", opts->params, "override one contract parameter: key=value (repeatable)")
      ->allow_extra_args(false);
  sub->add_option("--scale", opts->scale,
                  "quantize with these scales (.npy of the scale output's dtype and shape: what scale.npy holds), "
                  "as ONNX's QuantizeLinear takes its scale; fp8.scaled on both engines, other families on "
                  "--engine reference");
  sub->add_option("input", opts->input, "input tensor IN.npy, a checkpoint IN.safetensors, or a model folder")->required();
  sub->add_option("--out", opts->out,
                  "output directory (created if missing); for a checkpoint, the output .safetensors file; for a "
                  "model folder, the output folder")
      ->required();
  sub->add_option("--include", opts->include,
                  "checkpoint: quantize tensors whose name matches this glob (repeatable; default: all)")
      ->allow_extra_args(false);
  sub->add_option("--exclude", opts->exclude, "checkpoint: leave tensors matching this glob as they are (repeatable)")
      ->allow_extra_args(false);
  sub->add_flag("--force", opts->force,
                "replace an existing output (atomically, as a whole): a checkpoint's .safetensors file, or an "
                "output directory holding just the files this contract writes (payload.npy, scale.npy, "
                "tensor_scale.npy where it has one, and meta.json)");
  sub->add_flag("--strict", opts->strict, "checkpoint: a matched tensor the contract cannot take is an error");
  sub->callback([opts, &action] { action = [opts] { return run_quantize(*opts); }; });
}

}  // namespace qexact::cli
