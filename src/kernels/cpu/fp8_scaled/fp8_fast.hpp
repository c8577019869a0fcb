// Fast fp8.scaled kernels (contracts §9.1), the entry points of fp8_fast.cpp; the rules every
// fast entry point follows (checks, threads, determinism, the _into forms) are in
// kernels/cpu/README.md.
#pragma once
#include <cstdint>
#include <string>

#include "qexact/contract.hpp"
#include "qexact/quantize.hpp"
#include "qexact/tensor.hpp"

namespace qexact::fast {

// u8 codes of x's shape, f32 scales in the granularity's shape. tensor_amax (tensor granularity
// only): the amax the ranks agreed on for the whole tensor x is a shard of (at least x's own),
// used instead of x's; a NaN one follows the rule of a many-element tensor.
QuantResult quantize_fp8_scaled(const Contract& c, const TensorView& x, int threads);
Tensor dequantize_fp8_scaled(const Contract& c, const TensorView& payload, const TensorView& scale,
                             const Shape& x_shape, int threads);
std::string quantize_fp8_scaled_into(const Contract& c, const TensorView& x, std::uint8_t* payload, float* scale,
                                     int threads, const float* tensor_amax = nullptr);
// quantize_fp8_scaled_into for a caller that has already validated `c`, checked that x is a float
// view and checked the outputs against output_specs(c, x.shape) (quantize.cpp's front door):
// nothing is checked or derived again; the scale's shape is the one `scale` carries.
std::string quantize_fp8_scaled_prechecked(const Contract& c, const TensorView& x, const MutableTensorView& payload,
                                           const MutableTensorView& scale, int threads);
// Quantize with given scales (f32, the scale's checked shape, as scale.npy stores them), after
// quantize.cpp's checks: each domain's codes under its given scale (one equal, bit for bit, to
// the contract's own is the contract's own scale), `scale` a copy of the given ones.
std::string quantize_fp8_scaled_with_scales_prechecked(const Contract& c, const TensorView& x, const TensorView& given,
                                                       const MutableTensorView& payload,
                                                       const MutableTensorView& scale, int threads);
void dequantize_fp8_scaled_into(const Contract& c, const TensorView& payload, const TensorView& scale,
                                const Shape& x_shape, float* out, int threads);

}  // namespace qexact::fast
