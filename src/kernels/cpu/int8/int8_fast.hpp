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
// int8.block, int8.token or int8.group by the contract's family; scale is f32 or f16 per scale_store.
std::string quantize_int8_into(const Contract& c, const TensorView& x, std::int8_t* payload, void* scale, int threads);
void dequantize_int8_into(const Contract& c, const TensorView& payload, const TensorView& scale, const Shape& x_shape,
                          float* out, int threads);

}  // namespace qexact::fast
