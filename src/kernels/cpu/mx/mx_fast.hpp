// Fast MX kernels (contracts §1-2), the entry points of mx_fast.cpp; the rules every fast entry
// point follows (checks, threads, determinism, the _into forms) are in kernels/cpu/README.md.
#pragma once
#include <cstdint>
#include <string>

#include "qexact/contract.hpp"
#include "qexact/quantize.hpp"
#include "qexact/tensor.hpp"

namespace qexact::fast {

QuantResult quantize_mx(const Contract& c, const TensorView& x, int threads);
Tensor dequantize_mx(const Contract& c, const TensorView& payload, const TensorView& scale, const Shape& x_shape,
                     int threads);
std::string quantize_mx_into(const Contract& c, const TensorView& x, std::uint8_t* payload, std::uint8_t* scale,
                             int threads);
// quantize_mx_into for a caller that has already validated `c`, checked that x is a float view
// and checked the outputs against output_specs(c, x.shape) (quantize.cpp's front door): nothing
// is checked or derived again; the scale's shape is the one `scale` carries.
std::string quantize_mx_prechecked(const Contract& c, const TensorView& x, const MutableTensorView& payload,
                                   const MutableTensorView& scale, int threads);
void dequantize_mx_into(const Contract& c, const TensorView& payload, const TensorView& scale, const Shape& x_shape,
                        float* out, int threads);

}  // namespace qexact::fast
