// The nvfp4 fast kernel's per-block scalar steps, on fp32 bits (no value tables): the E4M3 block
// scale, the multiplier of the block's elements, and the E2M1 code of one scaled element, with
// the NaN bits torchao 0.18.0 on x86 produces (docs/decisions.md): a division returns its first
// NaN operand, `x * multiplier` the multiplier's NaN, an invalid operation the x86 default NaN.
#pragma once
#include <cstdint>
#include <cmath>
#include <cstring>

#include "formats/torchao_nan.hpp"
#include "qexact/formats/bf16.hpp"
#include "qexact/formats/fp16.hpp"
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

// E4M3 code of a finite v >= 0, rounded to nearest even and saturated at 448 (cvt satfinite):
// subnormals (below 2^-6) are multiples of 2^-9, and v * 2^9 is exact.
inline std::uint8_t e4m3_satfinite_code(float v) {
  if (v >= 448.0f) return 0x7E;
  if (v < 0x1p-6f) return static_cast<std::uint8_t>(std::nearbyint(v * 512.0f));
  const std::uint32_t b = bits(v);
  return static_cast<std::uint8_t>(((b + 0x7FFFFu + ((b >> 20) & 1u)) >> 20) - (120u << 3));
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

// TransformerEngine (tensor_scale=te): e4m3(amax * (S_enc * fp32(1/6))), the multiplier
// 1 / (s * (1 / S_enc)) capped at FLT_MAX.
inline BlockScale te_block_scale(float amax, float s_enc) {
  const std::uint8_t code = e4m3_satfinite_code(amax * (s_enc * (1.0f / 6.0f)));
  const float m = 1.0f / (e4m3_scale_value(code) * (1.0f / s_enc));
  return {code, m < 0x1.fffffep127f ? m : 0x1.fffffep127f};
}

// scale_arith=input: v rounded (RNE) to the input's dtype; f32 input, or input_arith off, as is.
inline float in_input_dtype(bool input_arith, DType dtype, float v) {
  if (!input_arith) return v;
  return dtype == DType::bf16 ? round_bf16(v) : dtype == DType::f16 ? round_f16(v) : v;
}

// plan.general (ModelOpt, compressed-tensors): the unrounded block scale by the plan's steps, the
// zero rule, the clamp to [block_min, 448], the E4M3 code (subnormals included: block_min may be
// below 2^-6), and the zero code's replacement by E4M3's epsilon.
template <class Plan>
inline std::uint8_t general_block_code(const Plan& p, float amax) {
  float s;
  if (p.multiplier) {
    s = p.tensor_scale * in_input_dtype(p.input_arith, p.dtype, div_x86(amax, 6.0f));
  } else if (p.fused) {
    s = div_x86(amax, 6.0f * p.tensor_scale);
  } else {
    s = div_x86(amax, 6.0f);
    if (p.two_level) s = div_x86(s, p.tensor_scale);
  }
  if (p.zero_one && s == 0.0f) s = 1.0f;
  std::uint8_t code;
  if (is_nan_bits(bits(s))) {
    code = static_cast<std::uint8_t>(((bits(s) >> 31) << 7) | 0x7Fu);
  } else {
    code = e4m3_satfinite_code(s < p.block_min ? p.block_min : s > 448.0f ? 448.0f : s);
  }
  return p.zero_eps && code == 0 ? std::uint8_t{0x20} : code;
}

// plan.general, quotient=divide: the block's whole descale (s * t, s / gs, or s).
template <class Plan>
inline float general_block_descale(const Plan& p, std::uint8_t code) {
  const float s = e4m3_scale_value(code);
  if (p.multiplier) return div_x86(s, p.tensor_scale);
  return p.two_level ? s * p.tensor_scale : s;
}

// A zero code's sign by signed_zero, from the quotient q: keep q's sign bit, drop it, or
// (underflow) keep it only where q < 0.
inline std::uint8_t zero_sign(SignedZero rule, std::uint8_t code, float q) {
  if ((code & 7u) != 0 || rule == SignedZero::keep) return code;
  return rule == SignedZero::underflow && q < 0.0f ? std::uint8_t{8} : std::uint8_t{0};
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

// quotient=prescaled: a zero of v's sign where ftz is on and v is subnormal.
inline float flush_if(bool ftz, float v) { return ftz && (bits(v) & 0x7FFFFFFFu) < 0x00800000u ? value(bits(v) & 0x80000000u) : v; }

// XLA:CPU's a * b on x86: a's NaN (quieted), else b's, else the default NaN of 0 * inf; ftz on
// the operands and the result.
inline float xla_mul(bool ftz, float a, float b) {
  a = flush_if(ftz, a);
  b = flush_if(ftz, b);
  if (is_nan_bits(bits(a))) return value(bits(a) | 0x00400000u);
  if (is_nan_bits(bits(b))) return value(bits(b) | 0x00400000u);
  const float r = a * b;
  return is_nan_bits(bits(r)) ? value(kX86DefaultNaN) : flush_if(ftz, r);
}

inline float xla_reciprocal(bool ftz, float d) { return flush_if(ftz, 1.0f / flush_if(ftz, d)); }

}  // namespace qexact::kernels::nvfp4
