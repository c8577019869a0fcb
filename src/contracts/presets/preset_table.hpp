// The named presets, as data grouped by the stack they reproduce (one file per stack in this
// folder, so "what ModelOpt does" is read in one place and a new preset touches its stack's
// file only). qexact/contract.hpp's preset_* functions read this table.
#pragma once
#include <string>
#include <vector>

#include "qexact/contract.hpp"

namespace qexact::presets {

struct PresetDef {
  const char* name;
  const char* description;
  const char* verified;  // "peer", "seed" or "source" (preset_verified)
  void (*setup)(Contract&);
};

// One stack's presets: its key ("torchao"), what it is in words and the presets.
struct StackDef {
  const char* key;
  const char* title;
  std::vector<PresetDef> (*presets)();
};

// Every stack in display order; each stack's function lives in presets/<stack>.cpp.
const std::vector<StackDef>& stack_table();

// One preset with its stack, found by name; null when there is none.
struct FoundPreset {
  const StackDef* stack;
  PresetDef def;
};
const FoundPreset* find_preset(const std::string& name);
// Every preset in stack order.
const std::vector<FoundPreset>& all_presets();

std::vector<PresetDef> ascend_presets();
std::vector<PresetDef> torchao_presets();
std::vector<PresetDef> transformer_engine_presets();
std::vector<PresetDef> ocp_presets();
std::vector<PresetDef> sageattention_presets();
std::vector<PresetDef> vllm_presets();
std::vector<PresetDef> ggml_presets();
std::vector<PresetDef> deepseek_presets();
std::vector<PresetDef> modelopt_presets();
std::vector<PresetDef> compressed_tensors_presets();
std::vector<PresetDef> onnx_presets();
std::vector<PresetDef> jax_presets();
std::vector<PresetDef> quark_presets();
std::vector<PresetDef> transformers_presets();
std::vector<PresetDef> triton_presets();

}  // namespace qexact::presets
