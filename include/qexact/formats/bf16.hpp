// bfloat16 <-> fp32.
// Rounding: round to nearest, ties to even, by the integer trick on the fp32 bits (never a
// round trip through a narrower type the compiler could remove). Overflow: a finite fp32 above
// bf16's largest finite rounds to +/-inf, as RNE dictates. NaN: stays NaN (quiet bit forced,
// sign kept), never rounds into an infinity.
#pragma once
#include <bit>
#include <cstdint>

namespace qexact {

inline float bf16_to_f32(std::uint16_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

inline std::uint16_t f32_to_bf16(float x) {
  std::uint32_t b = std::bit_cast<std::uint32_t>(x);
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((b >> 16) | 0x0040u);
  b += 0x7FFFu + ((b >> 16) & 1u);
  return static_cast<std::uint16_t>(b >> 16);
}

// bf16(x): x rounded to the nearest bf16 value, returned as fp32.
inline float round_bf16(float x) { return bf16_to_f32(f32_to_bf16(x)); }

}  // namespace qexact
