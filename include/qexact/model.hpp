// Model folders: a folder as transformers writes it (config.json, the weights in one
// model.safetensors or in shards listed by model.safetensors.index.json, other files) quantized
// into a folder that a loader reads.
//
// Formats (--format):
//   qexact              every shard as checkpoint::quantize_file writes it (qexact's layout and
//                       metadata); tensors selected by `include` / `exclude` (default: all).
//   compressed-tensors  as llm-compressor writes it for vLLM and transformers: nvfp4.ct (the
//                       default), fp8.ct.tensor / .channel / .group / .block, mxfp4.ct, mxfp8.ct;
//                       config.json gets its quantization_config (weights only).
//   modelopt            as ModelOpt's HF export writes it for vLLM and TensorRT-LLM: nvfp4.modelopt
//                       (the default; W4A16_NVFP4), mxfp4.modelopt, fp8.modelopt.export.channel
//                       (FP8_PER_CHANNEL_PER_TOKEN); hf_quant_config.json and config.json's
//                       quantization_config.
//   hf-fp8              fine-grained FP8 as transformers saves it and DeepSeek-V3 ships it, for
//                       transformers, vLLM and SGLang: fp8.hf.block (the default), or any E4M3
//                       tile / tensor contract whose stored scale dequantize multiplies
//                       (fp8.deepseek.128x128); `<m>.weight_scale_inv`.
//   gpt-oss-mxfp4       gpt-oss's experts as OpenAI ships them (*_blocks / *_scales), quantized
//                       transposed: mxfp4.triton; every expert projection, nothing else.
//   gguf                one GGUF v3 file for llama.cpp (`out` is its path), architectures llama
//                       and qwen2: q8_0.ggml (the default) or mxfp4.ggml in ggml's blocks,
//                       llama.cpp's names and rope row order, the byte-level BPE vocabulary.
// A loader format quantizes the Linear weights (rank-2 `<module>.weight`) but lm_head, the
// embeddings and MoE routers, unless `include` / `exclude` are given; NVFP4 fused shards (q/k/v,
// gate/up) are quantized under their group's tensor amax, so that they share one global scale.
//
// Output shards keep the input's shard names, each holding the outputs of the tensors it held;
// the index is written again for the new names; other files are copied. The folder appears
// whole or not at all (one rename), never beside or over its input. Errors as
// qexact/checkpoint.hpp's, and bad_file for a malformed folder (folder.hpp).
#pragma once
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "qexact/checkpoint.hpp"

namespace qexact::model {

struct FolderOptions {
  std::string format = "qexact";
  // verify's recomputation: a format's layout is taken even where its folders also hold
  // calibrated tensors that qexact does not write (ModelOpt's per-tensor FP8 input scales).
  bool recomputing = false;
  // A loader format's config also declares dynamic activation quantization (compressed-tensors
  // FP8: per token, or per group of 128 beside 128x128 weight blocks, as llm-compressor's
  // FP8_DYNAMIC and FP8_BLOCK; MXFP4: per group of 32); the weights are the same.
  bool dynamic_activations = false;
  checkpoint::Options options;  // include / exclude / strict / replace (--force) / run
  // Exactly these tensors, instead of the format's choice or the globs: verify's recomputation
  // of a folder (a set, where thousands of literal globs would cost each tensor a scan of them).
  std::optional<std::set<std::string>> only;
  // Output shards of at most this many bytes (a larger tensor alone), named as transformers
  // names them; 0: each input shard gives the output shard of its name. Loader formats only.
  std::uint64_t max_shard_bytes = 0;
};

struct FolderResult {
  checkpoint::Summary summary;       // all shards, by name
  std::vector<std::string> shards;   // the output's shard files (gguf: the one file)
  std::vector<std::string> notes;    // what the output leaves out, one sentence each (gguf: an unconverted tokenizer)
};

FolderResult quantize_folder(const Contract& c, const std::filesystem::path& in, const std::filesystem::path& out,
                             const FolderOptions& o, const checkpoint::ProgressFn& progress = {});

// The preset a format quantizes with when none is named ("" for qexact's own, which needs one).
std::string default_preset(const std::string& format);

// Every --format, qexact's own first: its name, who writes and reads such folders, and its
// default preset ("" for qexact's own).
struct FormatInfo {
  std::string name, about, preset;
};
std::vector<FormatInfo> folder_formats();

}  // namespace qexact::model
