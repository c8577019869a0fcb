// compressed-tensors 0.20 (llm-compressor's output, read by vLLM and transformers), measured on
// folders llm-compressor 0.14 wrote on CPU from a bf16 Llama:
//   nvfp4-pack-quantized: <m>.weight_packed U8 [N, K/2] (element 2k in the low nibble),
//     <m>.weight_scale F8_E4M3 [N, K/16], <m>.weight_global_scale F32 [1], a multiplier
//     (2688 / amax); fused q/k/v and gate/up share it (the smallest, from the largest amax);
//   float-quantized (FP8): <m>.weight F8_E4M3 [N, K], <m>.weight_scale in the model's dtype,
//     [1] per tensor, [N, 1] per channel, [ceil(N/128), ceil(K/128)] per 128x128 block,
//     [N, K/128] per group of 128;
//   mxfp4-pack-quantized: <m>.weight_packed U8 [N, K/2], <m>.weight_scale U8 [N, K/32] (E8M0
//     bytes); mxfp8-quantized: <m>.weight F8_E4M3, <m>.weight_scale U8 [N, K/32].
// config.json gets quantization_config with one config group targeting Linear, weights only
// (activation scales come from calibration, which qexact does not run), and `ignore` listing
// the Linear modules left unquantized.
#include <stdexcept>

#include "model/format.hpp"
#include "model/format_params.hpp"
#include "model/linear_weights.hpp"
#include "io/safetensors.hpp"

namespace qexact::model {
namespace {

using checkpoint::detail::Source;
using checkpoint::detail::StoredOutput;
using ordered_json = nlohmann::ordered_json;

constexpr const char* kVersion = "0.20.1";  // the compressed-tensors release whose layout this is

enum class Scheme { nvfp4, fp8, mxfp4, mxfp8 };

Scheme scheme_of(const Contract& c) {
  const auto p = param_map(c);
  if (c.family == Family::nvfp4) return Scheme::nvfp4;
  if (c.family == Family::fp8_scaled) return Scheme::fp8;
  if (c.family == Family::mx) return param_or(p, "element") == "e2m1" ? Scheme::mxfp4 : Scheme::mxfp8;
  throw std::logic_error("scheme_of an unchecked contract");
}

const char* format_of(Scheme s) {
  switch (s) {
    case Scheme::nvfp4: return "nvfp4-pack-quantized";
    case Scheme::fp8: return "float-quantized";
    case Scheme::mxfp4: return "mxfp4-pack-quantized";
    case Scheme::mxfp8: return "mxfp8-quantized";
  }
  return "";
}

// The weights' strategy and its config fields, for fp8.scaled's granularity.
ordered_json fp8_weights(const std::string& granularity) {
  ordered_json w;
  w["num_bits"] = 8;
  w["type"] = "float";
  w["symmetric"] = true;
  w["dynamic"] = false;
  w["observer"] = "memoryless_minmax";
  if (granularity == "tensor") {
    w["strategy"] = "tensor";
    w["group_size"] = nullptr;
  } else if (granularity == "row") {
    w["strategy"] = "channel";
    w["group_size"] = nullptr;
  } else if (granularity == "tile:128x128") {
    w["strategy"] = "block";
    w["group_size"] = nullptr;
    w["block_structure"] = {128, 128};
  } else {
    w["strategy"] = "group";
    w["group_size"] = 128;
  }
  return w;
}

// The activation config llm-compressor writes beside these weights for its dynamic schemes
// (FP8_DYNAMIC, FP8_BLOCK, MXFP4): computed by the loader at run time, nothing to calibrate.
ordered_json dynamic_activations(Scheme s, const std::string& granularity) {
  ordered_json a;
  a["dynamic"] = true;
  if (s == Scheme::mxfp4) {
    a["group_size"] = 32;
    a["num_bits"] = 4;
    a["scale_dtype"] = "torch.uint8";
    a["strategy"] = "group";
  } else if (granularity == "tile:128x128") {
    a["group_size"] = 128;
    a["num_bits"] = 8;
    a["strategy"] = "group";
  } else {
    a["group_size"] = nullptr;
    a["num_bits"] = 8;
    a["strategy"] = "token";
  }
  a["symmetric"] = true;
  a["type"] = "float";
  return a;
}

class CompressedTensors final : public Format {
 public:
  const char* name() const override { return "compressed-tensors"; }
  const char* about() const override { return "what llm-compressor writes, for vLLM and transformers"; }
  const char* default_preset() const override { return "nvfp4.ct"; }

