// Fast int8 kernels (contracts §3, §4, ggml q8_0), the entry points of int8_fast.cpp; the rules
// every fast entry point follows (checks, threads, determinism, the _into forms) are in
// kernels/cpu/README.md.
#pragma once
#include <cstdint>
#include <string>

#include "qexact/contract.hpp"
#include "qexact/quantize.hpp"
#include "qexact/tensor.hpp"

namespace qexact::fast {

QuantResult quantize_int8_block(const Contract& c, const TensorView& x, int threads);
QuantResult quantize_int8_token(const Contract& c, const TensorView& x, int threads);
QuantResult quantize_int8_group(const Contract& c, const TensorView& x, int threads);
Tensor dequantize_int8(const Contract& c, const TensorView& payload, const TensorView& scale, const Shape& x_shape,
                       int threads);
// int8.block, int8.token or int8.group by the contract's family, for a caller that has already
// validated `c`, checked that x is a float view and checked the outputs against
// output_specs(c, x.shape) (quantize.cpp's front door): nothing is checked or derived again.
std::string quantize_int8_prechecked(const Contract& c, const TensorView& x, const MutableTensorView& payload,
                                     const MutableTensorView& scale, int threads);
void dequantize_int8_into(const Contract& c, const TensorView& payload, const TensorView& scale, const Shape& x_shape,
                          float* out, int threads);

}  // namespace qexact::fast
