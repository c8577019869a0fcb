// gpt-oss's MXFP4 (quant_method "mxfp4"), as OpenAI ships gpt-oss-20b / 120b and transformers
// writes and reads it (Mxfp4Config, integrations/mxfp4.py); vLLM and llama.cpp's converter read it
// too. Only the MoE experts are quantized: per layer
//   <p>.experts.gate_up_proj_blocks U8 [E, 2I, H/32, 16], <p>.experts.gate_up_proj_scales U8 [E, 2I, H/32]
//   <p>.experts.down_proj_blocks    U8 [E, H, I/32, 16],  <p>.experts.down_proj_scales    U8 [E, H, I/32]
// from the bf16 experts `gate_up_proj` [E, H, 2I] and `down_proj` [E, I, H], which transformers
// multiplies as x @ W: the blocks hold W transposed, [E, out, in], MX groups of 32 along `in`,
// element 2k in the low nibble, E8M0 scale bytes (transformers' dequantize: lut[nibble] * 2^(byte
// - 127), then the transpose back). gate and up stay interleaved along 2I as the bf16 tensor has
// them. Biases, attention, routers, embeddings and lm_head stay as they are.
// config.json's quantization_config: {"modules_to_not_convert": [...], "quant_method": "mxfp4"}
// with openai/gpt-oss-20b's list.
#include "io/safetensors.hpp"
#include "model/format.hpp"
#include "model/format_params.hpp"

namespace qexact::model {
namespace {

using checkpoint::detail::Source;
using checkpoint::detail::StoredOutput;
using ordered_json = nlohmann::ordered_json;

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// An expert projection of a gpt-oss MoE layer, [E, in, out].
bool expert_projection(const Source& s) {
  return s.shape.size() == 3 && (ends_with(s.name, ".mlp.experts.gate_up_proj") || ends_with(s.name, ".mlp.experts.down_proj"));
}

class GptOss final : public Format {
 public:
  const char* name() const override { return "gpt-oss-mxfp4"; }
  const char* about() const override {
    return "gpt-oss's MXFP4 experts (*_blocks / *_scales) as OpenAI ships them, for transformers, vLLM and llama.cpp's "
           "converter";
  }
  const char* default_preset() const override { return "mxfp4.triton"; }

  void check(const Contract& c, bool /*recomputing*/) const override {
    const auto p = param_map(c);
    const auto refuse = [&](const std::string& why) {
      refuse_contract(name(), c, why, "mxfp4.triton and MXFP4 contracts of the same layout (mx.ocp.e2m1, mxfp4.ct, ...)");
    };
    if (c.family != Family::mx || param_or(p, "element") != "e2m1") refuse("its experts are MXFP4 (family mx, element=e2m1)");
    if (const std::string why = mx_layout_mismatch(p); !why.empty()) refuse(why);
  }

  bool selects(const Source& s) const override { return expert_projection(s); }
  std::string fixed_selection() const override {
    return "quantizes every expert projection (mlp.experts.gate_up_proj, down_proj) and nothing else: its loaders "
           "convert every expert module, and no other";
  }
  bool transposed(const Source& s) const override { return expert_projection(s); }
  bool shares_tensor_amax(const Contract&) const override { return false; }

  void check_dynamic_activations(const Contract&) const override {
    fail(ErrorKind::bad_argument, "--activations dynamic: gpt-oss's MXFP4 is weight-only");
  }

  std::vector<StoredOutput> stored(const Contract&, const Source& s, const std::vector<OutputSpec>& outputs) const override {
    const Shape& scale = outputs[1].shape;  // [E, out, in / 32]
    Shape blocks = scale;
    blocks.push_back(16);
    return {plain(s.name + "_blocks", "U8", blocks), plain(s.name + "_scales", "U8", scale)};
  }

  bool recognizes(const ordered_json& q) const override {
    return q.is_object() && q.value("quant_method", std::string()) == "mxfp4";
  }
  std::string preset_of(const ordered_json&) const override { return "mxfp4.triton"; }
  const char* tensor_scale_meaning() const override { return "no tensor scale"; }

  // `<p>_blocks` [E, out, in / 32, 16]: the expert `<p>` [E, in, out].
  std::vector<Source> sources_in(const Folder& q, const std::string& dtype) const override {
    std::vector<Source> out;
    for (const auto& [name, where] : q.tensors) {
      if (!ends_with(name, "_blocks") || !q.tensors.count(name.substr(0, name.size() - 7) + "_scales")) continue;
      const Shape& b = q.info(name).shape;
      if (b.size() != 4) continue;
      const Shape shape{b[0], b[2] * 32, b[1]};
      out.push_back({name.substr(0, name.size() - 7), dtype, shape,
                     static_cast<std::uint64_t>(shape_numel(shape)) * safetensors::itemsize(dtype)});
    }
    return out;
  }
  const char* ignore_key() const override { return "modules_to_not_convert"; }

  std::map<std::string, std::string> write_config(ordered_json& config, const Contract&, const Written&) const override {
    ordered_json q;
    q["modules_to_not_convert"] = {"model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"};
    q["quant_method"] = "mxfp4";
    config["quantization_config"] = q;
    return {};
  }
};

}  // namespace

const Format& gpt_oss_format() {
  static const GptOss f;
  return f;
}

}  // namespace qexact::model
