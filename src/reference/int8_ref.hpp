// Scalar references of the int8 families (contracts §3, §4, ggml q8_0), whose shared steps are
// reference/int8_steps.hpp; the rules every reference follows are in reference/README.md.
#pragma once
#include "qexact/contract.hpp"
#include "qexact/quantize.hpp"
#include "qexact/tensor.hpp"

namespace qexact::ref {

// int8 per (b, head, token block) on (B, S, N, D) (contracts §3).
QuantResult quantize_int8_block(const Contract& c, const TensorView& x);
// int8 per token over the complete last axis (contracts §4); rows = product of leading dims.
QuantResult quantize_int8_token(const Contract& c, const TensorView& x);
// int8 per group of c.group along the last axis (ggml q8_0).
QuantResult quantize_int8_group(const Contract& c, const TensorView& x);
// Any int8 family's element steps with given scales (with_scales_ref.hpp's quantize_with_scales).
QuantResult quantize_int8_with_scales(const Contract& c, const TensorView& x, const TensorView& scale);
// fp32 values of any int8 family's output.
Tensor dequantize_int8(const Contract& c, const TensorView& payload, const TensorView& scale, const Shape& x_shape);

}  // namespace qexact::ref
