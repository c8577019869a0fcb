// Scalar reference quantizers: written to be obviously correct, in the order the contract
// states its steps, and independent of the fast kernels (element rounding by search over the
// format's value table; no shared code path). Each entry point is checked: it validates shape,
// contract and values before producing output, and throws qexact::Error.
#pragma once
#include "qexact/contract.hpp"
#include "qexact/pool.hpp"
#include "qexact/quantize.hpp"
#include "qexact/tensor.hpp"

namespace qexact::ref {

// MX family (contracts §1-2): x of rank >= 1, groups along the last axis.
QuantResult quantize_mx(const Contract& c, const TensorView& x);
Tensor dequantize_mx(const Contract& c, const TensorView& payload, const TensorView& scale, const Shape& x_shape);
// Flat offset of group g of row t (of `groups` per row) in c's scale layout.
std::int64_t mx_scale_offset(const ScaleSpec& c, std::int64_t t, std::int64_t g, std::int64_t groups);
// The fp32 value a group's elements are divided by, for scale byte `byte` under c's rules.
float mx_divisor(const Contract& c, std::uint8_t byte);
QuantResult quantize_mx_with_scales(const Contract& c, const TensorView& x, const TensorView& scale);

// int8 per (b, head, token block) on (B, S, N, D) (contracts §3).
QuantResult quantize_int8_block(const Contract& c, const TensorView& x);
// int8 per token over the complete last axis (contracts §4); rows = product of leading dims.
QuantResult quantize_int8_token(const Contract& c, const TensorView& x);
// int8 per group of c.group along the last axis (ggml q8_0).
QuantResult quantize_int8_group(const Contract& c, const TensorView& x);
// fp32 values of any int8 family's output.
Tensor dequantize_int8(const Contract& c, const TensorView& payload, const TensorView& scale, const Shape& x_shape);

// The contract's element steps with scales given from outside (a device's), in the contract's
// scale shape, layout and dtype, for the MX, int8 and nvfp4 families: each group's payload is
// what the contract makes of its elements with that scale. MX: the given byte replaces the computed
// one (the non-finite rules, which read the input, still decide those groups). int8: a domain
// whose given scale equals the contract's own uses the contract's quotient; another one is
// divided by it (quotient=divide) or multiplied by fp32(1 / it) (the multiplying quotients).
// nvfp4: the given E4M3 codes replace the computed ones; the tensor scale is the computed one.
// fp8.scaled: as int8, a given scale equal to the contract's own uses the contract's own; another
// is read back from its stored form (stored=inverse: fp32(1 / it)) and used by the contract's
// quotient; a given 0 under zero_group=zero is a zero domain (payload 0).
// The result's scale is the given one. Used to separate scale errors from payload errors.
QuantResult quantize_with_scales(const Contract& c, const TensorView& x, const TensorView& scale);

// fp8.scaled (contracts §9.1): u8 E4M3/E5M2 codes of x's shape, f32 scales in the granularity's shape.
QuantResult quantize_fp8_scaled(const Contract& c, const TensorView& x);
QuantResult quantize_fp8_scaled_with_scales(const Contract& c, const TensorView& x, const TensorView& scale);
Tensor dequantize_fp8_scaled(const Contract& c, const TensorView& payload, const TensorView& scale, const Shape& x_shape);

// nvfp4 (contracts §9.2): u8 packed E2M1 pairs, u8 E4M3 block scales, f32 [] tensor scale when
// tensor_scale=amax (t) or te (the amax); else QuantResult::tensor_scale stays empty and
// `tensor_scale` is ignored.
QuantResult quantize_nvfp4(const Contract& c, const TensorView& x);
Tensor dequantize_nvfp4(const Contract& c, const TensorView& payload, const TensorView& scale,
                        const TensorView& tensor_scale, const Shape& x_shape);
// nvfp4's payload from given E4M3 block-scale codes (u8, the scale shape); the tensor scale, if
// any, is the one the contract computes from x.
QuantResult quantize_nvfp4_with_scales(const Contract& c, const TensorView& x, const TensorView& scale);

// HiFloat4 (contracts §5).
Tensor hif4_fake_quant(const TensorView& x, int qdim);
Hif4Packed hif4_pack(const TensorView& x);
Tensor hif4_unpack(const TensorView& scale, const TensorView& value);

// Pooled block mean (contracts §6), see qexact/pool.hpp.
Tensor pooled_block_mean(const TensorView& x, std::int64_t pool, DType out,
                         PoolDivisor divisor = PoolDivisor::true_length);

}  // namespace qexact::ref
