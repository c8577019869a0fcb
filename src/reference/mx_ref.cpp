// Reference MX quantizer (contracts §1-2, docs/presets.md): one group at a time, in the order the
// contract states its steps: amax, scale byte, scale value, element codes.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "contracts/ceil_div.hpp"
#include "formats/torchao_nan.hpp"
#include "qexact/formats/bf16.hpp"
#include "qexact/formats/fp16.hpp"
#include "qexact/formats/e8m0.hpp"
#include "reference/mx_ref.hpp"

namespace qexact::ref {
namespace {

struct GroupOut {
  std::uint8_t scale_byte = 0;
  std::vector<std::uint8_t> codes;  // one unpacked code per element
};

struct GroupScan {
  bool has_nan = false;
  bool has_inf = false;
  float amax_finite = 0.0f;  // max |x| over the finite elements
};

GroupScan scan(const float* x, std::int64_t n) {
  GroupScan s;
  for (std::int64_t i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    if (std::isnan(a)) s.has_nan = true;
    else if (std::isinf(a)) s.has_inf = true;
    else if (a > s.amax_finite) s.amax_finite = a;
  }
  return s;
}

// ggml's byte: (uint8)(floor(log2 amax) - emax + 127), a negative exponent wrapping modulo 256.
std::uint8_t wrapped_floor_byte(const Contract& c, float amax) {
  if (!(amax > 0.0f)) return 0;
  const int e = c.log2_fp32 ? floor_of_fp32_log2(amax) : floor_log2_exact(amax);
  const int byte = 127 + e - elem_traits(c.element).emax;
  return static_cast<std::uint8_t>(byte < 0 ? byte + 256 : std::min(byte, 254));
}

std::uint8_t scale_byte(const Contract& c, float amax) {
  const ElemTraits& t = elem_traits(c.element);
  switch (c.scale_rule) {
    case ScaleRule::floor:
      if (c.scale_wrap) return wrapped_floor_byte(c, amax);
      return c.log2_fp32 ? e8m0_floor_log2_fp32(amax, t.emax) : e8m0_floor(amax, t.emax);
    case ScaleRule::rceil:
      return c.log2_fp32 ? e8m0_rceil_log2_fp32(amax, t.max, c.ratio == RatioOp::reciprocal)
                         : e8m0_rceil(amax, t.max, c.ratio == RatioOp::reciprocal);
    case ScaleRule::rceil_bits: return e8m0_rceil_bits(amax, t.max, c.ratio == RatioOp::reciprocal);
    case ScaleRule::ceil: return e8m0_ceil(amax, t.emax);
    case ScaleRule::even: return e8m0_even(amax, t.emax, c.round_mbits < 0 ? t.mbits : c.round_mbits);
  }
  return 0;
}

}  // namespace

// The scale a byte stands for, in double (exact): 2^(byte - 127); under scale_wrap byte 255 is
// 2^128 (ggml's E8M0 has no NaN), elsewhere NaN.
double scale_value(const ScaleSpec& c, std::uint8_t byte) {
  if (byte == 255 && !c.scale_wrap) return std::numeric_limits<double>::quiet_NaN();
  return std::ldexp(1.0, static_cast<int>(byte) - 127);
}

// The fp32 value elements are divided by. torchao 0.18 FLOOR/CEIL/EVEN clamp their fp32 scale to the
// smallest normal, TransformerEngine multiplies byte-0 groups by 1.0, and TransformerEngine's
// multiplier for byte 0xFE is 2^(254 - 254) written as bits: +0.0 (a divisor of +inf).
float mx_divisor(const Contract& c, std::uint8_t byte) {
  if (byte == 0 && c.byte0 == Byte0Rule::min_normal) return 0x1p-126f;
  if (byte == 0 && c.byte0 == Byte0Rule::unscaled) return 1.0f;
  if (byte == 0 && c.byte0 == Byte0Rule::infinite) return 0.0f;  // x / 0: the multiplier inf
  if (byte == 254 && c.nonfinite == NonFiniteRule::te) return std::numeric_limits<float>::infinity();
  return e8m0_decode(byte);
}

namespace {

// The element steps read the element spec alone: the value arrives divided by its scale.
std::uint8_t encode(const ElementSpec& c, float v) {
  const ElemTraits& t = elem_traits(c.element);
  std::uint8_t q = elem_encode(c.element, v, c.rounding, c.overflow);
  const std::uint8_t sign_bit = static_cast<std::uint8_t>(1u << (t.bits - 1));
  // v == 0 here is a zero input (a zero divided by the scale): `underflow` drops its sign only.
  const bool unsigned_zero =
      c.signed_zero == SignedZero::drop || (c.signed_zero == SignedZero::underflow && v == 0.0f);
  if (unsigned_zero && q == sign_bit) q = 0;
  // `negative`: a zero value (+0.0 too) is the negative zero code; a nonzero one keeps its sign.
  if (c.signed_zero == SignedZero::negative && v == 0.0f) q = sign_bit;
  return q;
}

// finite_products: ggml picks the nearest value v whose fp32 product v * scale is finite, so a
// code whose product overflows gives way to the largest code of its sign whose product does not
// (the value was above every such code). Found by search over the codes.
std::uint8_t with_finite_product(const ElementSpec& c, std::uint8_t q, double scale) {
  const ElemTraits& t = elem_traits(c.element);
  const double limit = std::ldexp(1.0, 128);
  const double v = elem_decode(c.element, q);
  if (!std::isfinite(v) || std::fabs(v) * scale < limit) return q;
  const std::uint8_t sign_bit = static_cast<std::uint8_t>(q & (1u << (t.bits - 1)));
  std::uint8_t best = sign_bit;  // a zero of the same sign
  double best_mag = 0.0;
  for (unsigned code = 0; code < (1u << t.bits); ++code) {
    const auto cand = static_cast<std::uint8_t>(code);
    if ((cand & (1u << (t.bits - 1))) != sign_bit) continue;
    const double m = std::fabs(static_cast<double>(elem_decode(c.element, cand)));
    if (std::isfinite(m) && m * scale < limit && m > best_mag) {
      best = cand;
      best_mag = m;
    }
  }
  return best;
}

// ggml's best_index: the first code, in code order, whose fp32 error |fl(v * scale) - x| is the
// least (fp32 arithmetic throughout, as gguf-py computes it).
std::uint8_t first_nearest_in_fp32(const ElementSpec& c, float x, float scale) {
  const ElemTraits& t = elem_traits(c.element);
  std::uint8_t best = 0;
  float best_err = std::numeric_limits<float>::infinity();
  for (unsigned code = 0; code < (1u << t.bits); ++code) {
    const float v = elem_decode(c.element, static_cast<std::uint8_t>(code));
    if (!std::isfinite(v)) continue;
    const float product = v * scale;
    const float err = std::fabs(product - x);
    if (err < best_err) {
      best = static_cast<std::uint8_t>(code);
      best_err = err;
    }
  }
  return best;
}

std::uint32_t bits_of(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

// torchao's code for element x of a group holding NaN (scale byte 255). FLOOR/CEIL/EVEN divide
// by the scale +inf: finite -> signed zero, NaN -> itself (quieted), inf -> inf / inf, the x86
// default NaN. Eager RCEIL multiplies by the amax's NaN, and x86 returns that (positive,
// canonical) NaN even for a NaN element; compiled RCEIL gives the NaN 0xFFFFFFFF everywhere.
std::uint8_t torchao_nan_group_code(const ElementSpec& c, float x) {
  const std::uint32_t quiet = bits_of(x) | 0x00400000u;
  switch (c.nonfinite) {
    case NonFiniteRule::torchao:
      if (std::isnan(x)) return torchao_nan_code(c.element, quiet);
      if (std::isinf(x)) return torchao_nan_code(c.element, kX86DefaultNaN);
      return encode(c, x / std::numeric_limits<float>::infinity());
    case NonFiniteRule::torchao_rceil:
      return torchao_nan_code(c.element, 0x7FC00000u);
    default:
      return torchao_nan_code(c.element, 0xFFFFFFFFu);
  }
}

// Whether the even rule's rounded amax reaches 2^128 (compressed-tensors' round_to_power_2 of an
// amax >= 2^127 * (2 - 2^-(m+1)) is +inf).
bool pow2_overflows(const Contract& c, float amax) {
  if (c.scale_rule != ScaleRule::even || !std::isfinite(amax)) return false;
  const int m = c.round_mbits < 0 ? elem_traits(c.element).mbits : c.round_mbits;
  return static_cast<double>(amax) >= std::ldexp(2.0 - std::ldexp(1.0, -(m + 1)), 127);
}

// The NaN code for element x: signed like x, or the canonical positive NaN.
std::uint8_t nan_code(const ElementSpec& c, float x, bool keep_sign) {
  const ElemTraits& t = elem_traits(c.element);
  if (!t.has_nan) return 0;
  return static_cast<std::uint8_t>((keep_sign && std::signbit(x) ? 1u << (t.bits - 1) : 0u) | 0x7Fu);
}

// `given`: the scale byte to quantize with instead of the one the contract computes (the
// non-finite rules that decide the payload from the input alone still apply).
// The scaled value x / scale as the element's rounding sees it: under quotient_arith=input
// rounded (RNE) to the input's dtype first, as torch divides a bf16 / f16 tensor (a bf16 NaN is
// the canonical positive one). Dividing by a power of two, that changes only values below the
// dtype's normals: zeros' signs and NaNs' signs.
float scaled_value(const Contract& c, DType dt, float v) {
  if (c.quotient_arith != QuotientArith::input) return v;
  if (dt == DType::bf16) return std::isnan(v) ? std::numeric_limits<float>::quiet_NaN() : round_bf16(v);
  if (dt == DType::f16) return round_f16(v);
  return v;
}

// ---- JAX on XLA:CPU (nonfinite=xla) ----------------------------------------------------------
// A model of its own, step by step as jax's quantize reads under XLA: x / 2^(byte - 127) is
// x * fp32(1 / 2^(byte - 127)) (XLA's rewrite of a division by a broadcast divisor), and with
// ftz every operand and result below 2^-126 is a zero of its sign.

float flushed(float v) { return std::fabs(v) < 0x1p-126f ? std::copysign(0.0f, v) : v; }

// x * m as x86 makes its NaN: a NaN x stays itself (quieted, its sign kept); 0 * inf is the
// default NaN, whose sign bit is set.
float xla_product(float x, float m) {
  if (std::isnan(x)) return x;
  if ((x == 0.0f && std::isinf(m)) || (std::isinf(x) && m == 0.0f)) return -std::numeric_limits<float>::quiet_NaN();
  return x * m;
}

// What elements are multiplied by under scale byte b.
float xla_multiplier(const Contract& c, std::uint8_t b) {
  if (b == 0) {
    switch (c.byte0) {
      case Byte0Rule::flush: return 0.0f;  // not reached: the group is all +0
      case Byte0Rule::quantize:
      case Byte0Rule::written_one: return 0x1p127f;  // 1 / 2^-127
      case Byte0Rule::min_normal: return 0x1p126f;
      case Byte0Rule::unscaled: return 1.0f;
      case Byte0Rule::infinite: return std::numeric_limits<float>::infinity();
    }
  }
  if (b == 255) return 0.0f;  // 1 / inf
  const auto m = static_cast<float>(std::ldexp(1.0, 127 - static_cast<int>(b)));  // 254: 2^-127
  return c.ftz ? flushed(m) : m;
}

// The byte of a finite amax: the contract's rule, where ftz flushes rceil's ratio first (an
// amax * fp32(1 / max) below 2^-126 is 0: byte 0).
std::uint8_t xla_scale_byte(const Contract& c, float amax) {
  if (c.ftz && c.scale_rule == ScaleRule::rceil) {
    const float max = elem_traits(c.element).max;
    const float r = c.ratio == RatioOp::reciprocal ? amax * (1.0f / max) : amax / max;
    if (flushed(r) == 0.0f) return 0;
  }
  return scale_byte(c, amax);
}

GroupOut quantize_group_xla(const Contract& c, const float* x, std::int64_t n, const std::uint8_t* given) {
  GroupOut out;
  out.codes.assign(static_cast<std::size_t>(n), 0);
  std::vector<float> v(x, x + n);
  if (c.ftz)
    for (float& f : v) f = flushed(f);  // DAZ
  const GroupScan s = scan(v.data(), n);
  // A NaN amax's exponent field 255 rounds up to 256: byte 0; inf's stays 255.
  out.scale_byte = given ? *given : s.has_nan ? 0 : s.has_inf ? 255 : xla_scale_byte(c, s.amax_finite);
  if (out.scale_byte == 0 && c.byte0 == Byte0Rule::flush) return out;
  const float m = xla_multiplier(c, out.scale_byte);
  const ElemTraits& t = elem_traits(c.element);
  for (std::int64_t i = 0; i < n; ++i) {
    float q = xla_product(v[i], m);
    if (c.ftz) q = flushed(q);
    if (std::isnan(q))  // the NaN code of q's sign; E2M1 has none: XLA's convert gives 0x8
      out.codes[i] = t.has_nan ? nan_code(c, q, true) : static_cast<std::uint8_t>(1u << (t.bits - 1));
    else
      out.codes[i] = encode(c, q);
  }
  return out;
}

// Quark's packing of a NaN or inf element (its fp32 bits, unchanged by the packer's division by a
// power of two) in a format without NaN: the bits below the exponent field's top, the sign.
std::uint8_t quark_packed_code(const ElementSpec& c, std::uint32_t bits) {
  const ElemTraits& t = elem_traits(c.element);
  const std::uint32_t magnitude = (bits >> (23 - t.mbits)) & ((1u << (t.bits - 1)) - 1);
  return static_cast<std::uint8_t>(magnitude | ((bits >> 31) << (t.bits - 1)));
}

// nonfinite=quark: the code of element x in a NaN group, x / NaN (x's own NaN quieted where x is
// one, else the scale's +NaN).
std::uint8_t quark_nan_group_code(const ElementSpec& c, float x) {
  const std::uint32_t bits = std::isnan(x) ? bits_of(x) | 0x00400000u : 0x7FC00000u;
  if (elem_traits(c.element).has_nan) return static_cast<std::uint8_t>((bits >> 31 ? 0x80 : 0x00) | 0x7F);
  return quark_packed_code(c, bits);
}

GroupOut quantize_group_of(const Contract& c, DType dt, const float* x, std::int64_t n, const std::uint8_t* given);

GroupOut quantize_group(const Contract& c, DType dt, const float* x, std::int64_t n, const std::uint8_t* given) {
  GroupOut out = quantize_group_of(c, dt, x, n, given);
  // written_one: the codes used 2^-127; the byte written says 2^-126.
  if (!given && out.scale_byte == 0 && c.byte0 == Byte0Rule::written_one) out.scale_byte = 1;
  return out;
}

GroupOut quantize_group_of(const Contract& c, DType dt, const float* x, std::int64_t n, const std::uint8_t* given) {
  if (c.nonfinite == NonFiniteRule::xla) return quantize_group_xla(c, x, n, given);
  GroupOut out;
  out.codes.assign(static_cast<std::size_t>(n), 0);
  const GroupScan s = scan(x, n);
  const bool nonfinite = s.has_nan || s.has_inf;
  float amax = s.amax_finite;

  if (nonfinite) {
    switch (c.nonfinite) {
      case NonFiniteRule::xla: break;  // quantize_group_xla
      case NonFiniteRule::triton: {
        // Byte 0 (NaN) or 255 (inf): the multiplier 0 for every element.
        out.scale_byte = given ? *given : s.has_nan ? 0 : 255;
        const ElemTraits& t = elem_traits(c.element);
        for (std::int64_t i = 0; i < n; ++i) {
          const float q = xla_product(x[i], 0.0f);  // x * 0 as x86 gives it
          if (!std::isnan(q)) {
            out.codes[i] = encode(c, q);
          } else {
            const std::uint8_t sign = std::signbit(q) ? static_cast<std::uint8_t>(1u << (t.bits - 1)) : 0;
            out.codes[i] = t.has_nan ? nan_code(c, q, true) : static_cast<std::uint8_t>(sign | t.max_code);
          }
        }
        return out;
      }
      case NonFiniteRule::quark: {
        if (s.has_nan) {
          out.scale_byte = given ? *given : 0x7F;  // the NaN scale's float-to-int cast gives 0
          for (std::int64_t i = 0; i < n; ++i) out.codes[i] = quark_nan_group_code(c, x[i]);
          return out;
        }
        // An inf amax: log2 inf clamps to 127, the scale 2^127; finite elements x / 2^127, inf
        // saturates (a format with NaN, as Quark's fp8 clamp) or is packed from its bits.
        out.scale_byte = given ? *given : 254;
        const float divisor = mx_divisor(c, out.scale_byte);
        for (std::int64_t i = 0; i < n; ++i)
          out.codes[i] = std::isinf(x[i]) && !elem_traits(c.element).has_nan ? quark_packed_code(c, bits_of(x[i]))
                                                                              : encode(c, x[i] / divisor);
        return out;
      }
      case NonFiniteRule::zero:
        out.scale_byte = given ? *given : 255;
        return out;
      case NonFiniteRule::nan:
      case NonFiniteRule::nan_signed:
        out.scale_byte = given ? *given : 255;
        for (std::int64_t i = 0; i < n; ++i) out.codes[i] = nan_code(c, x[i], c.nonfinite == NonFiniteRule::nan_signed);
        return out;
      case NonFiniteRule::te:
      case NonFiniteRule::te_saturate:
        // NaN takes no part in the amax reduction (fmaxf); an inf amax saturates the scale.
        if (s.has_inf) amax = std::numeric_limits<float>::infinity();
        break;
      case NonFiniteRule::torchao:
      case NonFiniteRule::torchao_rceil:
      case NonFiniteRule::torchao_rceil_compiled:
        if (s.has_nan) {
          out.scale_byte = given ? *given : 255;
          for (std::int64_t i = 0; i < n; ++i) out.codes[i] = torchao_nan_group_code(c, x[i]);
          return out;
        }
        amax = std::numeric_limits<float>::infinity();
        break;
      case NonFiniteRule::negative_zero: {
        out.scale_byte = given ? *given : 0;
        const auto negative_zero = static_cast<std::uint8_t>(1u << (elem_traits(c.element).bits - 1));
        std::fill(out.codes.begin(), out.codes.end(), negative_zero);
        return out;
      }
      case NonFiniteRule::ggml: {
        // Byte 0; NaN and inf elements code 0; finite ones by gguf-py's own search, whose fp32
        // errors round to |x| for every value once |x| is far above the scale (ties: code 0).
        out.scale_byte = given ? *given : 0;
        if (out.scale_byte == 0 && c.byte0 == Byte0Rule::flush) return out;
        const float scale = mx_divisor(c, out.scale_byte);
        for (std::int64_t i = 0; i < n; ++i)
          if (std::isfinite(x[i])) out.codes[i] = first_nearest_in_fp32(c, x[i], scale);
        return out;
      }
      case NonFiniteRule::byte0_nan:
      case NonFiniteRule::ct:
        if (s.has_nan) {
          // Byte 0: the elements divided by 2^-127 (finite ones saturate or stay small); a NaN
          // element keeps its NaN and its sign.
          out.scale_byte = given ? *given : 0;
          const float scale = mx_divisor(c, out.scale_byte);
          for (std::int64_t i = 0; i < n; ++i)
            out.codes[i] = std::isnan(x[i]) ? nan_code(c, scaled_value(c, dt, x[i]), true)
                                            : encode(c, scaled_value(c, dt, x[i] / scale));
          return out;
        }
        amax = std::numeric_limits<float>::infinity();
        break;
    }
  }
  // compressed-tensors: an inf amax, or one whose power-of-two rounding overflows to 2^128, is
  // the scale +inf stored as byte 0x7F: finite elements / inf are zeros, inf / inf the x86
  // default NaN (negative).
  if (c.nonfinite == NonFiniteRule::ct && (std::isinf(amax) || pow2_overflows(c, amax))) {
    out.scale_byte = given ? *given : 0x7F;
    for (std::int64_t i = 0; i < n; ++i) {
      const float q = x[i] / std::numeric_limits<float>::infinity();
      // inf / inf: x86's default NaN, negative.
      const float v = scaled_value(c, dt, std::isnan(q) ? -std::numeric_limits<float>::quiet_NaN() : q);
      out.codes[i] = std::isnan(v) ? nan_code(c, v, true) : encode(c, v);
    }
    return out;
  }

  // An infinite amax saturates the scale: cvt.rp.satfinite (TE, torchao RCEIL) gives the largest
  // finite byte; torchao's other rules read the exponent field 255 of inf's bits: 255 - emax.
  std::uint8_t inf_byte = 254;
  if (c.nonfinite == NonFiniteRule::torchao && c.scale_rule != ScaleRule::rceil)
    inf_byte = static_cast<std::uint8_t>(std::min(255 - elem_traits(c.element).emax, 254));
  // Quark: an even rounding that overflows to 2^128 has log2 inf, clamped to 127: the scale 2^127.
  const bool quark_top = c.nonfinite == NonFiniteRule::quark && pow2_overflows(c, amax);
  out.scale_byte = given ? *given : std::isinf(amax) || quark_top ? inf_byte : scale_byte(c, amax);
  if (out.scale_byte == 0 && c.byte0 == Byte0Rule::flush) return out;  // literal +0 payload

  const float scale = mx_divisor(c, out.scale_byte);
  const double exact_scale = scale_value(c, out.scale_byte);
  for (std::int64_t i = 0; i < n; ++i) {
    // Only the te rules (and torchao's inf groups, whose inf / 2^k saturates) reach here with
    // non-finite elements: the device's NaN is canonical. A wrapped byte 255 (2^128, beyond
    // fp32) divides in double, then rounds once.
    const float q = c.scale_wrap && out.scale_byte == 255 ? static_cast<float>(x[i] / exact_scale) : x[i] / scale;
    const float v = scaled_value(c, dt, q);
    out.codes[i] = std::isnan(v) ? nan_code(c, v, false) : encode(c, v);
    if (c.finite_products) out.codes[i] = with_finite_product(c, out.codes[i], exact_scale);
  }
  return out;
}

}  // namespace

std::int64_t mx_scale_offset(const ScaleSpec& c, std::int64_t t, std::int64_t g, std::int64_t groups) {
  switch (c.layout) {
    case ScaleLayout::pairs: return t * 2 * ceil_div(groups, 2) + g;
    case ScaleLayout::rowmajor: return t * groups + g;
    case ScaleLayout::padded: return t * (ceil_div(groups, 4) * 4) + g;
    case ScaleLayout::swizzled: {
      const std::int64_t col_tiles = ceil_div(groups, 4);
      const std::int64_t tile = (t / 128) * col_tiles + g / 4;
      const std::int64_t r = t % 128;
      return tile * 512 + (r % 32) * 16 + (r / 32) * 4 + g % 4;
    }
  }
  return 0;
}

namespace {

// Where column `col`'s E2M1 code sits in its row's payload: (byte, high nibble?).
std::pair<std::int64_t, bool> nibble_of(const ScaleSpec& c, std::int64_t col) {
  if (c.packing == Packing::adjacent) return {col / 2, col % 2 == 1};
  const std::int64_t half = c.block / 2, in_group = col % c.block;
  return {(col - in_group) / 2 + in_group % half, in_group >= half};
}

// Both entry points: the contract's own scales, or `given` (a u8 tensor in the scale shape).
QuantResult quantize_mx_impl(const Contract& c, const TensorView& x, const TensorView* given) {
  validate(c);
  const Shape pshape = payload_shape(c, x.shape);
  const Shape sshape = scale_shape(c, x.shape);
  std::vector<float> v = to_f32_vector(x);
  if (c.prequant == Prequant::bf16)
    for (float& f : v) f = round_bf16(f);

  const std::int64_t k = x.shape.back();
  const std::int64_t rows = k == 0 ? 0 : static_cast<std::int64_t>(v.size()) / k;
  const std::int64_t groups = ceil_div(k, c.block);
  const bool fp4 = c.element == ElemFormat::e2m1;

  QuantResult r;
  r.payload = Tensor(DType::u8, pshape);
  r.scale = Tensor(DType::u8, sshape);  // zero-filled: padding bytes are 0
  r.path = "groupwise";
  std::uint8_t* payload = r.payload.data<std::uint8_t>();
  std::uint8_t* scale = r.scale.data<std::uint8_t>();
  const std::int64_t row_bytes = fp4 ? ceil_div(k, 2) : k;
  Tensor given_bytes;
  if (given) {
    if (given->dtype != DType::u8 || given->shape != sshape)
      fail(ErrorKind::bad_argument, std::string("the given MX scales must be u8 of shape ") + shape_str(sshape) +
                                        ", got " + dtype_name(given->dtype) + " " + shape_str(given->shape));
    given_bytes = contiguous_copy(*given);
    r.scale = contiguous_copy(*given);  // padding bytes as given
    scale = r.scale.data<std::uint8_t>();
  }

  for (std::int64_t t = 0; t < rows; ++t) {
    for (std::int64_t g = 0; g < groups; ++g) {
      const std::int64_t begin = g * c.block;
      const std::int64_t n = std::min<std::int64_t>(c.block, k - begin);
      const std::int64_t at = mx_scale_offset(c, t, g, groups);
      const GroupOut go =
          quantize_group(c, x.dtype, v.data() + t * k + begin, n, given ? given_bytes.data<std::uint8_t>() + at : nullptr);
      scale[at] = go.scale_byte;
      for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t col = begin + i;
        if (fp4) {
          const auto [at_byte, high] = nibble_of(c, col);
          std::uint8_t& b = payload[t * row_bytes + at_byte];
          b = static_cast<std::uint8_t>(high ? (b & 0x0F) | (go.codes[i] << 4) : (b & 0xF0) | go.codes[i]);
        } else {
          payload[t * row_bytes + col] = go.codes[i];
        }
      }
    }
  }
  return r;
}

}  // namespace

QuantResult quantize_mx(const Contract& c, const TensorView& x) { return quantize_mx_impl(c, x, nullptr); }

QuantResult quantize_mx_with_scales(const Contract& c, const TensorView& x, const TensorView& scale) {
  return quantize_mx_impl(c, x, &scale);
}

Tensor dequantize_mx(const Contract& c, const TensorView& payload, const TensorView& scale, const Shape& x_shape) {
  validate(c);
  if (payload.dtype != DType::u8 || scale.dtype != DType::u8)
    fail(ErrorKind::bad_argument, "MX dequantize takes u8 payload and u8 E8M0 scales");
  const Tensor p = contiguous_copy(payload);
  const Tensor s = contiguous_copy(scale);
  const std::int64_t k = x_shape.back();
  const std::int64_t rows = k == 0 ? 0 : shape_numel(x_shape) / k;
  const std::int64_t groups = ceil_div(k, c.block);
  const bool fp4 = c.element == ElemFormat::e2m1;
  const std::int64_t row_bytes = fp4 ? ceil_div(k, 2) : k;
  Tensor out(DType::f32, x_shape);
  float* o = out.data<float>();
  for (std::int64_t t = 0; t < rows; ++t) {
    for (std::int64_t col = 0; col < k; ++col) {
      const std::uint8_t byte = s.data<std::uint8_t>()[mx_scale_offset(c, t, col / c.block, groups)];
      std::uint8_t code;
      if (fp4) {
        const auto [at_byte, high] = nibble_of(c, col);
        code = p.data<std::uint8_t>()[t * row_bytes + at_byte];
        code = static_cast<std::uint8_t>(high ? code >> 4 : code & 0x0F);
      } else {
        code = p.data<std::uint8_t>()[t * row_bytes + col];
      }
      // In double: exact, then one rounding to fp32 (a wrapped byte 255's 2^128 included).
      const float v = static_cast<float>(static_cast<double>(elem_decode(c.element, code)) * scale_value(c, byte));
      // Every NaN comes out as the canonical quiet NaN: its sign and payload carry nothing.
      o[t * k + col] = std::isnan(v) ? std::numeric_limits<float>::quiet_NaN() : v;
    }
  }
  return out;
}

}  // namespace qexact::ref
