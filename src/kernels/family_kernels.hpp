// The engines of each quantizing family, one row per family (ggml's type_traits_cpu beside
// contracts/family_table's type_traits): the scalar reference and the fast kernel for quantize
// and dequantize, behind one signature each so that quantize.cpp is lookups. A new family adds
// one row here.
#pragma once
#include <string>

#include "qexact/contract.hpp"
#include "qexact/quantize.hpp"
#include "qexact/tensor.hpp"

namespace qexact {

// Checked, contiguous outputs in output_specs order; tensor_scale.data is null for contracts
// without one.
struct QuantOutputs {
  MutableTensorView payload;
  MutableTensorView scale;
  MutableTensorView tensor_scale;
};
// The quantized inputs of dequantize; tensor_scale.data is null for contracts without one.
struct QuantInputs {
  TensorView payload;
  TensorView scale;
  TensorView tensor_scale;
};

struct FamilyKernels {
  Family family;
  QuantResult (*ref_quantize)(const Contract& c, const TensorView& x);
  // The reference's element steps with scales given from outside (ref::quantize_with_scales).
  QuantResult (*ref_quantize_with_scales)(const Contract& c, const TensorView& x, const TensorView& scale);
  Tensor (*ref_dequantize)(const Contract& c, const QuantInputs& q, const Shape& x_shape);
  // Writes every byte of `out` (layout padding included); returns QuantResult::path. Called with
  // `c` validated, x a float view and `out` checked against output_specs(c, x.shape): the kernel
  // checks and derives nothing again (its shapes are the ones `out` carries).
  std::string (*fast_quantize_into)(const Contract& c, const TensorView& x, const QuantOutputs& out, int threads);
  void (*fast_dequantize_into)(const Contract& c, const QuantInputs& q, const Shape& x_shape, float* out,
                               int threads);
  // The fast quantizer with the tensor amax given (the ranks' agreed one, at least x's own)
  // instead of its own amax pass; null for a family without a tensor amax. Its checks are its
  // own (x is a shard, `out` allocated from output_specs).
  std::string (*fast_quantize_with_amax)(const Contract& c, const TensorView& x, const QuantOutputs& out, float amax,
                                         int threads);
  // The fast quantizer with scales given from outside (ref_quantize_with_scales' contract), after
  // quantize_with_scales' checks (`scale` of the scale output's dtype and shape); null where the
  // family has none yet.
  std::string (*fast_quantize_with_scales)(const Contract& c, const TensorView& x, const TensorView& scale,
                                           const QuantOutputs& out, int threads);
};

// The row of a quantizing family; throws bad_argument for hif4 and pool.
const FamilyKernels& family_kernels(const Contract& c, const char* what);

}  // namespace qexact
