// Scalar reads for the fast kernels' once-per-group steps (a scale, the first offending element
// of an error message): fp32 <-> its bits, and one element of an f32 / bf16 / f16 tensor as fp32
// (exact: every bf16 and f16 value is an fp32 value).
#pragma once
#include <bit>
#include <cstdint>

#include "qexact/formats/bf16.hpp"
#include "qexact/formats/fp16.hpp"
#include "qexact/tensor.hpp"

namespace qexact::kernels {

inline float bits_to_float(std::uint32_t b) { return std::bit_cast<float>(b); }
inline std::uint32_t float_bits(float f) { return std::bit_cast<std::uint32_t>(f); }

inline float load_scalar_f32(DType dt, const std::uint8_t* base, std::int64_t index) {
  if (dt == DType::f32) return reinterpret_cast<const float*>(base)[index];
  const std::uint16_t h = reinterpret_cast<const std::uint16_t*>(base)[index];
  return dt == DType::bf16 ? bf16_to_f32(h) : f16_to_f32(h);
}

}  // namespace qexact::kernels
