// Scalar parts of the fast MX kernel, on the fp32 bits: the scale byte of a group (every rule
// as the device computes it: exponent field, round-up on the mantissa bits) and the exact
// power-of-two multiplier elements are scaled by.
#pragma once
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "formats/torchao_nan.hpp"
#include "kernels/cpu/common/scalar_load.hpp"
#include "kernels/cpu/mx/mx_plan.hpp"

namespace qexact::kernels {

struct GroupScale {
  std::uint8_t byte = 0;
  float multiplier = 1.0f;      // elements are x * multiplier
  int cap_code = 0x7F;          // finite_products: codes are at most this magnitude
  bool ggml_nonfinite = false;  // a nonfinite=ggml group: each code from ggml_nonfinite_group_code
  bool fill = false;            // every code is fill_code
  std::uint8_t fill_code = 0;
  bool signed_nan = false;      // every code is the NaN code with the element's sign
  bool nan_by_element = false;  // a NaN group (torchao, quark): each code from nan_group_code
  bool patch_inf = false;       // nonfinite=quark, a format without NaN: inf elements' codes from
                                // quark_packed_code after the others are encoded
};

inline int clamp_byte(int b) { return std::clamp(b, 0, 254); }

// scale_wrap's floor byte (ggml): 127 + floor(log2 amax) - emax, negative ones wrapping modulo
// 256. A subnormal amax has no exponent field to read: its floor comes from the bit width of
// its significand, or (log2_fp32) from the double log2 rounded to fp32, as the tables are built.
inline int wrapped_floor_byte(const MxPlan& p, std::uint32_t amax) {
  if (amax == 0) return 0;
  int e = static_cast<int>(amax >> 23);
  if (e > 0) {
    e += p.log2_fp32 && amax >= p.log2_up_from[e] ? 1 : 0;
  } else if (p.log2_fp32) {
    e = static_cast<int>(std::floor(static_cast<float>(std::log2(static_cast<double>(bits_to_float(amax)))))) + 127;
  } else {
    e = std::bit_width(amax) - 23;  // m * 2^-149: floor(log2) = bit_width(m) - 150
  }
  const int byte = e - p.emax;
  return byte < 0 ? byte + 256 : std::min(byte, 254);
}

// Scale byte of a finite amax given as fp32 bits.
inline int scale_byte_from_bits(const MxPlan& p, std::uint32_t amax) {
  const int e = static_cast<int>(amax >> 23);
  switch (p.rule) {
    case ScaleRule::floor: {
      if (p.scale_wrap) return wrapped_floor_byte(p, amax);
      const int up = p.log2_fp32 && e > 0 && amax >= p.log2_up_from[e] ? 1 : 0;
      return clamp_byte(e + up - p.emax);
    }
    case ScaleRule::ceil:
      return clamp_byte(e + ((amax & 0x7FFFFF) != 0 ? 1 : 0) - p.emax);
    case ScaleRule::even:
      return clamp_byte(static_cast<int>(((amax + (1u << (22 - p.round_mbits))) & 0xFF800000u) >> 23) - p.emax);
    case ScaleRule::rceil: {
      const float a = bits_to_float(amax);
      const std::uint32_t d = float_bits(p.ratio_reciprocal ? a * p.inv_max_value : a / p.max_value);
      const int de = static_cast<int>(d >> 23);
      if (p.ftz && de == 0) return 0;  // a subnormal ratio flushed to 0
      const std::uint32_t mant = d & 0x7FFFFF;
      if (p.log2_fp32) {
        // ceil of the fp32 log2: a d a hair above 2^k keeps k; below 2^-127 the byte is 0.
        if (de == 0) return d > 0x00400000u && d >= p.log2_above_from[0] ? 1 : 0;
        return std::min(de + (mant != 0 && d >= p.log2_above_from[de] ? 1 : 0), 254);
      }
      const bool up = de == 0 ? mant > 0x400000 : mant != 0;
      return std::min(de + (up ? 1 : 0), 254);
    }
    case ScaleRule::rceil_bits: {
      const float a = bits_to_float(amax);
      const std::uint32_t d = float_bits(p.ratio_reciprocal ? a * p.inv_max_value : a / p.max_value);
      return std::min(static_cast<int>((d + 0x7FFFFFu) >> 23), 254);  // d finite: at most 2^128's field
    }
  }
  return 0;
}

// 2^(127 - byte) for byte in 1..255 (254 and scale_wrap's 255 give the subnormals 2^-127, 2^-128).
inline float reciprocal_of_byte(int byte) {
  if (byte >= 254) return bits_to_float(byte == 254 ? 0x00400000u : 0x00200000u);
  return bits_to_float(static_cast<std::uint32_t>(254 - byte) << 23);
}

// amax: max of |x| bits over the group (NaN above inf); finite_or_inf: the same without NaN.
// Whether the even rule's rounding of a finite amax carries into the exponent field 255 (2^128).
inline bool even_overflows(const MxPlan& p, std::uint32_t amax) {
  return p.rule == ScaleRule::even && ((amax + (1u << (22 - p.round_mbits))) & 0xFF800000u) >= 0x7F800000u;
}

inline GroupScale group_scale(const MxPlan& p, std::uint32_t amax, std::uint32_t finite_or_inf) {
  GroupScale g;
  if (p.nonfinite == NonFiniteRule::ct && amax <= 0x7F800000u && (amax == 0x7F800000u || even_overflows(p, amax))) {
    g.byte = 0x7F;  // the scale +inf: x * 0 (finite -> zero, inf -> the default NaN)
    g.multiplier = 0.0f;
    return g;
  }
  if (p.nonfinite == NonFiniteRule::quark && amax < 0x7F800000u && even_overflows(p, amax)) {
    g.byte = 254;  // Quark: log2 of the rounding's 2^128 is inf, clamped to 127
    g.multiplier = reciprocal_of_byte(254);
    return g;
  }
  if (amax >= 0x7F800000u) {
    switch (p.nonfinite) {
      case NonFiniteRule::ggml:
        amax = 0;  // byte 0 (the byte-0 rule's multiplier below)
        g.ggml_nonfinite = p.byte0 != Byte0Rule::flush;  // flush: every code 0 already
        break;
      case NonFiniteRule::negative_zero:
        g.byte = 0;
        g.fill = true;
        g.fill_code = static_cast<std::uint8_t>(1u << (p.elem_bits - 1));
        return g;
      case NonFiniteRule::byte0_nan:
      case NonFiniteRule::ct:
        // NaN: byte 0, elements against 2^-127 (the byte-0 rule's multiplier below); inf
        // (byte0_nan; ct's is above): byte 254.
        if (amax > 0x7F800000u) {
          amax = 0;
          break;
        }
        g.byte = 254;
        g.multiplier = reciprocal_of_byte(254);
        return g;
      case NonFiniteRule::zero:
        g.byte = 255;
        g.fill = true;
        return g;
      case NonFiniteRule::nan:
        g.byte = 255;
        g.fill = true;
        g.fill_code = p.has_nan ? 0x7F : 0;
        return g;
      case NonFiniteRule::nan_signed:
        g.byte = 255;
        if (p.has_nan) g.signed_nan = true;
        else g.fill = true;
        return g;
      case NonFiniteRule::torchao:
      case NonFiniteRule::torchao_rceil:
      case NonFiniteRule::torchao_rceil_compiled:
        if (amax > 0x7F800000u) {
          g.byte = 255;
          g.nan_by_element = true;
          return g;
        }
        // An inf amax: RCEIL saturates to byte 254 (x * 2^-127); the bit-reading rules take
        // inf's exponent field 255, byte 255 - emax. inf elements then saturate.
        g.byte = static_cast<std::uint8_t>(p.nonfinite == NonFiniteRule::torchao && p.rule != ScaleRule::rceil
                                               ? std::min(255 - p.emax, 254)
                                               : 254);
        g.multiplier = reciprocal_of_byte(g.byte);
        return g;
      case NonFiniteRule::quark:
        // NaN: the scale +NaN written 0x7F, each code from its element (nan_group_code);
        // inf: 2^127 (byte 254), inf elements packed from their bits where the format has no NaN.
        if (amax > 0x7F800000u) {
          g.byte = 0x7F;
          g.nan_by_element = true;
          return g;
        }
        g.byte = 254;
        g.multiplier = reciprocal_of_byte(254);
        g.patch_inf = !p.has_nan;
        return g;
      case NonFiniteRule::xla:
        // NaN: exponent field 255 rounded up wraps to byte 0 (the byte-0 rule's multiplier
        // below); inf: byte 255, elements x * (1 / inf) = x * 0.
        if (amax > 0x7F800000u) {
          amax = 0;
          break;
        }
        g.byte = 255;
        g.multiplier = 0.0f;
        return g;
      case NonFiniteRule::triton:
        // NaN: its bits round up to byte 0; inf: byte 255; either scale multiplies by 0.
        g.byte = amax > 0x7F800000u ? 0 : 255;
        g.multiplier = 0.0f;
        return g;
      case NonFiniteRule::te:
      case NonFiniteRule::te_saturate:
        if (finite_or_inf == 0x7F800000u) {
          g.byte = 254;
          g.multiplier = p.nonfinite == NonFiniteRule::te ? 0.0f : bits_to_float(0x00400000u);
          return g;
        }
        amax = finite_or_inf;  // NaN takes no part in the reduction
        break;
    }
  }
  g.byte = static_cast<std::uint8_t>(scale_byte_from_bits(p, amax));
  if (g.byte != 0) {
    g.multiplier = p.ftz && g.byte == 254 ? 0.0f : reciprocal_of_byte(g.byte);  // ftz: 2^-127 flushed
    if (p.finite_products && g.byte >= 240) g.cap_code = p.product_cap[g.byte - 240];
    return g;
  }
  switch (p.byte0) {
    case Byte0Rule::flush: g.fill = true; break;
    case Byte0Rule::quantize: g.multiplier = 0x1p127f; break;
    case Byte0Rule::written_one:  // the codes' 2^-127, the byte written 1
      g.multiplier = 0x1p127f;
      g.byte = 1;
      break;
    case Byte0Rule::min_normal: g.multiplier = 0x1p126f; break;
    case Byte0Rule::unscaled: g.multiplier = 1.0f; break;
    case Byte0Rule::infinite: g.multiplier = std::numeric_limits<float>::infinity(); break;
  }
  return g;
}

// Quark's packing of a NaN or inf element's fp32 bits in a format without NaN: the bits below
// the exponent field's top, and the sign.
inline std::uint8_t quark_packed_code(const MxPlan& p, std::uint32_t bits) {
  const std::uint32_t magnitude = (bits >> (23 - p.mbits)) & ((1u << (p.elem_bits - 1)) - 1);
  return static_cast<std::uint8_t>(magnitude | ((bits >> 31) << (p.elem_bits - 1)));
}

// Code of element `bits` in a NaN group coded element by element (GroupScale::nan_by_element).
// Quark: x / +NaN. torchao FLOOR/CEIL/EVEN compute x / +inf (finite -> zero, NaN -> itself quieted, inf -> x86's default NaN), eager
// RCEIL x * NaN (the amax's positive canonical NaN for every element, NaN ones included),
// compiled RCEIL the NaN 0xFFFFFFFF.
inline std::uint8_t nan_group_code(const MxPlan& p, std::uint32_t bits) {
  const std::uint32_t mag = bits & 0x7FFFFFFFu;
  const bool is_nan = mag > 0x7F800000u;
  if (p.nonfinite == NonFiniteRule::quark) {  // x / NaN: x's own NaN quieted, else the scale's +NaN
    const std::uint32_t q = is_nan ? bits | 0x00400000u : 0x7FC00000u;
    return p.has_nan ? static_cast<std::uint8_t>((q >> 31 ? 0x80 : 0x00) | 0x7F) : quark_packed_code(p, q);
  }
  switch (p.nonfinite) {
    case NonFiniteRule::torchao:
      if (is_nan) return torchao_nan_code(p.element, bits | 0x00400000u);
      if (mag == 0x7F800000u) return torchao_nan_code(p.element, kX86DefaultNaN);
      // A zero: its sign survives only where the contract keeps the sign of a zero value.
      return p.signed_zero == SignedZero::keep && (bits >> 31) ? static_cast<std::uint8_t>(1u << (p.elem_bits - 1)) : 0;
    case NonFiniteRule::torchao_rceil:
      return torchao_nan_code(p.element, 0x7FC00000u);
    default:
      return torchao_nan_code(p.element, 0xFFFFFFFFu);
  }
}

// Code of element x in a nonfinite=ggml group (GroupScale::ggml_nonfinite) quantized with
// `multiplier` (the byte-0 rule's power of two): NaN and inf give 0; a finite x takes gguf-py's
// best_index, the first code in code order of least fp32 error |fl(v / multiplier) - x|. That is
// not the nearest code once |x| is far above the scale: every error then rounds to |x|, and
// code 0 is the first of them.
inline std::uint8_t ggml_nonfinite_group_code(const MxPlan& p, float x, float multiplier) {
  if ((float_bits(x) & 0x7FFFFFFFu) >= 0x7F800000u) return 0;
  const float scale = 1.0f / multiplier;  // a power of two: exact
  std::uint8_t best = 0;
  float best_err = x < 0.0f ? -x : x;  // code 0's error
  for (int code = 1; code < (1 << p.elem_bits); ++code) {
    const float v = p.code_values[code];
    if (!std::isfinite(v)) continue;  // NaN and inf codes are never chosen
    const float d = v * scale - x;
    const float err = d < 0.0f ? -d : d;
    if (err < best_err) {
      best = static_cast<std::uint8_t>(code);
      best_err = err;
    }
  }
  return best;
}

}  // namespace qexact::kernels
