// Scalar reference of fp8.scaled (contracts §9.1); the rules every reference follows are in
// reference/README.md.
#pragma once
#include "qexact/contract.hpp"
#include "qexact/quantize.hpp"
#include "qexact/tensor.hpp"

namespace qexact::ref {

// u8 E4M3/E5M2 codes of x's shape, f32 scales in the granularity's shape.
QuantResult quantize_fp8_scaled(const Contract& c, const TensorView& x);
// The payload from given scales (reference/with_scales_ref.hpp).
QuantResult quantize_fp8_scaled_with_scales(const Contract& c, const TensorView& x, const TensorView& scale);
Tensor dequantize_fp8_scaled(const Contract& c, const TensorView& payload, const TensorView& scale, const Shape& x_shape);

}  // namespace qexact::ref
