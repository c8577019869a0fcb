// Scalar reference of HiFloat4 (contracts §5); the rules every reference follows are in
// reference/README.md.
#pragma once
#include "qexact/quantize.hpp"
#include "qexact/tensor.hpp"

namespace qexact::ref {

Tensor hif4_fake_quant(const TensorView& x, int qdim);
Hif4Packed hif4_pack(const TensorView& x);
Tensor hif4_unpack(const TensorView& scale, const TensorView& value);

}  // namespace qexact::ref
