// NVIDIA ModelOpt 0.47's Hugging Face export (export_hf_checkpoint; read by vLLM and
// TensorRT-LLM, not by transformers 5.24), measured on folders it exported on CPU from a bf16
// Llama:
//   NVFP4 (quant_algo W4A16_NVFP4 weight-only, NVFP4 with calibrated input_scale): <m>.weight U8
//     [N, K/2] (element 2k in the low nibble), <m>.weight_scale F8_E4M3 [N, K/16],
//     <m>.weight_scale_2 F32 [] (a descale, amax / 2688 in fp32); fused q/k/v and gate/up share
//     it (the largest, from the largest amax);
//   MXFP4 (quant_algo mxfp4): <m>.weight U8 [N, K/2], <m>.weight_scale U8 [N, K/32];
//   FP8_PER_CHANNEL_PER_TOKEN: <m>.weight F8_E4M3, <m>.weight_scale F32 [N] (dynamic per-token
//     activations: no calibration).
// Its per-tensor FP8 (quant_algo FP8: <m>.weight_scale F32 [], fp32 amax / 448, each shard its own)
// carries calibrated input scales, which qexact cannot make: refused for writing, read by verify. Metadata: hf_quant_config.json and config.json's quantization_config
// with quant_method modelopt.
#include <stdexcept>

#include "io/safetensors.hpp"
#include "model/format.hpp"
#include "model/format_params.hpp"
#include "model/linear_weights.hpp"

namespace qexact::model {
namespace {

using checkpoint::detail::Source;
using checkpoint::detail::StoredOutput;
using ordered_json = nlohmann::ordered_json;

constexpr const char* kVersion = "0.47.0";  // the ModelOpt release whose export this is

const char* algo_of(const Contract& c) {
  if (c.family == Family::nvfp4) return "W4A16_NVFP4";
  if (c.family == Family::mx) return "mxfp4";
  return param_map(c)["granularity"] == "tensor" ? "FP8" : "FP8_PER_CHANNEL_PER_TOKEN";
}

ordered_json producer() { return {{"name", "modelopt"}, {"version", kVersion}}; }

class ModelOpt final : public Format {
 public:
  const char* name() const override { return "modelopt"; }
  const char* about() const override { return "ModelOpt's HF export, for vLLM and TensorRT-LLM"; }
  const char* default_preset() const override { return "nvfp4.modelopt"; }

  void check(const Contract& c, bool recomputing) const override {
    const auto p = param_map(c);
    const auto refuse = [&](const std::string& why) {
      refuse_contract(name(), c, why,
                      "nvfp4.modelopt, mxfp4.modelopt, fp8.modelopt.export.channel and contracts of the same layout");
    };
    if (c.family == Family::nvfp4) {
      if (const std::string why = tensor_scale_mismatch(p, "amax", "weight_scale_2 as a descale"); !why.empty())
        refuse(why);
      return;
    }
    if (c.family == Family::mx) {
      if (param_or(p, "element") != "e2m1") refuse("ModelOpt's MX export is MXFP4 (element=e2m1)");
      if (const std::string why = mx_layout_mismatch(p); !why.empty()) refuse(why);
      return;
    }
    if (c.family == Family::fp8_scaled) {
      if (param_or(p, "element") != "e4m3" || param_or(p, "scale_kind") != "descale")
        refuse("FP8 weights are E4M3 with a descale");
      const std::string g = param_or(p, "granularity");
      if (g == "tensor" && recomputing) return;
      if (g != "row")
        refuse("only its per-channel FP8 (FP8_PER_CHANNEL_PER_TOKEN) needs no calibration; per-tensor FP8 carries "
               "calibrated input scales (verify reads such folders), and granularity " + g + " is not per channel");
      return;
    }
    refuse(std::string("family ") + family_name(c.family) + " has no ModelOpt export here");
  }

  bool shares_tensor_amax(const Contract& c) const override { return c.family == Family::nvfp4; }

