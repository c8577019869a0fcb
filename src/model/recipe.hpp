// What a quantized model folder was made with, read back: its format (config.json's
// quantization_config, or qexact's shard metadata) and the contract that names; which tensors of
// the source it quantized; and their stored outputs turned back into the contract's own outputs
// (the inverse of Format::stored), for verify's diagnoses, infer's lab and dequantize.
#pragma once
#include <string>
#include <vector>

#include "checkpoint/plan.hpp"
#include "model/folder.hpp"
#include "model/format.hpp"
#include "qexact/contract.hpp"

namespace qexact::model {

struct Recipe {
  const Format* format = nullptr;  // null: qexact's own layout
  std::string format_name;
  Contract contract;
};

// The folder's recipe; `preset` (when not "") replaces the contract it names. bad_input for a
// folder that names none, or a format qexact does not read.
Recipe recipe_of(const Folder& q, const std::string& preset);

// The shape the recipe quantizes a source tensor as (gpt-oss: transposed).
Shape quantized_shape_of(const Recipe& r, const checkpoint::detail::Source& s);
// The stored form of a source tensor's outputs in a folder of this recipe.
std::vector<checkpoint::detail::StoredOutput> stored_of(const Recipe& r, const checkpoint::detail::Source& s);

// The source tensors (float, by name) the folder `q` holds quantized outputs of.
std::vector<checkpoint::detail::Source> quantized_sources(const Recipe& r, const Folder& q, const Folder& source);

// A source tensor as the contract quantizes it: its bytes (transposed where the format says).
Tensor quantized_input(const Recipe& r, const Folder& source, const checkpoint::detail::Source& s);

// The contract's outputs (payload, scale[, tensor_scale], in output_specs' dtypes and shapes)
// from the folder's stored tensors: each stored tensor's bytes reinterpreted, a scale stored
// narrower widened. bad_input naming a stored tensor that is missing or of another size.
std::vector<Tensor> stored_outputs(const Recipe& r, const Folder& q, const checkpoint::detail::Source& s);

}  // namespace qexact::model
