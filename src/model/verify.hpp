// `qexact verify QUANTIZED --source ORIGINAL`: a quantized model folder checked against the model
// it came from. Every quantized tensor is recomputed from the source with the recipe the folder's
// config names (or a preset given), in the folder's own format, and compared stored tensor by
// stored tensor; then what a loader relies on beyond the bytes: names, dtypes and shapes, fused
// shards that must share a global scale, a global scale stored the other way round, config
// fields (the ignore list against what is quantized), missing or extra tensors.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "qexact/quantize.hpp"

namespace qexact::model {

struct StoredDiff {
  std::string name;               // the stored tensor
  std::uint64_t differing = 0, bytes = 0;
};

struct TensorVerdict {
  std::string source;              // the source tensor (`<m>.weight`)
  std::vector<StoredDiff> stored;  // its stored outputs, in output order
  // compare's diagnoses where bytes differ (signature, how it was found, the explanation), for
  // the first 8 differing tensors; or why a tensor was not diagnosed.
  std::vector<std::string> diagnoses;
  std::uint64_t differing() const;
};

struct Verification {
  std::string format, preset;      // what was verified against
  std::vector<TensorVerdict> tensors;   // the quantized tensors, by name
  std::vector<std::string> findings;    // loader-contract findings, one sentence each
  std::uint64_t differing = 0, bytes = 0;
  // Activation scales (input_scale, input_global_scale) come from calibration and cannot be
  // recomputed from the weights: they are checked for dtype, one element, a positive finite
  // value and, for fused shards, one value per group.
  std::uint64_t activation_scales = 0;
  bool ok() const { return differing == 0 && findings.empty(); }
};

struct VerifyOptions {
  std::string preset;  // "" : the one the folder's config (or qexact metadata) names
  RunOptions run;
};

// `quantized` a folder, or a GGUF file (verify_gguf).
Verification verify_folder(const std::filesystem::path& quantized, const std::filesystem::path& source,
                           const VerifyOptions& o);

// A GGUF file against the transformers folder it came from (verify_gguf.cpp).
Verification verify_gguf(const std::filesystem::path& quantized, const std::filesystem::path& source, const VerifyOptions& o);

}  // namespace qexact::model
