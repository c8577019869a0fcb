// Scalar reference of the MX family (contracts §1-2); the rules every reference follows are in
// reference/README.md.
#pragma once
#include <cstdint>

#include "qexact/contract.hpp"
#include "qexact/quantize.hpp"
#include "qexact/tensor.hpp"

namespace qexact::ref {

// x of rank >= 1, groups along the last axis.
QuantResult quantize_mx(const Contract& c, const TensorView& x);
Tensor dequantize_mx(const Contract& c, const TensorView& payload, const TensorView& scale, const Shape& x_shape);
// Flat offset of group g of row t (of `groups` per row) in c's scale layout.
std::int64_t mx_scale_offset(const ScaleSpec& c, std::int64_t t, std::int64_t g, std::int64_t groups);
// The fp32 value a group's elements are divided by, for scale byte `byte` under c's rules.
float mx_divisor(const Contract& c, std::uint8_t byte);
// The payload from given scale bytes (reference/with_scales_ref.hpp).
QuantResult quantize_mx_with_scales(const Contract& c, const TensorView& x, const TensorView& scale);

}  // namespace qexact::ref
