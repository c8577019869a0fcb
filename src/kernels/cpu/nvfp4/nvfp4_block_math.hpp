// The nvfp4 fast kernel's per-block scalar steps, on fp32 bits (no value tables): the E4M3 block
// scale, the multiplier of the block's elements, and the E2M1 code of one scaled element, with
// the NaN bits torchao 0.18.0 on x86 produces (docs/decisions.md): a division returns its first
// NaN operand, `x * multiplier` the multiplier's NaN, an invalid operation the x86 default NaN.
#pragma once
#include <cstdint>
#include <cstring>

#include "formats/torchao_nan.hpp"
#include "qexact/contract.hpp"

namespace qexact::kernels::nvfp4 {

inline std::uint32_t bits(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}
inline float value(std::uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}
inline bool is_nan_bits(std::uint32_t b) { return (b & 0x7FFFFFFFu) > 0x7F800000u; }

inline float div_x86(float a, float b) {
  if (is_nan_bits(bits(a))) return value(bits(a) | 0x00400000u);
  if (is_nan_bits(bits(b))) return value(bits(b) | 0x00400000u);
  const float r = a / b;
  return is_nan_bits(bits(r)) ? value(kX86DefaultNaN) : r;
}

inline float mul_multiplier_x86(float x, float m) {
  if (is_nan_bits(bits(m))) return value(bits(m) | 0x00400000u);
  if (is_nan_bits(bits(x))) return value(bits(x) | 0x00400000u);
  const float r = x * m;
  return is_nan_bits(bits(r)) ? value(kX86DefaultNaN) : r;
}

// E4M3 code of a value clamped to [2^-6, 448] (a normal, rounded to nearest even on the
// significand bits; the clamp keeps it from rounding past 448), or of a NaN: sign | 0x7F.
inline std::uint8_t e4m3_clamped_code(float s) {
  const std::uint32_t b = bits(s);
  if (is_nan_bits(b)) return static_cast<std::uint8_t>(((b >> 31) << 7) | 0x7Fu);
  const float c = s < 0x1p-6f ? 0x1p-6f : s > 448.0f ? 448.0f : s;
  const std::uint32_t cb = bits(c);
  const std::uint32_t r = (cb + 0x7FFFFu + ((cb >> 20) & 1u)) >> 20;  // exponent(8) | mantissa(3)
  return static_cast<std::uint8_t>(r - (120u << 3));                  // rebias 127 -> 7
}

// torch's float8_e4m3fn -> fp32: a NaN code reads back as sign | 0x7FF00000.
inline float e4m3_scale_value(std::uint8_t code) {
  const std::uint32_t sign = static_cast<std::uint32_t>(code >> 7) << 31;
  const std::uint32_t e = (code >> 3) & 0xFu, m = code & 7u;
  if (e == 0xFu && m == 7u) return value(sign | 0x7FF00000u);
  if (e == 0) return value(sign | bits(static_cast<float>(m) * 0x1p-9f));  // subnormal: m * 2^-9
  return value(sign | ((e + 120u) << 23) | (m << 20));
}

struct BlockScale {
  std::uint8_t code;
  float multiplier;  // elements are x * multiplier
};

// amax: the block's max |x| (any NaN: a NaN); t: the tensor scale (two_level only).
inline BlockScale block_scale(bool two_level, float amax, float t) {
  float s = div_x86(amax, 6.0f);
  if (two_level) s = div_x86(s, t);
  const std::uint8_t code = e4m3_clamped_code(s);
  const float one = two_level ? div_x86(1.0f, t) : 1.0f;
  return {code, div_x86(one, e4m3_scale_value(code))};
}

// E2M1 code of |v| <= 6 (clamped) by its round-to-nearest-even thresholds: a tie goes to the
// even code (0.25 -> 0, 0.75 -> 1.0, 1.25 -> 1.0, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4).
inline std::uint8_t e2m1_magnitude_code(float a) {
  return static_cast<std::uint8_t>((a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) +
                                   (a >= 3.5f) + (a > 5.0f));
}

// One element, any input: clamp to +/-6 (a NaN passes), then the code; a NaN's code is what
// torchao's bit conversion makes of its bits.
inline std::uint8_t e2m1_code(float x, float multiplier) {
  const float v = mul_multiplier_x86(x, multiplier);
  const std::uint32_t b = bits(v);
  if (is_nan_bits(b)) return torchao_nan_code(ElemFormat::e2m1, b);
  const float a = value(b & 0x7FFFFFFFu);
  return static_cast<std::uint8_t>(e2m1_magnitude_code(a > 6.0f ? 6.0f : a) | ((b >> 31) << 3));
}

}  // namespace qexact::kernels::nvfp4
