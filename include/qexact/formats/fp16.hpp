// IEEE binary16 <-> fp32.
// Rounding: round to nearest, ties to even, including into and out of fp16 subnormals.
// Overflow: magnitudes that round above 65504 become +/-inf (IEEE behaviour, no saturation).
// NaN: stays NaN (quiet bit forced, sign kept).
#pragma once
#include <bit>
#include <cstdint>

namespace qexact {

inline float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1Fu;
  const std::uint32_t man = h & 0x3FFu;
  if (exp == 0x1Fu) return std::bit_cast<float>(sign | 0x7F800000u | (man << 13));
  if (exp != 0) return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (man << 13));
  // Subnormal or zero: man * 2^-24, exact in fp32.
  const float mag = static_cast<float>(man) * 0x1p-24f;
  return sign ? -mag : mag;
}

inline std::uint16_t f32_to_f16(float x) {
  const std::uint32_t b = std::bit_cast<std::uint32_t>(x);
  const std::uint16_t sign = static_cast<std::uint16_t>((b >> 16) & 0x8000u);
  const std::uint32_t a = b & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<std::uint16_t>(sign | 0x7E00u | ((a >> 13) & 0x3FFu));
  if (a >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // rounds past 65504
  if (a >= 0x38800000u) {  // normal fp16 result
    std::uint32_t r = a - 0x38000000u;  // rebias 127 -> 15
    r += 0xFFFu + ((r >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | (r >> 13));
  }
  if (a < 0x33000000u) return sign;  // below half the smallest subnormal: +/-0
  // Subnormal fp16: shift the full significand, round to nearest even on the dropped bits.
  const std::uint32_t e = a >> 23;
  const std::uint32_t sig = (a & 0x7FFFFFu) | 0x800000u;
  const std::uint32_t shift = 126u - e;  // 14..24
  std::uint32_t q = sig >> shift;
  const std::uint32_t rem = sig & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (q & 1u))) ++q;
  return static_cast<std::uint16_t>(sign | q);
}

inline float round_f16(float x) { return f16_to_f32(f32_to_f16(x)); }

}  // namespace qexact
