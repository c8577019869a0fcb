// The formats in which quantized model folders are written for the loaders that read them: one
// row per format (format_table.cpp), each format in its own file. A format names each output of
// a quantized tensor (its name, safetensors dtype and shape in the loader's checkpoint), writes
// the loader's quantization config, chooses the tensors a model quantizes by default, and says
// which contracts it can store (a loader reads the bytes one way: a compressed-tensors NVFP4
// global scale is a multiplier, ModelOpt's a descale, and each is refused in the other's folder).
#pragma once
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/storage.hpp"
#include "model/folder.hpp"
#include "qexact/contract.hpp"
#include "qexact/model.hpp"

namespace qexact::model {

// What a written folder leaves unquantized, for its config's ignore lists (by name), and whether
// the config also quantizes activations, dynamically.
struct Written {
  std::vector<std::string> unquantized_linear, embeddings;
  bool dynamic_activations = false;
};

class Format {
 public:
  virtual ~Format() = default;
  virtual const char* name() const = 0;
  // Who writes such folders and which loaders read them, for help texts.
  virtual const char* about() const = 0;
  // The preset a folder of this format is quantized with when none is named.
  virtual const char* default_preset() const = 0;
  // bad_argument naming the presets this format takes, for a contract it cannot store.
  // `recomputing`: for verify, which recomputes a folder's weights and may take a layout whose
  // folders also hold calibrated tensors (activation scales) that qexact does not write.
  virtual void check(const Contract& c, bool recomputing) const = 0;
  // The tensors a folder of this format quantizes by default: the Linear weights but lm_head,
  // embeddings and routers (linear_weights.hpp).
  virtual bool selects(const checkpoint::detail::Source& s) const;
  // Why --include / --exclude cannot change that choice ("" when they can).
  virtual std::string fixed_selection() const { return ""; }
  // Whether a selected tensor is quantized with its last two axes swapped (Storage::transposed).
  virtual bool transposed(const checkpoint::detail::Source&) const { return false; }
  // Whether fused shards (q/k/v, gate/up) are quantized under their group's tensor amax, as the
  // loader needs to fuse them; only contracts with a tensor amax have one to share.
  virtual bool shares_tensor_amax(const Contract& c) const = 0;
  // bad_argument unless a config of this format can declare dynamic activations (computed at run
  // time by the loader, so no calibration) for this contract's weights.
  virtual void check_dynamic_activations(const Contract& c) const = 0;
  virtual std::vector<checkpoint::detail::StoredOutput> stored(const Contract& c, const checkpoint::detail::Source& s,
                                                               const std::vector<OutputSpec>& outputs) const = 0;
  // A shard's __metadata__ from the input shard's: "format": "pt", as torch's save_pretrained
  // writes it, and the preset that made it.
  std::map<std::string, std::string> shard_metadata(const Contract& c, const std::map<std::string, std::string>& input) const {
    std::map<std::string, std::string> m = input;
    m["format"] = "pt";
    m["qexact.preset"] = c.preset;
    return m;
  }
  // Reading back: the source tensors a folder of this format quantized, from its stored tensors
  // alone (names, shapes; `dtype` is the model's, which the stored tensors do not keep).
  virtual std::vector<checkpoint::detail::Source> sources_in(const Folder& q, const std::string& dtype) const = 0;
  // Whether config.json's quantization_config is this format's, and the preset it
  // names (bad_file naming the field for one this format cannot name).
  virtual bool recognizes(const nlohmann::ordered_json& quantization_config) const = 0;
  virtual std::string preset_of(const nlohmann::ordered_json& quantization_config) const = 0;
  // What a stored tensor scale holds, for the findings of verify: a multiplier (x / s · t... read
  // as t = 2688 / amax) or a descale (t = amax / 2688).
  virtual const char* tensor_scale_meaning() const = 0;
  // The quantization_config key that lists the modules left unquantized, by module name.
  virtual const char* ignore_key() const { return "ignore"; }
  // Whether the format's loaders leave a module unquantized without the config listing it.
  virtual bool ignored_by_loader(const std::string& /*module*/) const { return false; }

  // The files besides config.json that write_config returns, by name (declared before any work).
  virtual std::vector<std::string> extra_files() const { return {}; }
  // Adds the loader's quantization config to config.json and returns any other file it reads
  // (ModelOpt's hf_quant_config.json), by name.
  virtual std::map<std::string, std::string> write_config(nlohmann::ordered_json& config, const Contract& c,
                                                          const Written& w) const = 0;

  // Writes the quantized model: by default a folder of safetensors shards under stored() and
  // write_config() (write_shards); a format whose output is one file of its own (GGUF) writes
  // that. The folder `f` is read and checked; `out` is the output path as given.
  virtual FolderResult write(const Contract& c, const Folder& f, const std::filesystem::path& out, const FolderOptions& o,
                             const checkpoint::ProgressFn& progress) const;
};

// The folder of safetensors shards a format (or qexact's own layout, format null) writes.
FolderResult write_shards(const Format* format, const Contract& c, const Folder& f, const std::filesystem::path& out,
                          const FolderOptions& o, const checkpoint::ProgressFn& progress);

// Every format but qexact's own (whose layout is checkpoint::quantize_file's), by name.
const std::vector<const Format*>& formats();
// The format of that name; bad_argument listing the names otherwise.
const Format& format_named(const std::string& name);

}  // namespace qexact::model
