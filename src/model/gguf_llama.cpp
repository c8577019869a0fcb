#include "model/gguf_llama.hpp"

#include <cstring>
#include <vector>

#include "io/printable.hpp"
#include "qexact/error.hpp"

namespace qexact::model {
namespace {

using ordered_json = nlohmann::ordered_json;

std::int64_t positive(const ordered_json& c, const char* key, const std::string& source) {
  const auto it = c.find(key);
  if (it == c.end() || !it->is_number_integer() || it->get<std::int64_t>() <= 0)
    fail(ErrorKind::bad_input, source + ": config.json has no positive integer \"" + key + "\", which a llama GGUF needs");
  return it->get<std::int64_t>();
}

gguf::Value u32(std::int64_t v) { return {gguf::ValueType::u32, gguf::ValueType::u8, static_cast<std::uint32_t>(v)}; }
gguf::Value f32(double v) { return {gguf::ValueType::f32, gguf::ValueType::u8, static_cast<float>(v)}; }

}  // namespace

LlamaShape llama_shape(const ordered_json& c, const std::string& source) {
  const std::string type = c.value("model_type", std::string());
  if (type != "llama" && type != "mistral" && type != "qwen2")
    fail(ErrorKind::bad_input, source + ": --format gguf writes the llama and qwen2 architectures (model_type llama, "
                                        "mistral, qwen2), and config.json says model_type \"" + io::printable(type) + "\"");
  LlamaShape s;
  if (type == "qwen2") {
    s.arch = "qwen2";
    s.interleave_rope = false;
  }
  s.layers = positive(c, "num_hidden_layers", source);
  s.hidden = positive(c, "hidden_size", source);
  s.ffn = positive(c, "intermediate_size", source);
  s.heads = positive(c, "num_attention_heads", source);
  s.kv_heads = c.contains("num_key_value_heads") && !c["num_key_value_heads"].is_null() ? positive(c, "num_key_value_heads", source) : s.heads;
  s.head_dim = c.contains("head_dim") && !c["head_dim"].is_null() ? positive(c, "head_dim", source) : s.hidden / s.heads;
  s.context = positive(c, "max_position_embeddings", source);
  s.vocab = positive(c, "vocab_size", source);
  if (c.contains("rms_norm_eps") && c["rms_norm_eps"].is_number()) s.rms_eps = c["rms_norm_eps"].get<double>();
  // transformers 5 keeps rope_theta in rope_parameters; earlier versions at the top level.
  const ordered_json rope = c.contains("rope_parameters") && c["rope_parameters"].is_object() ? c["rope_parameters"]
                            : c.contains("rope_scaling") && c["rope_scaling"].is_object()   ? c["rope_scaling"]
                                                                                            : ordered_json::object();
  const std::string rope_type = rope.value("rope_type", rope.value("type", std::string("default")));
  if (rope_type != "default")
    fail(ErrorKind::bad_input, source + ": rope_type \"" + io::printable(rope_type) +
                                   "\" is not written (llama.cpp computes it from extra tensors; the default rope is)");
  if (rope.contains("rope_theta") && rope["rope_theta"].is_number()) s.rope_theta = rope["rope_theta"].get<double>();
  else if (c.contains("rope_theta") && c["rope_theta"].is_number()) s.rope_theta = c["rope_theta"].get<double>();
  if (s.head_dim % 2 != 0) fail(ErrorKind::bad_input, source + ": head_dim " + std::to_string(s.head_dim) + " is odd: rope rotates pairs");
  return s;
}

void add_llama_metadata(gguf::Metadata& m, const LlamaShape& s) {
  m.emplace_back(s.arch + ".block_count", u32(s.layers));
  m.emplace_back(s.arch + ".context_length", u32(s.context));
  m.emplace_back(s.arch + ".embedding_length", u32(s.hidden));
  m.emplace_back(s.arch + ".feed_forward_length", u32(s.ffn));
  m.emplace_back(s.arch + ".attention.head_count", u32(s.heads));
  m.emplace_back(s.arch + ".attention.head_count_kv", u32(s.kv_heads));
  m.emplace_back(s.arch + ".rope.freq_base", f32(s.rope_theta));
  m.emplace_back(s.arch + ".attention.layer_norm_rms_epsilon", f32(s.rms_eps));
  m.emplace_back(s.arch + ".attention.key_length", u32(s.head_dim));
  m.emplace_back(s.arch + ".attention.value_length", u32(s.head_dim));
  m.emplace_back(s.arch + ".rope.dimension_count", u32(s.head_dim));
  m.emplace_back(s.arch + ".vocab_size", u32(s.vocab));
}

std::optional<std::string> llama_tensor_name(const std::string& hf, const std::string& source) {
  if (hf == "model.embed_tokens.weight") return "token_embd.weight";
  if (hf == "model.norm.weight") return "output_norm.weight";
  if (hf == "lm_head.weight") return "output.weight";
  // model.layers.<N>.<module>.<weight|bias> (parsed by hand: std::regex costs a compile per
  // pattern and trips GCC 12's -Wmaybe-uninitialized under the sanitizers).
  const auto ends = [&](const std::string& tail) {
    return hf.size() >= tail.size() && hf.compare(hf.size() - tail.size(), tail.size(), tail) == 0;
  };
  if (hf == "model.rotary_emb.inv_freq" || (hf.rfind("model.layers.", 0) == 0 && ends(".self_attn.rotary_emb.inv_freq")))
    return std::nullopt;
  const std::string prefix = "model.layers.";
  if (hf.rfind(prefix, 0) == 0) {
    std::size_t i = prefix.size();
    while (i < hf.size() && hf[i] >= '0' && hf[i] <= '9') ++i;
    const std::string layer = hf.substr(prefix.size(), i - prefix.size());
    const std::string kind = ends(".weight") ? "weight" : ends(".bias") ? "bias" : "";
    if (!layer.empty() && i < hf.size() && hf[i] == '.' && !kind.empty()) {
      const std::string module = hf.substr(i + 1, hf.size() - (i + 1) - kind.size() - 1);
      static const std::vector<std::pair<std::string, std::string>> names = {
          {"input_layernorm", "attn_norm"},      {"post_attention_layernorm", "ffn_norm"}, {"self_attn.q_proj", "attn_q"},
          {"self_attn.k_proj", "attn_k"},         {"self_attn.v_proj", "attn_v"},           {"self_attn.o_proj", "attn_output"},
          {"mlp.gate_proj", "ffn_gate"},          {"mlp.up_proj", "ffn_up"},                {"mlp.down_proj", "ffn_down"}};
      for (const auto& [from, to] : names)
        if (module == from) return "blk." + layer + "." + to + "." + kind;
    }
  }
  fail(ErrorKind::bad_input, source + ": tensor '" + io::printable(hf) + "' has no name in llama.cpp's llama architecture");
}

std::int64_t rope_heads(const std::string& hf, const LlamaShape& s) {
  if (!s.interleave_rope) return 0;
  const auto ends = [&](const char* tail) {
    const std::size_t n = std::strlen(tail);
    return hf.size() >= n && hf.compare(hf.size() - n, n, tail) == 0;
  };
  if (ends(".self_attn.q_proj.weight") || ends(".self_attn.q_proj.bias")) return s.heads;
  if (ends(".self_attn.k_proj.weight") || ends(".self_attn.k_proj.bias")) return s.kv_heads;
  return 0;
}

void interleave_rope_rows(std::uint8_t* data, std::int64_t rows, std::int64_t cols, std::size_t elem, std::int64_t heads) {
  const std::int64_t per_head = rows / heads, half = per_head / 2;
  if (heads <= 0 || rows % heads != 0 || per_head % 2 != 0)
    fail(ErrorKind::bad_input, "a tensor of " + std::to_string(rows) + " rows is not " + std::to_string(heads) +
                                   " heads of an even number of rows");
  const std::size_t row_bytes = static_cast<std::size_t>(cols) * elem;
  std::vector<std::uint8_t> head(static_cast<std::size_t>(per_head) * row_bytes);
  for (std::int64_t h = 0; h < heads; ++h) {
    std::uint8_t* base = data + static_cast<std::size_t>(h * per_head) * row_bytes;
    std::memcpy(head.data(), base, head.size());
    for (std::int64_t i = 0; i < half; ++i)
      for (std::int64_t j = 0; j < 2; ++j)
        std::memcpy(base + static_cast<std::size_t>(2 * i + j) * row_bytes,
                    head.data() + static_cast<std::size_t>(j * half + i) * row_bytes, row_bytes);
  }
}

}  // namespace qexact::model
