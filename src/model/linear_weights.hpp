// Which tensors of a transformer a loader format quantizes by default, and which of them the
// loaders fuse. The names are those transformers gives its modules (Llama, Qwen, Mistral,
// Mixtral, DeepSeek, gpt-oss style MoE experts).
#pragma once
#include <string>

#include "qexact/tensor.hpp"

namespace qexact::model {

// A Linear layer's weight: a rank-2 tensor named `<module>.weight`.
bool is_linear_weight(const std::string& name, const Shape& shape);

// The Linear weights every loader format leaves unquantized by default, as llm-compressor's and
// ModelOpt's recipes do: the output head (lm_head), embeddings, and MoE routers (`mlp.gate`,
// `router`), whose outputs pick experts and are kept at full precision.
bool ignored_by_default(const std::string& name);

// The module of a weight (`model.layers.0.mlp.up_proj` of `...up_proj.weight`).
std::string module_of(const std::string& weight_name);

// The fused group a weight belongs to, or "" for none: q/k/v projections of one attention
// block fuse into qkv_proj, gate/up projections of one MLP or expert (also w1/w3) into
// gate_up_proj, in vLLM and TensorRT-LLM; they must share a tensor scale there.
std::string fused_group(const std::string& weight_name);

}  // namespace qexact::model
