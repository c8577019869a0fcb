// Scalar reference of nvfp4 (contracts §9.2); the rules every reference follows are in
// reference/README.md.
#pragma once
#include "qexact/contract.hpp"
#include "qexact/quantize.hpp"
#include "qexact/tensor.hpp"

namespace qexact::ref {

// u8 packed E2M1 pairs, u8 E4M3 block scales, f32 [] tensor scale when tensor_scale=amax (t) or
// te (the amax); else QuantResult::tensor_scale stays empty and `tensor_scale` is ignored.
QuantResult quantize_nvfp4(const Contract& c, const TensorView& x);
Tensor dequantize_nvfp4(const Contract& c, const TensorView& payload, const TensorView& scale,
                        const TensorView& tensor_scale, const Shape& x_shape);
// nvfp4's payload from given E4M3 block-scale codes (u8, the scale shape); the tensor scale, if
// any, is the one the contract computes from x.
QuantResult quantize_nvfp4_with_scales(const Contract& c, const TensorView& x, const TensorView& scale);

}  // namespace qexact::ref
