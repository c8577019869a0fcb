// What each family *is*, one row per family (ggml's type_traits habit): its name, the sections
// of docs/contracts.md that define it, whether it quantizes (payload + scales) and the outputs
// it gives an input shape. Everything outside contracts/ asks this table instead of switching
// on the family; a new family is one row here, one in kernels/family_kernels.cpp, and its own
// files.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "contracts/scale_grain.hpp"
#include "qexact/contract.hpp"
#include "qexact/quantize.hpp"

namespace qexact {

struct FamilyTraits {
  Family family;
  const char* name;      // "mx", "int8.block", ... (family_name)
  const char* sections;  // "§1-2": where docs/contracts.md defines it
  bool quantizes;        // has quantize / dequantize (hif4 packs and fake-quantizes; pool averages)
  // How its "scale" output encodes a scale (scale_encoding(c) in qexact/contract.hpp).
  ScaleEncoding (*scale_encoding)(const Contract& c);
  // What its payload's bytes are (one element code per byte, E2M1 pairs, int8); null where it
  // does not quantize.
  OutputCodes (*payload_codes)(const Contract& c);
  // The outputs for input shape x, checked; called only where `quantizes`.
  std::vector<OutputSpec> (*outputs)(const Contract& c, const Shape& x);
  // Which elements share one scale, as a granularity over x (contracts/scale_grain.hpp): the
  // scale domains that the lab, the collective judge and the references index by. Null for pool
  // (its cells are not scale domains).
  ScaleGrain (*grain)(const Contract& c);
  // One scale domain in words ("groups of 32", "row scales", "blocks of 16"), for messages that
  // name what a shard boundary cuts. Null for pool.
  std::string (*domain_words)(const Contract& c);
  // The contract parameter that sets the grain's run length ("block", "token_block", "group"),
  // as messages name it; null where the grain is fixed (int8.token, hif4, nvfp4) or is itself
  // the parameter (fp8.scaled's granularity: its letters N, M, T name the runs).
  const char* grain_param;
  // Where a piece of the last axis cannot be quantized on its own (MX packs element pairs and
  // pairs its scales, int8.group and nvfp4 need whole groups, int8.token the whole row), the
  // words that name the domains along it in a sharding refusal ("its scale groups"); null where
  // the grain decides (fp8.scaled: a partial group is a scale domain of its own).
  const char* uncut_last_axis;
};

const FamilyTraits& family_traits(Family f);
// Every family, in declaration order.
const std::vector<FamilyTraits>& family_table();

// The names of the outputs a quantizing contract gives any input, in output_specs order
// ("payload", "scale", then "tensor_scale" where the contract has one): what a caller needs
// before it knows the input's shape (the files of an output directory). Checked equal to
// output_specs' names by the tests.
std::vector<std::string> output_names(const Contract& c);
// The same names with what each output's elements are (OutputSpec::codes), for readers that
// view the bytes before they know a shape (Python's torch and numpy dtypes).
std::vector<std::pair<std::string, OutputCodes>> output_codes(const Contract& c);

// Checks the quantized tensors a dequantizer is handed against output_specs(c, x): each output
// the contract has is present, of its dtype and shape (tensor_scale: an empty view, data ==
// nullptr, where the contract has none). Throws bad_argument naming the first one that is not.
void require_quantized(const Contract& c, const TensorView& payload, const TensorView& scale,
                       const TensorView& tensor_scale, const Shape& x);

// Throws bad_argument naming the contract when its family does not quantize.
void require_quantizer(const Contract& c, const char* what);

}  // namespace qexact