  void check(const Contract& c, bool /*recomputing*/) const override {
    const auto p = param_map(c);
    const auto refuse = [&](const std::string& why) {
      refuse_contract(name(), c, why,
                      "nvfp4.ct, fp8.ct.tensor, fp8.ct.channel, fp8.ct.group, fp8.ct.block, mxfp4.ct, mxfp8.ct and contracts "
                      "of the same layout");
    };
    if (c.family == Family::nvfp4) {
      if (const std::string why = tensor_scale_mismatch(p, "multiplier", "weight_global_scale as a multiplier");
          !why.empty())
        refuse(why);
      return;
    }
    if (c.family == Family::fp8_scaled) {
      if (param_or(p, "element") != "e4m3") refuse("float-quantized weights are E4M3");
      if (param_or(p, "scale_kind") != "descale") refuse("weight_scale is a descale (scale_kind=descale)");
      const std::string g = param_or(p, "granularity");
      if (g != "tensor" && g != "row" && g != "tile:128x128" && g != "group:128")
        refuse("granularity " + g + " is none of tensor, row (channel), group:128 and tile:128x128 (block)");
      return;
    }
    if (c.family == Family::mx) {
      const std::string e = param_or(p, "element");
      if (e != "e2m1" && e != "e4m3") refuse("MX weights are E2M1 or E4M3");
      if (const std::string why = mx_layout_mismatch(p); !why.empty()) refuse(why);
      return;
    }
    refuse(std::string("family ") + family_name(c.family) + " has no compressed-tensors format here");
  }

  bool recognizes(const ordered_json& q) const override {
    return q.is_object() && q.value("quant_method", std::string()) == "compressed-tensors";
  }

  std::string preset_of(const ordered_json& q) const override {
    const auto bad = [](const std::string& what) -> std::string {
      fail(ErrorKind::bad_file, "config.json quantization_config: " + what);
    };
    const std::string format = q.value("format", std::string());
    if (format == "nvfp4-pack-quantized") return "nvfp4.ct";
    if (format == "mxfp4-pack-quantized") return "mxfp4.ct";
    if (format == "mxfp8-quantized") return "mxfp8.ct";
    if (format != "float-quantized")
      return bad("format '" + format + "' is none of nvfp4-pack-quantized, float-quantized, mxfp4-pack-quantized, "
                 "mxfp8-quantized (pass --preset)");
    const auto groups = q.find("config_groups");
    if (groups == q.end() || !groups->is_object() || groups->size() != 1)
      return bad("float-quantized with other than one config group (pass --preset)");
    const ordered_json& w = groups->begin().value().value("weights", ordered_json::object());
    const std::string strategy = w.value("strategy", std::string());
    if (strategy == "tensor") return "fp8.ct.tensor";
    if (strategy == "channel") return "fp8.ct.channel";
    if (strategy == "block") return "fp8.ct.block";
    if (strategy == "group") return "fp8.ct.group";
    return bad("float-quantized weights of strategy '" + strategy + "' (pass --preset)");
  }

  const char* tensor_scale_meaning() const override { return "a multiplier (2688 / amax)"; }

  std::vector<Source> sources_in(const Folder& q, const std::string& dtype) const override {
    std::vector<Source> out = weights_beside(q, "weight_packed", "weight_scale", dtype);  // NVFP4, MXFP4
    for (Source& s : weights_beside(q, "weight", "weight_scale", dtype))                   // FP8, MXFP8
      if (q.info(stored_name(s.name, "weight")).dtype == "F8_E4M3") out.push_back(std::move(s));
    return out;
  }

  bool shares_tensor_amax(const Contract& c) const override { return c.family == Family::nvfp4; }

  void check_dynamic_activations(const Contract& c) const override {
    const Scheme s = scheme_of(c);
    if (s == Scheme::nvfp4)
      fail(ErrorKind::bad_argument, "--activations dynamic: compressed-tensors NVFP4 activations need a calibrated "
                                    "input_global_scale, which qexact does not make");
    if (s == Scheme::mxfp8)
      fail(ErrorKind::bad_argument, "--activations dynamic: the MXFP8 activation config is not measured here "
                                    "(FP8 and MXFP4 are)");
  }