  void check_dynamic_activations(const Contract& c) const override {
    fail(ErrorKind::bad_argument, "--activations dynamic: ModelOpt's export names its activations by quant_algo; " +
                                      std::string(c.family == Family::fp8_scaled
                                                      ? "FP8_PER_CHANNEL_PER_TOKEN already quantizes them per token"
                                                      : "its NVFP4 and MXFP4 exports here are weight-only"));
  }

  std::vector<StoredOutput> stored(const Contract& c, const Source& s,
                                   const std::vector<OutputSpec>& outputs) const override {
    if (c.family == Family::nvfp4)
      return {plain(stored_name(s.name, "weight"), "U8", outputs[0].shape),
              plain(stored_name(s.name, "weight_scale"), "F8_E4M3", outputs[1].shape),
              plain(stored_name(s.name, "weight_scale_2"), "F32", {})};
    if (c.family == Family::mx)
      return {plain(stored_name(s.name, "weight"), "U8", outputs[0].shape),
              plain(stored_name(s.name, "weight_scale"), "U8", outputs[1].shape)};
    const bool per_tensor = param_map(c)["granularity"] == "tensor";
    return {plain(stored_name(s.name, "weight"), "F8_E4M3", outputs[0].shape),
            plain(stored_name(s.name, "weight_scale"), "F32", per_tensor ? Shape{} : Shape{shape_numel(outputs[1].shape)})};
  }

  bool recognizes(const ordered_json& q) const override {
    return q.is_object() && q.value("quant_method", std::string()) == "modelopt";
  }

  std::string preset_of(const ordered_json& q) const override {
    const std::string algo = q.value("quant_algo", std::string());
    if (algo == "NVFP4" || algo == "W4A16_NVFP4") return "nvfp4.modelopt";
    if (algo == "mxfp4" || algo == "MXFP4") return "mxfp4.modelopt";
    if (algo == "FP8_PER_CHANNEL_PER_TOKEN") return "fp8.modelopt.export.channel";
    if (algo == "FP8") return "fp8.modelopt.export.tensor";
    fail(ErrorKind::bad_file, "config.json quantization_config: ModelOpt quant_algo '" + algo +
                                  "' is none of NVFP4, W4A16_NVFP4, mxfp4, FP8_PER_CHANNEL_PER_TOKEN, FP8 (pass --preset)");
  }

  const char* tensor_scale_meaning() const override { return "a descale (amax / 2688)"; }

  std::vector<Source> sources_in(const Folder& q, const std::string& dtype) const override {
    return weights_beside(q, "weight", "weight_scale", dtype);
  }

  std::vector<std::string> extra_files() const override { return {"hf_quant_config.json"}; }

  std::map<std::string, std::string> write_config(ordered_json& config, const Contract& c,
                                                  const Written& w) const override {
    ordered_json exclude = ordered_json::array();
    for (const std::string& n : w.unquantized_linear) exclude.push_back(module_of(n));
    for (const std::string& n : w.embeddings) exclude.push_back(module_of(n));
    ordered_json hf;
    hf["producer"] = producer();
    ordered_json quantization;
    quantization["quant_algo"] = algo_of(c);
    quantization["kv_cache_quant_algo"] = nullptr;
    if (c.family == Family::nvfp4) quantization["group_size"] = 16;
    quantization["exclude_modules"] = exclude;
    hf["quantization"] = quantization;

    ordered_json q;
    if (c.family == Family::nvfp4)
      q["config_groups"] = {{"group_0",
                             {{"weights", {{"dynamic", false}, {"num_bits", 4}, {"type", "float"}, {"group_size", 16}}},
                              {"targets", {"Linear"}}}}};
    q["ignore"] = exclude;
    q["quant_algo"] = algo_of(c);
    q["producer"] = producer();
    q["quant_method"] = "modelopt";
    config["quantization_config"] = q;
    return {{"hf_quant_config.json", hf.dump(4) + "\n"}};
  }
};

}  // namespace

const Format& modelopt_format() {
  static const ModelOpt f;
  return f;
}

}  // namespace qexact::model
