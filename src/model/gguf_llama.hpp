// The llama family of architectures as llama.cpp reads them from a GGUF file, made from a
// transformers folder the way llama.cpp's convert_hf_to_gguf.py makes it: `llama` (model_type
// llama, mistral) and `qwen2` (model_type qwen2: biases on q/k/v). The hyperparameter keys
// `<arch>.*`, the tensor names (token_embd, blk.N.attn_q, ...), and for llama the row order its
// rope needs in attn_q / attn_k (transformers rotates the two halves of each head; ggml's llama
// rope rotates adjacent pairs, so each head's rows are interleaved: row 2i + j of a head is
// transformers' row j * (head_dim / 2) + i). qwen2's rope is NeoX's, transformers' own order.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "io/gguf.hpp"

namespace qexact::model {

struct LlamaShape {
  std::string arch = "llama";  // the GGUF architecture: llama, qwen2
  bool interleave_rope = true;  // attn_q / attn_k rows reordered (llama)
  std::int64_t layers = 0, hidden = 0, ffn = 0, heads = 0, kv_heads = 0, head_dim = 0, context = 0, vocab = 0;
  double rms_eps = 1e-6, rope_theta = 10000.0;
};

// The architecture and hyperparameters of config.json; bad_input naming the field for a model of
// another model_type (the ones it takes are named), a missing or non-positive field, or a rope
// scaling llama.cpp computes from extra tensors (rope_type other than "default").
LlamaShape llama_shape(const nlohmann::ordered_json& config, const std::string& source);

// The <arch>.* metadata of that shape.
void add_llama_metadata(gguf::Metadata& m, const LlamaShape& s);

// The GGUF name of a transformers tensor (the same in llama and qwen2), or none for one llama.cpp's
// converter drops (rotary_emb.inv_freq); bad_input naming the tensor for one it has no name for.
std::optional<std::string> llama_tensor_name(const std::string& hf_name, const std::string& source);

// The heads whose rows a tensor's rope permutation interleaves: attention heads for q_proj,
// key-value heads for k_proj; 0 for any other tensor, and for every tensor of an architecture
// without the permutation.
std::int64_t rope_heads(const std::string& hf_name, const LlamaShape& s);

// The rows of a [rows, cols] row-major tensor of `elem` bytes reordered for ggml's rope over
// `heads` heads (rows / heads per head, an even number).
void interleave_rope_rows(std::uint8_t* data, std::int64_t rows, std::int64_t cols, std::size_t elem, std::int64_t heads);

}  // namespace qexact::model
