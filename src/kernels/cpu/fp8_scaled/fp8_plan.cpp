// The fast fp8.scaled kernel's scalar parts: the plan, and each domain's scale from its amax
// bits (written on the bits, independently of reference/fp8_scaled_ref.cpp).
#include "kernels/cpu/fp8_scaled/fp8_plan.hpp"

#include <bit>
#include <cfloat>
#include <cmath>

#include "contracts/ceil_div.hpp"
#include "contracts/scale_grain.hpp"
#include "formats/float_dtype.hpp"
#include "qexact/formats/element.hpp"

namespace qexact::kernels {
namespace {

constexpr std::uint32_t kExpField = 0x7F800000u;

float as_float(std::uint32_t b) { return std::bit_cast<float>(b); }
std::uint32_t as_bits(float f) { return std::bit_cast<std::uint32_t>(f); }

// A finite positive s rounded to a power of two on its bits; 0, inf and NaN pass.
float pow2_of(ScalePow2 rule, float s) {
  const std::uint32_t b = as_bits(s);
  if (rule == ScalePow2::none || b == 0 || b >= kExpField) return s;
  const bool normal = b >= 0x00800000u;
  switch (rule) {
    case ScalePow2::down:
      return as_float(normal ? (b & kExpField) : std::bit_floor(b));
    case ScalePow2::up:
      if (!normal) return as_float(std::bit_ceil(b));
      return as_float((b & 0x007FFFFFu) == 0 ? b : (b & kExpField) + 0x00800000u);
    case ScalePow2::down_log2f: {
      // torch's fp32 log2 is correctly rounded here (measured, docs/decisions.md); exp2 of the
      // integer floor is exact.
      const float l = static_cast<float>(std::log2(static_cast<double>(s)));
      return std::ldexp(1.0f, static_cast<int>(std::floor(l)));
    }
    case ScalePow2::none: break;
  }
  return s;
}

// 1 / s in fp32 with a NaN s kept (quieted), as x86 divides.
float inverse_of(float s) { return std::isnan(s) ? as_float(as_bits(s) | 0x00400000u) : 1.0f / s; }

// A domain's stored form, operand and plainness under scale s (the descale or multiplier).
Fp8Scale scale_under(const Fp8Plan& p, float s, std::uint32_t amax_bits) {
  Fp8Scale r;
  r.stored = p.stored_inverse ? inverse_of(s) : s;
  r.operand = p.quotient == Fp8Quotient::reciprocal ? inverse_of(s) : s;
  const std::uint32_t op = as_bits(r.operand) & 0x7FFFFFFFu;
  r.plain = (amax_bits & 0x7FFFFFFFu) < kExpField && op != 0 && op < kExpField;
  return r;
}

}  // namespace

Fp8Plan make_fp8_plan(const Contract& c, const TensorView& x, const Shape& scale_shape, std::uint8_t* payload,
                      float* scale) {
  Fp8Plan p;
  const ElemTraits& t = elem_traits(c.element);
  p.element = c.element;
  p.mbits = t.mbits;
  p.bias = t.bias;
  p.max = t.max;
  p.max_bits = as_bits(t.max);
  if (c.overflow != Overflow::saturate) {
    // Past max the grid's next step would be max + ulp: the midpoint rounds up (overflows) when
    // RNE's even neighbour is that step, i.e. when max's own code is odd (E5M2's 0x7B), and
    // stays at max when it is even (E4M3's 0x7E).
    const float ulp = std::ldexp(1.0f, std::ilogb(t.max) - t.mbits);
    const std::uint32_t mid = as_bits(t.max + ulp / 2);
    p.overflows = true;
    p.overflow_from = static_cast<std::int32_t>((t.max_code & 1) ? mid : mid + 1);
    p.overflow_code = c.overflow == Overflow::nan ? 0x7F : 0x7C;
  }
  p.quotient = c.fp8_quotient;
  p.multiplier = c.scale_kind == ScaleKind::multiplier;
  p.arith = c.scale_arith;
  p.pow2 = c.scale_pow2;
  p.stored_inverse = c.stored == StoredScale::inverse;
  p.amax_floor = c.amax_floor;
  p.zero_group = c.zero_group;
  p.propagate = c.nonfinite_input == NonFiniteInput::propagate;
  p.quotient_round = c.quotient_arith == QuotientArith::input ? x.dtype : DType::f32;
  p.signed_zero = c.signed_zero;
  p.kind = c.granularity.kind;
  p.dtype = x.dtype;
  p.elem_size = static_cast<std::int64_t>(dtype_size(x.dtype));
  p.data = static_cast<const std::uint8_t*>(x.data);
  p.numel = shape_numel(x.shape);
  // torch's full reduction ORs a compare mask into its NaN (fp32 0xFFFFFFFF; f16 keeps only the
  // sign: 0xFE00; bf16 canonicalises); a row reduction or one element give the positive quiet
  // NaN (measured).
  p.nan_amax = p.kind == Granularity::tensor ? fp8_tensor_nan_amax(x.dtype, p.numel > 1) : 0x7FC00000u;
  p.domains = shape_numel(scale_shape);
  if (p.kind == Granularity::head_block) {
    p.B = x.shape[0], p.S = x.shape[1], p.H = x.shape[2], p.D = x.shape[3];
    p.grain_rows = c.granularity.rows;
    p.token_blocks = ceil_div(p.S, p.grain_rows);
  } else {
    p.cols = x.shape.back();
    p.rows = p.cols == 0 ? 0 : p.numel / p.cols;
    if (p.cols == 0) p.rows = shape_numel(Shape(x.shape.begin(), x.shape.end() - 1));
    p.grain_rows = c.granularity.rows;
    p.grain_cols = c.granularity.cols;
    p.col_blocks = ceil_div(p.cols, p.grain_cols);
  }
  p.payload = payload;
  p.scale = scale;
  return p;
}

std::uint32_t fp8_tensor_nan_amax(DType dtype, bool several) {
  if (!several || dtype == DType::bf16) return 0x7FC00000u;
  return dtype == DType::f32 ? 0xFFFFFFFFu : 0xFFC00000u;
}

Fp8Scale fp8_scale_of(const Fp8Plan& p, std::uint32_t amax_bits) {
  Fp8Scale r;
  if (amax_bits > kExpField) amax_bits = p.nan_amax;
  if (amax_bits == 0 && p.zero_group == ZeroGroup::zero) {
    r.zero = true;
    return r;
  }
  const float amax = as_float(amax_bits);
  const bool nan = (amax_bits & 0x7FFFFFFFu) > kExpField;
  float s = amax;  // a NaN amax divides through unchanged
  if (p.zero_group == ZeroGroup::one_unless_positive && (nan || amax_bits == 0)) {
    s = 1.0f;  // amax_bits is a magnitude: not > 0 means 0 or NaN
  } else if (!nan) {
    // max(amax, floor) in the arithmetic's precision; zero_group=one when that is still 0;
    // zero_group=amax_one: an amax up to the floor counts as 1, and the floor bounds nothing.
    const float floor_f = static_cast<float>(p.amax_floor);
    const double floored_d = std::max(static_cast<double>(amax), p.amax_floor);
    const float floored_f = p.zero_group != ZeroGroup::amax_one ? std::max(amax, floor_f)
                            : amax_bits <= as_bits(floor_f)     ? 1.0f
                                                                : amax;
    const bool unit = p.zero_group == ZeroGroup::one &&
                      (p.arith == ScaleArith::fp64 ? floored_d == 0.0 : floored_f == 0.0f);
    if (unit) {
      s = 1.0f;
    } else if (p.arith == ScaleArith::fp64) {
      const double m = p.max;
      s = static_cast<float>(p.multiplier ? m / floored_d : floored_d / m);
    } else if (p.multiplier) {
      s = p.arith == ScaleArith::reciprocal_multiplier ? p.max * (1.0f / floored_f) : p.max / floored_f;
      if (p.arith == ScaleArith::fp32_satfinite && as_bits(s) == kExpField) s = FLT_MAX;
    } else if (p.arith == ScaleArith::reciprocal) {
      s = floored_f * (1.0f / p.max);
    } else {
      s = floored_f / p.max;
    }
    // scale_arith=input: torch's bf16 / f16 division is the fp32 one rounded once more.
    if (p.arith == ScaleArith::input) s = round_to_dtype(p.dtype, s);
  }
  s = pow2_of(p.pow2, s);
  if (p.zero_group == ZeroGroup::eps && s == 0.0f) {
    s = dtype_eps(p.arith == ScaleArith::input ? p.dtype : DType::f32);
  }
  return scale_under(p, s, amax_bits);
}

Fp8Scale fp8_scale_from_stored(const Fp8Plan& p, float stored, std::uint32_t amax_bits) {
  if (p.zero_group == ZeroGroup::zero && stored == 0.0f) {
    Fp8Scale r;
    r.zero = true;
    return r;
  }
  Fp8Scale r = scale_under(p, p.stored_inverse ? inverse_of(stored) : stored, amax_bits);
  r.stored = stored;  // the given bits, not 1 / (1 / stored) read back
  return r;
}

float fp8_special_quotient(const Fp8Plan& p, float x, float operand) {
  float q = p.quotient == Fp8Quotient::divide ? x / operand : x * operand;
  if (q == q) {
    return round_to_dtype(p.quotient_round, q);
  }
  // torch's bf16 rounding makes every NaN the canonical positive one (c10::BFloat16).
  if (p.quotient_round == DType::bf16) return as_float(0x7FC00000u);
  // x86 SSE: the first NaN operand, quieted; else the negative default NaN (inf * 0, 0 / 0, ...).
  const std::uint32_t xb = as_bits(x), ob = as_bits(operand);
  if ((xb & 0x7FFFFFFFu) > kExpField) return as_float(xb | 0x00400000u);
  if ((ob & 0x7FFFFFFFu) > kExpField) return as_float(ob | 0x00400000u);
  return as_float(0xFFC00000u);
}

}  // namespace qexact::kernels