  std::vector<StoredOutput> stored(const Contract& c, const Source& s,
                                   const std::vector<OutputSpec>& outputs) const override {
    switch (scheme_of(c)) {
      case Scheme::nvfp4:
        return {plain(stored_name(s.name, "weight_packed"), "U8", outputs[0].shape),
                plain(stored_name(s.name, "weight_scale"), "F8_E4M3", outputs[1].shape),
                plain(stored_name(s.name, "weight_global_scale"), "F32", {1})};
      case Scheme::mxfp4:
        return {plain(stored_name(s.name, "weight_packed"), "U8", outputs[0].shape),
                plain(stored_name(s.name, "weight_scale"), "U8", outputs[1].shape)};
      case Scheme::mxfp8:
        return {plain(stored_name(s.name, "weight"), "F8_E4M3", outputs[0].shape),
                plain(stored_name(s.name, "weight_scale"), "U8", outputs[1].shape)};
      case Scheme::fp8: {
        const auto p = param_map(c);
        // A contract that computes its scale in the input's dtype stores it in that dtype, as
        // compressed-tensors does; any other keeps its fp32 scale (the loaders take either).
        const bool in_input = param_or(p, "scale_arith") == "input";
        const std::string dtype = in_input ? s.dtype : "F32";
        Shape shape = outputs[1].shape;
        const std::string g = param_or(p, "granularity");
        if (g == "tensor") shape = {1};
        if (g == "row") shape = {shape_numel(outputs[1].shape), 1};  // [N, 1] for an [N, K] weight
        StoredOutput scale = plain(stored_name(s.name, "weight_scale"), dtype, shape);
        scale.narrow = in_input && s.dtype != "F32" ? std::optional<DType>(s.dtype == "BF16" ? DType::bf16 : DType::f16)
                                                    : std::nullopt;
        return {plain(stored_name(s.name, "weight"), "F8_E4M3", outputs[0].shape), scale};
      }
    }
    return {};
  }

  std::map<std::string, std::string> write_config(ordered_json& config, const Contract& c,
                                                  const Written& w) const override {
    const Scheme s = scheme_of(c);
    const auto p = param_map(c);
    ordered_json weights;
    if (s == Scheme::fp8) {
      weights = fp8_weights(param_or(p, "granularity"));
    } else {
      weights["num_bits"] = s == Scheme::mxfp8 ? 8 : 4;
      weights["type"] = "float";
      weights["symmetric"] = true;
      weights["dynamic"] = false;
      weights["observer"] = "memoryless_minmax";
      weights["strategy"] = s == Scheme::nvfp4 ? "tensor_group" : "group";
      weights["group_size"] = s == Scheme::nvfp4 ? 16 : 32;
      weights["scale_dtype"] = s == Scheme::nvfp4 ? "torch.float8_e4m3fn" : "torch.uint8";
    }
    ordered_json group;
    group["format"] = format_of(s);
    group["input_activations"] = w.dynamic_activations ? dynamic_activations(s, param_or(p, "granularity")) : ordered_json();
    group["output_activations"] = nullptr;
    group["targets"] = {"Linear"};
    group["weights"] = weights;
    ordered_json q;
    q["config_groups"] = {{"group_0", group}};
    q["format"] = format_of(s);
    q["global_compression_ratio"] = nullptr;
    ordered_json ignore = ordered_json::array();
    for (const std::string& n : w.unquantized_linear) ignore.push_back(module_of(n));
    q["ignore"] = ignore;
    q["kv_cache_scheme"] = nullptr;
    q["moe_sparsity_config"] = nullptr;
    q["quant_method"] = "compressed-tensors";
    q["quantization_status"] = "compressed";
    q["sparsity_config"] = ordered_json::object();
    q["transform_config"] = ordered_json::object();
    q["version"] = kVersion;
    config["quantization_config"] = q;
    return {};
  }
};

}  // namespace

const Format& compressed_tensors_format() {
  static const CompressedTensors f;
  return f;
}

}  // namespace qexact::model
