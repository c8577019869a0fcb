// The fast kernels' own conversions between fp32 and the tensor dtypes (float_lanes-inl.h)
// over whole arrays, on the SIMD target dispatch picks: what the tests hold to
// qexact/formats/{bf16,fp16}.hpp bit for bit, NaN, subnormals and overflow included.
#pragma once
#include <cstdint>

#include "qexact/tensor.hpp"

namespace qexact::kernels {

// n elements of dtype dt (f32, bf16 or f16) at in, as fp32.
void widen_to_f32(DType dt, const void* in, std::int64_t n, float* out);
// n fp32 values rounded to dtype dt (f32, bf16 or f16), to nearest even.
void narrow_from_f32(DType dt, const float* in, std::int64_t n, void* out);

}  // namespace qexact::kernels
