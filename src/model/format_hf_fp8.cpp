// Hugging Face's fine-grained FP8 (quant_method "fp8"), DeepSeek-V3's checkpoint layout, which
// transformers (FineGrainedFP8Config), vLLM and SGLang read; measured on transformers 5.24.0,
// which writes it when it saves a model it quantized on load:
//   <m>.weight F8_E4M3 [N, K]; <m>.weight_scale_inv F32 [ceil(N/R), ceil(K/C)] for blocks of
//   R x C (weight_block_size [R, C], [128, 128] by default), or F32 [] without blocks. Despite its
//   name the scale is what dequantize multiplies: w = fp32(q) * weight_scale_inv.
// config.json's quantization_config is FineGrainedFP8Config as transformers saves it (every
// field), with `modules_to_not_convert` listing the Linear modules left unquantized (vLLM reads
// it when `ignored_layers` is absent). Activations are always dynamic here: no calibration.
//
// transformers 5.24 itself quantizes only weights whose sides are multiples of the block and, on
// CPU, dequantizes a ragged scale grid with the wrong block size (rows // scale rows); vLLM and
// DeepSeek's kernels read ceil-sized grids, which is what is written (docs/model-folders.md).
#include <stdexcept>

#include "model/format.hpp"
#include "model/format_params.hpp"
#include "model/linear_weights.hpp"

namespace qexact::model {
namespace {

using checkpoint::detail::Source;
using checkpoint::detail::StoredOutput;
using ordered_json = nlohmann::ordered_json;

// weight_block_size of a granularity: [R, C] for tile:RxC, null per tensor.
ordered_json block_size(const std::string& granularity) {
  if (granularity == "tensor") return nullptr;
  const auto x = granularity.find('x');
  return {std::stoll(granularity.substr(5, x - 5)), std::stoll(granularity.substr(x + 1))};
}

class HfFp8 final : public Format {
 public:
  const char* name() const override { return "hf-fp8"; }
  const char* about() const override {
    return "fine-grained FP8 (quant_method fp8, weight_scale_inv) as transformers saves it and DeepSeek-V3 ships, for "
           "transformers, vLLM and SGLang";
  }
  const char* default_preset() const override { return "fp8.hf.block"; }

  void check(const Contract& c, bool /*recomputing*/) const override {
    const auto p = param_map(c);
    const auto refuse = [&](const std::string& why) {
      refuse_contract(name(), c, why, "fp8.hf.block, fp8.deepseek.128x128 and contracts of the same layout");
    };
    if (c.family != Family::fp8_scaled) refuse(std::string("family ") + family_name(c.family) + " is not FP8");
    if (param_or(p, "element") != "e4m3") refuse("its weights are E4M3 (float8_e4m3fn)");
    // weight_scale_inv is multiplied at dequantize: a descale stored as computed, or a
    // multiplier stored as its inverse.
    if ((param_or(p, "scale_kind") == "descale") != (param_or(p, "stored") == "computed"))
      refuse("weight_scale_inv is what dequantize multiplies (a descale, or a multiplier stored inverse)");
    const std::string g = param_or(p, "granularity");
    if (g != "tensor" && g.rfind("tile:", 0) != 0) refuse("granularity " + g + " is neither tile:RxC (weight_block_size) nor tensor");
  }

  bool shares_tensor_amax(const Contract&) const override { return false; }

  void check_dynamic_activations(const Contract&) const override {
    fail(ErrorKind::bad_argument, "--activations dynamic: hf-fp8 always declares dynamic activations "
                                  "(activation_scheme: dynamic); the option would change nothing");
  }

  std::vector<StoredOutput> stored(const Contract& c, const Source& s,
                                   const std::vector<OutputSpec>& outputs) const override {
    const bool per_tensor = param_map(c)["granularity"] == "tensor";
    return {plain(stored_name(s.name, "weight"), "F8_E4M3", outputs[0].shape),
            plain(stored_name(s.name, "weight_scale_inv"), "F32", per_tensor ? Shape{} : outputs[1].shape)};
  }

  bool recognizes(const ordered_json& q) const override {
    return q.is_object() && q.value("quant_method", std::string()) == "fp8";
  }

  std::string preset_of(const ordered_json& q) const override {
    const auto bad = [](const std::string& what) -> std::string {
      fail(ErrorKind::bad_file, "config.json quantization_config (quant_method fp8): " + what);
    };
    if (q.contains("scale_fmt") && q["scale_fmt"] != "float")
      return bad("scale_fmt " + q["scale_fmt"].dump() + " is not modelled (float is; pass --preset)");
    const auto b = q.find("weight_block_size");
    if (b == q.end() || *b != ordered_json::array({128, 128}))
      return bad("weight_block_size " + (b == q.end() ? std::string("absent") : b->dump()) +
                 " has no preset ([128, 128] is fp8.hf.block; pass --preset with a granularity)");
    return "fp8.hf.block";
  }

  const char* tensor_scale_meaning() const override { return "no tensor scale"; }

  std::vector<Source> sources_in(const Folder& q, const std::string& dtype) const override {
    return weights_beside(q, "weight", "weight_scale_inv", dtype);
  }
  const char* ignore_key() const override { return "modules_to_not_convert"; }
  // transformers adds the output embedding to the list itself (and saves null); vLLM's lm_head
  // is no FP8 Linear.
  bool ignored_by_loader(const std::string& module) const override { return module == "lm_head"; }

  std::map<std::string, std::string> write_config(ordered_json& config, const Contract& c,
                                                  const Written& w) const override {
    ordered_json ignore = ordered_json::array();
    for (const std::string& n : w.unquantized_linear) ignore.push_back(module_of(n));
    // The fields in the order transformers saves them (sorted).
    ordered_json q;
    q["activation_scheme"] = "dynamic";
    q["dequantize"] = false;
    q["expert_dtype"] = "fp8";
    q["modules_to_convert"] = nullptr;
    q["modules_to_not_convert"] = ignore;
    q["quant_method"] = "fp8";
    q["scale_fmt"] = "float";
    q["weight_block_size"] = block_size(param_map(c)["granularity"]);
    config["quantization_config"] = q;
    return {};
  }
};

}  // namespace

const Format& hf_fp8_format() {
  static const HfFp8 f;
  return f;
}

}  // namespace qexact::model
