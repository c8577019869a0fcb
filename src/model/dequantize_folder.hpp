// `qexact dequantize QUANTIZED --out OUT`: a quantized model folder (any format qexact writes but
// GGUF) back into an unquantized one in the model's dtype: each quantized tensor, under its
// source name and shape, is the contract's dequantization of its stored outputs rounded to that
// dtype (RNE); every other tensor and file is copied; config.json loses its
// quantization_config (and ModelOpt's hf_quant_config.json is left out). Shards keep their names;
// one tensor at a time is held in memory. The output appears whole or not at all.
#pragma once
#include <filesystem>
#include <string>

#include "qexact/quantize.hpp"

namespace qexact::model {

struct DequantizeFolderOptions {
  std::string dtype;  // "F32", "BF16" or "F16"; "" : config.json's dtype (torch_dtype), else F32
  RunOptions run;
  bool replace = false;
};

// The dequantized tensors, by source name.
std::vector<std::string> dequantize_folder(const std::filesystem::path& quantized, const std::filesystem::path& out,
                                           const DequantizeFolderOptions& o);

}  // namespace qexact::model
