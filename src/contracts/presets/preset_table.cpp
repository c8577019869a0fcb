#include "contracts/presets/preset_table.hpp"

#include <unordered_map>

#include "qexact/error.hpp"

namespace qexact::presets {

const std::vector<StackDef>& stack_table() {
  static const std::vector<StackDef> stacks = {
      {"ascend", "Huawei Ascend, the seeds' device measurements", ascend_presets},
      {"torchao", "torchao 0.18.0 on torch 2.15 (CPU)", torchao_presets},
      {"transformer-engine", "NVIDIA TransformerEngine (read from its source)", transformer_engine_presets},
      {"ocp", "OCP Microscaling v1.0 and its reference code, microsoft/microxcaling", ocp_presets},
      {"sageattention", "SageAttention's int8 kernels (read from their source)", sageattention_presets},
      {"vllm", "vLLM's dynamic quantization ops (read from their source)", vllm_presets},
      {"ggml", "ggml / llama.cpp, as gguf-py 0.19.0 computes it", ggml_presets},
      {"deepseek", "DeepSeek-V3 inference kernels and DeepGEMM's casts (read from their source)", deepseek_presets},
      {"modelopt", "NVIDIA ModelOpt 0.47.0 on torch 2.15 (CPU)", modelopt_presets},
      {"compressed-tensors", "compressed-tensors 0.20.1 (vLLM's checkpoint format) on torch 2.15 (CPU)",
       compressed_tensors_presets},
      {"onnx", "ONNX QuantizeLinear: onnx 1.22.0's reference evaluator and onnxruntime 1.31.1 (CPU)", onnx_presets},
      {"jax", "JAX 0.12.0.1 on XLA:CPU (Python 3.12)", jax_presets},
      {"quark", "AMD Quark 0.13 (amd-quark) on torch 2.15 (CPU)", quark_presets},
      {"transformers", "Hugging Face transformers 5.24.0's quantize-on-load ops on torch 2.15 (CPU)", transformers_presets},
      {"triton", "triton-lang triton_kernels' MX casts (read from their source)", triton_presets},
  };
  return stacks;
}

const std::vector<FoundPreset>& all_presets() {
  static const std::vector<FoundPreset> all = [] {
    std::vector<FoundPreset> out;
    for (const StackDef& s : stack_table())
      for (const PresetDef& d : s.presets()) out.push_back({&s, d});
    return out;
  }();
  return all;
}

const FoundPreset* find_preset(const std::string& name) {
  // A map, not a scan: lookups happen per tensor in checkpoints and per candidate in infer.
  static const std::unordered_map<std::string, const FoundPreset*> by_name = [] {
    std::unordered_map<std::string, const FoundPreset*> m;
    for (const FoundPreset& p : all_presets())
      if (!m.emplace(p.def.name, &p).second)
        fail(ErrorKind::bad_argument, std::string("preset '") + p.def.name + "' is defined twice");
    return m;
  }();
  const auto it = by_name.find(name);
  return it == by_name.end() ? nullptr : it->second;
}

}  // namespace qexact::presets
