// Fast CPU kernels (SIMD via google/highway with run-time dispatch, threads via OpenMP): the
// same contracts as reference/, byte for byte, at memory speed. Each entry point is checked
// like its reference twin and takes the number of threads to use (>= 1). Outputs never depend
// on the thread count or the SIMD target: every output byte is computed by exactly one thread
// from its own block of input.
#pragma once
#include <string>

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

// fp8.scaled (contracts §9.1): u8 codes of x's shape, f32 scales in the granularity's shape.
QuantResult quantize_fp8_scaled(const Contract& c, const TensorView& x, int threads);
Tensor dequantize_fp8_scaled(const Contract& c, const TensorView& payload, const TensorView& scale,
                             const Shape& x_shape, int threads);

Tensor hif4_fake_quant(const TensorView& x, int qdim, int threads);
Hif4Packed hif4_pack(const TensorView& x, int threads);
Tensor hif4_unpack(const TensorView& scale, const TensorView& value, int threads);

// The same kernels writing into caller-provided contiguous outputs of the dtype and shape the
// allocating forms return (quantize_into and its siblings check them before calling). The
// allocating forms call these with uninitialised tensors: every output byte is written here,
// layout padding included. Each returns what its allocating form does besides the tensors.
std::string quantize_mx_into(const Contract& c, const TensorView& x, std::uint8_t* payload, std::uint8_t* scale,
                             int threads);
// int8.block, int8.token or int8.group by the contract's family; scale is f32 or f16 per scale_store.
std::string quantize_int8_into(const Contract& c, const TensorView& x, std::int8_t* payload, void* scale, int threads);
void dequantize_mx_into(const Contract& c, const TensorView& payload, const TensorView& scale, const Shape& x_shape,
                        float* out, int threads);
void dequantize_int8_into(const Contract& c, const TensorView& payload, const TensorView& scale, const Shape& x_shape,
                          float* out, int threads);
// fp8.scaled: payload u8 of x's shape, scale f32 in the granularity's shape. tensor_amax (tensor
// granularity only): the amax the ranks agreed on for the whole tensor x is a shard of (at
// least x's own), used instead of x's; a NaN one follows the rule of a many-element tensor.
std::string quantize_fp8_scaled_into(const Contract& c, const TensorView& x, std::uint8_t* payload, float* scale,
                                     int threads, const float* tensor_amax = nullptr);
void dequantize_fp8_scaled_into(const Contract& c, const TensorView& payload, const TensorView& scale,
                                const Shape& x_shape, float* out, int threads);
// nvfp4: tensor_scale is null unless the contract has a tensor scale (tensor_scale=amax or te: one
// f32). tensor_amax (a contract with a tensor scale only): as for fp8.scaled.
std::string quantize_nvfp4_into(const Contract& c, const TensorView& x, std::uint8_t* payload, std::uint8_t* scale,
                                float* tensor_scale, int threads, const float* tensor_amax = nullptr);
void dequantize_nvfp4_into(const Contract& c, const TensorView& payload, const TensorView& scale,
                           const TensorView& tensor_scale, const Shape& x_shape, float* out, int threads);
void hif4_fake_quant_into(const TensorView& x, int qdim, void* out, int threads);
void hif4_pack_into(const TensorView& x, std::uint8_t* scale, std::uint8_t* value, int threads);
void hif4_unpack_into(const TensorView& scale, const TensorView& value, float* out, int threads);

Tensor pooled_block_mean(const TensorView& x, std::int64_t pool, DType out, int threads,
                         PoolDivisor divisor = PoolDivisor::true_length);

}  // namespace qexact::fast
