// Fast CPU kernels (SIMD via google/highway with run-time dispatch, threads via OpenMP): the
// same contracts as reference/, byte for byte, at memory speed. Each entry point is checked
// like its reference twin and takes the number of threads to use (>= 1). Outputs never depend
// on the thread count or the SIMD target: every output byte is computed by exactly one thread
// from its own block of input.
#pragma once
#include "qexact/contract.hpp"
#include "qexact/pool.hpp"
#include "qexact/quantize.hpp"
#include "qexact/tensor.hpp"

namespace qexact::fast {

QuantResult quantize_mx(const Contract& c, const TensorView& x, int threads);
Tensor dequantize_mx(const Contract& c, const TensorView& payload, const TensorView& scale, const Shape& x_shape,
                     int threads);

QuantResult quantize_int8_block(const Contract& c, const TensorView& x, int threads);
QuantResult quantize_int8_token(const Contract& c, const TensorView& x, int threads);
QuantResult quantize_int8_group(const Contract& c, const TensorView& x, int threads);
Tensor dequantize_int8(const Contract& c, const TensorView& payload, const TensorView& scale, const Shape& x_shape,
                       int threads);

Tensor hif4_fake_quant(const TensorView& x, int qdim, int threads);
Hif4Packed hif4_pack(const TensorView& x, int threads);
Tensor hif4_unpack(const TensorView& scale, const TensorView& value, int threads);

Tensor pooled_block_mean(const TensorView& x, std::int64_t pool, DType out, int threads,
                         PoolDivisor divisor = PoolDivisor::true_length);

}  // namespace qexact::fast
