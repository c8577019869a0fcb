// Fast HiFloat4 kernels (contracts §5), the entry points of hif4_fast.cpp; the rules every fast
// entry point follows (checks, threads, determinism, the _into forms) are in
// kernels/cpu/README.md.
#pragma once
#include <cstdint>

#include "qexact/quantize.hpp"
#include "qexact/tensor.hpp"

namespace qexact::fast {

Tensor hif4_fake_quant(const TensorView& x, int qdim, int threads);
Hif4Packed hif4_pack(const TensorView& x, int threads);
Tensor hif4_unpack(const TensorView& scale, const TensorView& value, int threads);
void hif4_fake_quant_into(const TensorView& x, int qdim, void* out, int threads);
void hif4_pack_into(const TensorView& x, std::uint8_t* scale, std::uint8_t* value, int threads);
void hif4_unpack_into(const TensorView& scale, const TensorView& value, float* out, int threads);

}  // namespace qexact::fast
