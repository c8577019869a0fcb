// Fast MX quantizer: one SIMD body compiled for every x86 target (google/highway), dispatched
// at run time. Per group it reduces |x| on the raw fp32 bits, derives the scale byte from the
// amax's exponent bits, multiplies by the exact power-of-two reciprocal of the scale (equal to
// the contract's division: both are one correct rounding of the same real number) and rounds
// elements with integer arithmetic on the fp32 bits. It shares no code with reference/.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/mx/mx_quantize.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cstring>

#include <hwy/cache_control.h>

#include "kernels/cpu/common/byte_code_writer-inl.h"
#include "kernels/cpu/common/float_lanes-inl.h"
#include "kernels/cpu/common/flush_subnormal-inl.h"
#include "kernels/cpu/mx/mx_plan.hpp"
#include "kernels/cpu/mx/mx_scale_bits.hpp"

HWY_BEFORE_NAMESPACE();
namespace qexact::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using DI = hn::RebindToSigned<DF>;
using DU = hn::RebindToUnsigned<DF>;
using VF = hn::Vec<DF>;
using VI = hn::Vec<DI>;

constexpr std::int32_t kExpMask = 0x7F800000;

// RNE to bf16 by the integer trick; NaN stays a quiet NaN with its sign.
HWY_INLINE VI RoundBf16Bits(VI bits) {
  const DI di;
  const VI abs = hn::And(bits, hn::Set(di, 0x7FFFFFFF));
  const VI lsb = hn::And(hn::ShiftRight<16>(bits), hn::Set(di, 1));
  const VI rounded = hn::And(hn::Add(hn::Add(bits, hn::Set(di, 0x7FFF)), lsb), hn::Set(di, static_cast<std::int32_t>(0xFFFF0000u)));
  const VI quiet = hn::Or(hn::And(bits, hn::Set(di, static_cast<std::int32_t>(0xFFFF0000u))), hn::Set(di, 0x00400000));
  return hn::IfThenElse(hn::Gt(abs, hn::Set(di, kExpMask)), quiet, rounded);
}

// Element codes (in int32 lanes) of already scaled values, by bit arithmetic. `e_min` is the
// format's smallest normal exponent; below it the grid is the subnormal one.
// `cap`: the largest code magnitude the group may take (finite_products; p.max_code otherwise).
template <bool kRneSaturate>
HWY_INLINE VI EncodeElements(const MxPlan& p, VF v, int cap) {
  const DF df;
  const DI di;
  const VI bits = hn::BitCast(di, v);
  const VI abs = hn::And(bits, hn::Set(di, 0x7FFFFFFF));
  const VF a = hn::BitCast(df, abs);
  const int m = p.mbits;
  const int e_min = 1 - p.bias;
  const int drop = 23 - m;

  // Normal grid: round the fp32 significand to m bits on the integer bits, then rebias.
  VI add = hn::Set(di, (1 << (drop - 1)) - 1);
  if (kRneSaturate || p.rounding == Rounding::rne || p.rounding == Rounding::even_fp32) {
    add = hn::Add(add, hn::And(hn::ShiftRightSame(abs, drop), hn::Set(di, 1)));
  } else if (p.rounding == Rounding::trunc) {
    add = hn::Zero(di);  // dropping the low bits is rounding toward zero
  } else if (p.rounding == Rounding::ties_zero) {
    // Half an ulp less one: a midpoint stays below the carry, so it drops to the smaller magnitude.
  } else {
    add = hn::Set(di, 1 << (drop - 1));  // ties away (exact on this grid in fp32 too)
  }
  const VI normal = hn::Sub(hn::ShiftRightSame(hn::Add(abs, add), drop), hn::Set(di, (127 - p.bias) << m));

  // Subnormal grid: x = a / 2^(e_min - m) < 2^m, then round to an integer in fp32.
  const VF x = hn::Mul(a, hn::Set(df, bits_to_float(static_cast<std::uint32_t>(127 + m - e_min) << 23)));
  // Zero-initialized only for GCC's flow analysis, which does not see that the switch covers
  // every Rounding (its -Wmaybe-uninitialized fires under ASan without use-after-scope).
  VF q = hn::Zero(df);
  VI subnormal = hn::Zero(di);
  switch (kRneSaturate ? Rounding::rne : p.rounding) {
    case Rounding::rne: {
      // 2^23 + x (0 <= x < 2^m) rounds x to an integer, RNE, and holds it in its low mantissa
      // bits: subtracting 2^23's bits is the integer, without a float-to-int conversion. Lanes
      // with larger x get garbage here, but they take the normal grid below.
      const VF magic = hn::Set(df, 8388608.0f);
      subnormal = hn::Sub(hn::BitCast(di, hn::Add(x, magic)), hn::Set(di, 0x4B000000));
      break;
    }
    case Rounding::half_away: {
      const VF fl = hn::Floor(x);
      q = hn::IfThenElse(hn::Ge(hn::Sub(x, fl), hn::Set(df, 0.5f)), hn::Add(fl, hn::Set(df, 1.0f)), fl);
      break;
    }
    case Rounding::half_away_fp32:
      q = hn::Floor(hn::Add(x, hn::Set(df, 0.5f)));
      break;
    case Rounding::trunc:
      q = hn::Floor(x);  // x >= 0
      break;
    case Rounding::ties_zero:
      // ceil(x - 0.5): x - 0.5 is exact for x >= 0.5 (Sterbenz below 1, a multiple of 2^-23's
      // grid above), and any x < 0.5 gives a value in [-0.5, 0) whose ceiling is 0.
      q = hn::Ceil(hn::Sub(x, hn::Set(df, 0.5f)));
      break;
    case Rounding::even_fp32: {
      const VF up = hn::Floor(hn::Add(x, hn::Set(df, 0.5f)));
      const VF below = hn::Sub(x, hn::Set(df, 0.5f));
      const VF half = hn::Mul(below, hn::Set(df, 0.5f));
      const auto even_int = hn::And(hn::Eq(hn::Floor(below), below), hn::Eq(hn::Floor(half), half));
      q = hn::IfThenElse(even_int, hn::Sub(up, hn::Set(df, 1.0f)), up);
      break;
    }
  }
  if (!kRneSaturate && p.rounding != Rounding::rne) subnormal = hn::ConvertTo(di, q);
  const auto is_sub = hn::Lt(abs, hn::Set(di, (127 + e_min) << 23));
  VI code = hn::IfThenElse(is_sub, subnormal, normal);

  // Overflow (inf included: its bits round past every code), then NaN.
  const auto over = hn::Gt(code, hn::Set(di, p.max_code));
  const std::int32_t ovf = kRneSaturate || p.overflow == Overflow::saturate ? p.max_code
                           : p.overflow == Overflow::nan                  ? 0x7F
                                                                          : 0x7C;
  code = hn::IfThenElse(over, hn::Set(di, ovf), code);
  if (p.finite_products) {
    // The nearest value of finite product: below the cap nothing changes; at or above it the
    // cap (a value past max included, when it saturates; overflow=nan / inf keep their code).
    const VI capped = hn::Min(code, hn::Set(di, cap));
    code = kRneSaturate || p.overflow == Overflow::saturate ? capped : hn::IfThenElse(over, code, capped);
  }
  const auto is_nan = hn::Gt(abs, hn::Set(di, kExpMask));
  code = hn::IfThenElse(is_nan, hn::Set(di, p.nan_code), code);

  // Sign: kept on zeros unless the contract says otherwise; the canonical NaN has none.
  VI sign = hn::ShiftLeftSame(hn::BitCast(di, hn::ShiftRight<31>(hn::BitCast(DU(), bits))), p.elem_bits - 1);
  // A NaN element's sign survives where the contract says so and the format has a NaN code.
  if (!p.nan_keeps_sign || p.canonical_nan) sign = hn::IfThenZeroElse(is_nan, sign);
  if (!kRneSaturate && p.signed_zero == SignedZero::drop) sign = hn::IfThenZeroElse(hn::Eq(code, hn::Zero(di)), sign);
  if (!kRneSaturate && p.signed_zero == SignedZero::underflow)  // a zero value (a -0.0 input) only
    sign = hn::IfThenZeroElse(
        hn::And(hn::Eq(code, hn::Zero(di)), hn::Lt(abs, hn::Set(di, static_cast<std::int32_t>(p.rounds_to_zero_below + 1)))), sign);
  if (!kRneSaturate && p.signed_zero == SignedZero::negative)  // a zero value, +0.0 too: q <= 0
    sign = hn::IfThenElse(hn::Lt(abs, hn::Set(di, static_cast<std::int32_t>(p.rounds_to_zero_below + 1))),
                          hn::Set(di, 1 << (p.elem_bits - 1)), sign);
  return hn::Or(code, sign);
}

// An element grid fixed at compile time, for the hot path of RNE saturating contracts: every
// shift, bias and bound an immediate or a hoisted constant instead of a plan field. kBits is
// the code's width (sign included), kMaxBits the fp32 bits of the largest finite value.
template <int kCodeBits, int kMbitsValue, int kBiasValue, std::int32_t kMaxValueBits, int kMaxCodeValue>
struct FixedGrid {
  static constexpr int kBits = kCodeBits;
  static constexpr int kMbits = kMbitsValue;
  static constexpr int kDrop = 23 - kMbitsValue;
  static constexpr int kBias = kBiasValue;
  static constexpr std::int32_t kMaxBits = kMaxValueBits;
  static constexpr int kMaxCode = kMaxCodeValue;
  // Half an element ulp less one, minus the exponent rebias (a multiple of the dropped bits).
  static constexpr std::int32_t kRound = (1 << (kDrop - 1)) - 1 - ((127 - kBias) << 23);
  static constexpr std::int32_t kSubnormalBelow = (128 - kBias) << 23;  // 2^(1 - bias)
  static constexpr std::int32_t kUnitsBits = (127 + kMbits + kBias - 1) << 23;  // 2^(mbits - e_min)

  static bool matches(const MxPlan& p) {
    return p.elem_bits == kBits && p.mbits == kMbits && p.bias == kBias && p.max_code == kMaxCode &&
           float_bits(p.max_value) == static_cast<std::uint32_t>(kMaxBits);
  }
};
using E4M3Grid = FixedGrid<8, 3, 7, 0x43E00000, 0x7E>;  // max 448
using E5M2Grid = FixedGrid<8, 2, 15, 0x47600000, 0x7B>;  // max 57344
using E2M1Grid = FixedGrid<4, 1, 1, 0x40C00000, 0x7>;    // max 6
using E3M2Grid = FixedGrid<6, 2, 3, 0x41E00000, 0x1F>;   // max 28, one code per byte
using E2M3Grid = FixedGrid<6, 3, 1, 0x40F00000, 0x1F>;   // max 7.5, one code per byte
struct NoGrid {  // the grid comes from the plan
  static constexpr int kBits = 0, kMbits = 0;
};

// Codes (int32 lanes, sign not included) of finite non-negative scaled values q, RNE with
// saturation: the same codes EncodeElements<true> gives such values. Clamping the bits at max
// first saturates (every value above max rounds to max or past it); the normal grid rounds on
// the integer bits; lanes below the smallest normal (zeros included) take the subnormal grid,
// computed only for vectors that have one: q / 2^(e_min - mbits) < 2^mbits is exact, and adding
// 2^23 rounds it to an integer (RNE) held in the low mantissa bits.
template <class G>
HWY_INLINE VI EncodeMagnitudeFixed(VF q) {
  const DF df;
  const DI di;
  const VI ab = hn::Min(hn::BitCast(di, q), hn::Set(di, G::kMaxBits));
  const VI lsb = hn::And(hn::ShiftRight<G::kDrop>(ab), hn::Set(di, 1));
  VI code = hn::ShiftRight<G::kDrop>(hn::Add(hn::Add(ab, hn::Set(di, G::kRound)), lsb));
  const auto sub = hn::Lt(ab, hn::Set(di, G::kSubnormalBelow));
  // E2M1's subnormal grid is everything below 1 (most lanes of a group): no branch there.
  if (G::kBits == 4 || HWY_UNLIKELY(!hn::AllFalse(di, sub))) {
    const VF units = hn::Mul(hn::BitCast(df, ab), hn::BitCast(df, hn::Set(di, G::kUnitsBits)));
    code = hn::IfThenElse(sub, hn::Sub(hn::BitCast(di, hn::Add(units, hn::Set(df, 8388608.0f))), hn::Set(di, 0x4B000000)),
                          code);
  }
  return code;
}

// Quantizes one group held in `src` (fp32, zero padded to the block); codes go to `codes`.
template <bool kRneSaturate>
HWY_INLINE std::uint8_t QuantizeGroup(const MxPlan& p, float* HWY_RESTRICT src, std::uint8_t* HWY_RESTRICT codes) {
  const DF df;
  const DI di;
  const int N = static_cast<int>(hn::Lanes(df));
  const int block = p.block;

  VI max_bits = hn::Zero(di), max_finite = hn::Zero(di);
  const VI abs_mask = hn::Set(di, 0x7FFFFFFF);
  const VI exp_mask = hn::Set(di, kExpMask);
  for (int i = 0; i < block; i += N) {
    VI bits = hn::BitCast(di, hn::Load(df, src + i));
    if (p.prequant_bf16) bits = RoundBf16Bits(bits);
    if (p.ftz) bits = FlushSubnormalBits(DI(), bits);
    if (p.prequant_bf16 || p.ftz) hn::Store(hn::BitCast(df, bits), df, src + i);
    const VI abs = hn::And(bits, abs_mask);
    max_bits = hn::Max(max_bits, abs);
    max_finite = hn::Max(max_finite, hn::IfThenZeroElse(hn::Gt(abs, exp_mask), abs));
  }
  const auto amax_bits = static_cast<std::uint32_t>(hn::GetLane(hn::MaxOfLanes(di, max_bits)));
  const GroupScale gs = group_scale(p, amax_bits, static_cast<std::uint32_t>(hn::GetLane(hn::MaxOfLanes(di, max_finite))));

  if (gs.fill) {
    std::memset(codes, gs.fill_code, static_cast<std::size_t>(block));
    return gs.byte;
  }
  if (gs.signed_nan) {  // every element NaN, each with its own sign
    for (int i = 0; i < block; ++i)
      codes[i] = static_cast<std::uint8_t>((float_bits(src[i]) >> 31 ? 0x80 : 0x00) | 0x7F);
    return gs.byte;
  }
  if (gs.nan_by_element) {
    for (int i = 0; i < block; ++i) codes[i] = nan_group_code(p, float_bits(src[i]));
    return gs.byte;
  }
  if (gs.ggml_nonfinite) {
    for (int i = 0; i < block; ++i) codes[i] = ggml_nonfinite_group_code(p, src[i], gs.multiplier);
    return gs.byte;
  }
  const hn::Rebind<std::uint8_t, DI> d8;
  const VF mul = hn::Set(df, gs.multiplier);
  for (int i = 0; i < block; i += N) {
    const VI code = EncodeElements<kRneSaturate>(p, hn::Mul(hn::Load(df, src + i), mul), gs.cap_code);
    hn::StoreU(hn::DemoteTo(d8, code), d8, codes + i);
  }
  if (gs.patch_inf)
    for (int i = 0; i < block; ++i)
      if ((float_bits(src[i]) & 0x7FFFFFFFu) == 0x7F800000u) codes[i] = quark_packed_code(p, float_bits(src[i]));
  return gs.byte;
}

// A whole group read straight from a contiguous row into registers, codes written straight to
// the payload: the path of almost every group of a real tensor.
template <DType kDtype, bool kRneSaturate>
HWY_INLINE std::uint8_t QuantizeFullGroup(const MxPlan& p, const std::uint8_t* HWY_RESTRICT row,
                                          std::int64_t begin, std::uint8_t* HWY_RESTRICT out) {
  const DF df;
  const DI di;
  constexpr int kN = static_cast<int>(hn::MaxLanes(DF()));
  constexpr int kMaxVecs = 32 / kN > 0 ? 32 / kN : 1;
  const int nv = p.block / kN;
  VI bits[kMaxVecs];
  VI max_bits = hn::Zero(di), max_finite = hn::Zero(di);
  const VI abs_mask = hn::Set(di, 0x7FFFFFFF);
  const VI exp_mask = hn::Set(di, kExpMask);
  for (int j = 0; j < nv; ++j) {
    VI b = hn::BitCast(di, LoadWidened(df, kDtype, row + (begin + j * kN) * static_cast<std::int64_t>(kDtype == DType::f32 ? 4 : 2)));
    if (p.prequant_bf16 && kDtype != DType::bf16) b = RoundBf16Bits(b);  // bf16 input already is
    if (p.ftz) b = FlushSubnormalBits(DI(), b);
    bits[j] = b;
    const VI abs = hn::And(b, abs_mask);
    max_bits = hn::Max(max_bits, abs);
    max_finite = hn::Max(max_finite, hn::IfThenZeroElse(hn::Gt(abs, exp_mask), abs));
  }
  const auto amax_bits = static_cast<std::uint32_t>(hn::GetLane(hn::MaxOfLanes(di, max_bits)));
  const auto finite_bits = amax_bits < static_cast<std::uint32_t>(kExpMask)
                               ? amax_bits
                               : static_cast<std::uint32_t>(hn::GetLane(hn::MaxOfLanes(di, max_finite)));
  const GroupScale gs = group_scale(p, amax_bits, finite_bits);
  if (gs.fill) {
    std::memset(out + begin, gs.fill_code, static_cast<std::size_t>(p.block));
    return gs.byte;
  }
  if (gs.signed_nan) {
    for (int j = 0; j < nv; ++j) {
      const VI sign = hn::ShiftLeft<7>(hn::BitCast(di, hn::ShiftRight<31>(hn::BitCast(DU(), bits[j]))));
      hn::StoreU(hn::DemoteTo(hn::Rebind<std::uint8_t, DI>(), hn::Or(sign, hn::Set(di, 0x7F))),
                 hn::Rebind<std::uint8_t, DI>(), out + begin + j * kN);
    }
    return gs.byte;
  }
  if (gs.nan_by_element || gs.ggml_nonfinite) {
    HWY_ALIGN std::int32_t lanes[kN];
    for (int j = 0; j < nv; ++j) {
      hn::Store(bits[j], di, lanes);
      for (int i = 0; i < kN; ++i) {
        const auto b = static_cast<std::uint32_t>(lanes[i]);
        out[begin + j * kN + i] = gs.nan_by_element ? nan_group_code(p, b)
                                                 : ggml_nonfinite_group_code(p, bits_to_float(b), gs.multiplier);
      }
    }
    return gs.byte;
  }
  // Codes are 0..255: truncating each lane to its low byte is exact (one vpmovdb on AVX-512,
  // where the saturating demotion takes two packs).
  const hn::Rebind<std::uint8_t, DU> d8;
  const VF mul = hn::Set(df, gs.multiplier);
  for (int j = 0; j < nv; ++j) {
    const VI code = EncodeElements<kRneSaturate>(p, hn::Mul(hn::BitCast(df, bits[j]), mul), gs.cap_code);
    hn::StoreU(hn::TruncateTo(d8, hn::BitCast(DU(), code)), d8, out + begin + j * kN);
  }
  if (gs.patch_inf) {  // Quark, FP6: an inf element's code from its bits, as QuantizeGroup
    HWY_ALIGN std::int32_t lanes[kN];
    for (int j = 0; j < nv; ++j) {
      hn::Store(bits[j], di, lanes);
      for (int i = 0; i < kN; ++i)
        if ((static_cast<std::uint32_t>(lanes[i]) & 0x7FFFFFFFu) == 0x7F800000u)
          out[begin + j * kN + i] = quark_packed_code(p, static_cast<std::uint32_t>(lanes[i]));
    }
  }
  return gs.byte;
}

#if HWY_TARGET != HWY_SCALAR
// The scale bytes of kN groups whose amax bits are the lanes of `amax`, under the contract's
// rule (as scale_byte_from_bits, lane by lane; not the fp32-log2 floor), stored at `scale`, and
// their power-of-two multipliers 2^(127 - byte) (the exponent field 254 - byte, or the
// subnormal 2^-127 for byte 254). Returns false, having written nothing, when a group is
// special (scale byte 0 or a non-finite amax): group_scale applies the contract's rules there.
HWY_INLINE bool BatchScales(const MxPlan& p, VI amax, float* HWY_RESTRICT multipliers, std::uint8_t* HWY_RESTRICT scale) {
  const DF df;
  const DI di;
  if (!hn::AllFalse(di, hn::Gt(amax, hn::Set(di, kExpMask - 1)))) return false;
  const VI zero = hn::Zero(di), one = hn::Set(di, 1), top = hn::Set(di, 254);
  const VI mantissa_mask = hn::Set(di, 0x7FFFFF);
  const auto clamp = [&](VI b) { return hn::Min(hn::Max(b, zero), top); };
  VI byte;
  switch (p.rule) {
    case ScaleRule::floor: {
      VI e = hn::ShiftRight<23>(amax);
      if (p.log2_fp32) {
        // torch.log2 in fp32 reaches e - 126 from log2_up_from[e] on (~0u, read as -1: never).
        const VI from = hn::GatherIndex(di, reinterpret_cast<const std::int32_t*>(p.log2_up_from), e);
        e = hn::Add(e, hn::IfThenElseZero(hn::And(hn::Gt(from, hn::Set(di, -1)), hn::Gt(amax, hn::Sub(from, one))), one));
      }
      byte = clamp(hn::Sub(e, hn::Set(di, p.emax)));
      break;
    }
    case ScaleRule::ceil: {
      const VI up = hn::IfThenElseZero(hn::Ne(hn::And(amax, mantissa_mask), zero), one);
      byte = clamp(hn::Sub(hn::Add(hn::ShiftRight<23>(amax), up), hn::Set(di, p.emax)));
      break;
    }
    case ScaleRule::even: {
      const VI rounded = hn::And(hn::Add(amax, hn::Set(di, 1 << (22 - p.round_mbits))), hn::Set(di, static_cast<std::int32_t>(0xFF800000u)));
      // compressed-tensors' and Quark's rounding to 2^128 is a special group (group_scale's rules).
      if ((p.nonfinite == NonFiniteRule::ct || p.nonfinite == NonFiniteRule::quark) &&
          !hn::AllFalse(di, hn::Eq(rounded, hn::Set(di, kExpMask))))
        return false;
      byte = clamp(hn::Sub(hn::ShiftRight<23>(rounded), hn::Set(di, p.emax)));
      break;
    }
    case ScaleRule::rceil: {
      const VF a = hn::BitCast(df, amax);
      const VI d = hn::BitCast(di, p.ratio_reciprocal ? hn::Mul(a, hn::Set(df, p.inv_max_value))
                                                      : hn::Div(a, hn::Set(df, p.max_value)));
      const VI de = hn::ShiftRight<23>(d);
      const VI mant = hn::And(d, mantissa_mask);
      // A subnormal ratio rounds up above half of 2^-126 only (as the scalar rule).
      const auto subnormal = hn::Eq(de, zero);
      const auto up = hn::Or(hn::And(subnormal, hn::Gt(mant, hn::Set(di, 0x400000))),
                             hn::AndNot(subnormal, hn::Ne(mant, zero)));
      byte = hn::Min(hn::Add(de, hn::IfThenElseZero(up, one)), top);
      break;
    }
    case ScaleRule::rceil_bits: {
      const VF a = hn::BitCast(df, amax);
      const VI d = hn::BitCast(di, p.ratio_reciprocal ? hn::Mul(a, hn::Set(df, p.inv_max_value))
                                                      : hn::Div(a, hn::Set(df, p.max_value)));
      byte = hn::Min(hn::ShiftRight<23>(hn::Add(d, mantissa_mask)), top);
      break;
    }
  }
  if (!hn::AllFalse(di, hn::Lt(byte, hn::Set(di, p.batch_min_byte)))) return false;
  // finite_products caps codes from byte 240 on: such groups take group_scale's cap.
  if (p.finite_products && !hn::AllFalse(di, hn::Gt(byte, hn::Set(di, 239)))) return false;
  const VI mult_bits = hn::IfThenElse(hn::Eq(byte, hn::Set(di, 254)), hn::Set(di, 0x00400000),
                                      hn::ShiftLeft<23>(hn::Sub(hn::Set(di, 254), byte)));
  hn::Store(hn::BitCast(df, mult_bits), df, multipliers);
  const hn::Rebind<std::uint8_t, DU> d8;
  hn::StoreU(hn::TruncateTo(d8, hn::BitCast(DU(), byte)), d8, scale);
  return true;
}
#endif

#if HWY_TARGET != HWY_SCALAR
// Vector v of the whole groups of 32 that start at src, as fp32 bits (rounded to bf16 first
// where the contract says so).
template <DType kDtype>
HWY_INLINE VI LoadGroupBits(const MxPlan& p, const std::uint8_t* HWY_RESTRICT src, int v) {
  constexpr std::int64_t kSize = kDtype == DType::f32 ? 4 : 2;
  VI b = hn::BitCast(DI(), LoadWidened(DF(), kDtype, src + v * static_cast<std::int64_t>(hn::MaxLanes(DF())) * kSize));
  if (p.prequant_bf16 && kDtype != DType::bf16) b = RoundBf16Bits(b);  // bf16 input already is
  return b;
}

// The |x| bits' maxima of the Lanes consecutive groups of 32 that start at src, group j's in
// lane j.
template <DType kDtype>
HWY_INLINE VI GroupMaxima32(const MxPlan& p, const std::uint8_t* HWY_RESTRICT src) {
  const DI di;
  constexpr int kN = static_cast<int>(hn::MaxLanes(DF()));
  constexpr int kPerGroup = 32 / kN;
  const VI abs_mask = hn::Set(di, 0x7FFFFFFF);
  VI level[kN];
  for (int j = 0; j < kN; ++j) {
    VI m = hn::And(LoadGroupBits<kDtype>(p, src, j * kPerGroup), abs_mask);
    for (int v = 1; v < kPerGroup; ++v) m = hn::Max(m, hn::And(LoadGroupBits<kDtype>(p, src, j * kPerGroup + v), abs_mask));
    level[j] = m;
  }
  return LaneMaxima<kN>(di, level);
}
#endif

// One lane per group: kN consecutive whole groups of block 32 in one contiguous row (scale
// bytes from BatchScales, lane by lane). The groups' maxima are reduced together (each
// level of ConcatEven/ConcatOdd + Max halves both the vectors and the lanes per group, leaving
// group j's max in lane j), the scale bytes and power-of-two multipliers come out of one
// vector, and the elements are encoded as in QuantizeFullGroup. Returns false, having written
// nothing, when a group is special (scale byte 0 or a non-finite amax): the caller then runs
// the groups one at a time, where group_scale applies the contract's rules for those.
template <DType kDtype, bool kRneSaturate, class Grid>
HWY_INLINE bool QuantizeGroupBatch(const MxPlan& p, const std::uint8_t* HWY_RESTRICT row, std::int64_t g0,
                                   std::uint8_t* HWY_RESTRICT out, std::uint8_t* HWY_RESTRICT scale) {
#if HWY_TARGET == HWY_SCALAR
  (void)p, (void)row, (void)g0, (void)out, (void)scale;
  return false;
#else
  const DF df;
  const DI di;
  constexpr int kN = static_cast<int>(hn::MaxLanes(DF()));
  static_assert(kN <= 32 && 32 % kN == 0, "a group of 32 is whole vectors");
  constexpr int kPerGroup = 32 / kN;  // vectors per group of 32
  constexpr std::int64_t kSize = kDtype == DType::f32 ? 4 : 2;
  const std::uint8_t* src = row + g0 * 32 * kSize;
  const auto load_bits = [&](int v) { return LoadGroupBits<kDtype>(p, src, v); };
  HWY_ALIGN float multipliers[kN];
  if (!BatchScales(p, GroupMaxima32<kDtype>(p, src), multipliers, scale)) return false;
  const VI abs_mask = hn::Set(di, 0x7FFFFFFF);
  const auto code_of = [&](int at) {
    const VF mul = hn::Set(df, multipliers[at / kPerGroup]);
    const VI bits = load_bits(at);
    if constexpr (Grid::kBits == 8 || Grid::kBits == 6) {
      // Finite groups only here: the magnitude's code, then the sign at the code's top bit.
      const VI code = EncodeMagnitudeFixed<Grid>(hn::Mul(hn::BitCast(df, hn::And(bits, abs_mask)), mul));
      return hn::OrAnd(code, hn::ShiftRight<32 - Grid::kBits>(bits), hn::Set(di, 1 << (Grid::kBits - 1)));
    } else {
      return EncodeElements<kRneSaturate>(p, hn::Mul(hn::BitCast(df, bits), mul), p.max_code);
    }
  };
  // 32 vectors of codes (kN groups of 32), four per store.
  for (int at = 0; at < kN * kPerGroup; at += 4)
    CodeWriter::Store4(code_of(at), code_of(at + 1), code_of(at + 2), code_of(at + 3), out + g0 * 32 + at * kN);
  return true;
#endif
}

// E2M1 codes (sign at bit 3) of finite values v = x * 2^k, exact, under ggml's element rule:
// the nearest value, ties toward zero, saturating at 6, a zero code without sign (the same
// codes EncodeElements gives under rounding=ties_zero, overflow=saturate, signed_zero=drop).
// From 1 on, the integer bits round to one mantissa bit (half an ulp less one: a tie stays
// below the carry); below 1 the values 0, 0.5 and 1 are chosen by their midpoints 0.25 and
// 0.75, strictly exceeded.
HWY_INLINE VI EncodeE2M1TiesZeroSignless(VF v) {
  const DI di;
  const VI bits = hn::BitCast(di, v);
  const VI ab = hn::Min(hn::And(bits, hn::Set(di, 0x7FFFFFFF)), hn::Set(di, 0x40C00000));  // 6.0
  const VI normal = hn::ShiftRight<22>(hn::Add(ab, hn::Set(di, (1 << 21) - 1 - (126 << 23))));
  const VI below_one = hn::Neg(hn::Add(hn::VecFromMask(di, hn::Gt(ab, hn::Set(di, 0x3E800000))),    // 0.25
                                       hn::VecFromMask(di, hn::Gt(ab, hn::Set(di, 0x3F400000)))));  // 0.75
  const VI code = hn::IfThenElse(hn::Lt(ab, hn::Set(di, 0x3F800000)), below_one, normal);
  const VI sign = hn::And(hn::BitCast(di, hn::ShiftRight<28>(hn::BitCast(DU(), bits))), hn::Set(di, 8));
  return hn::Or(code, hn::IfThenZeroElse(hn::Eq(code, hn::Zero(di)), sign));
}

// QuantizeGroupBatch for 4-bit codes packed in halves (ggml: byte j of a group of 32 holds
// elements j and j + 16, the first in the low nibble), any input dtype and contract: the
// element at vector v of a group pairs with the one kPerGroup / 2 vectors on, lane for lane.
// kGgmlElements: the contract's element rule is EncodeE2M1TiesZeroSignless's.
template <DType kDtype, bool kRneSaturate, bool kGgmlElements>
HWY_INLINE bool QuantizeHalvesGroupBatch(const MxPlan& p, const std::uint8_t* HWY_RESTRICT row, std::int64_t g0,
                                         std::uint8_t* HWY_RESTRICT out, std::uint8_t* HWY_RESTRICT scale) {
#if HWY_TARGET == HWY_SCALAR
  (void)p, (void)row, (void)g0, (void)out, (void)scale;
  return false;
#else
  const DF df;
  const DI di;
  constexpr int kN = static_cast<int>(hn::MaxLanes(DF()));
  static_assert(kN <= 16 && 32 % kN == 0, "a group of 32 is an even number of whole vectors");
  constexpr int kPerGroup = 32 / kN;
  constexpr int kHalf = kPerGroup / 2;  // vectors per half group
  constexpr std::int64_t kSize = kDtype == DType::f32 ? 4 : 2;
  const std::uint8_t* src = row + g0 * 32 * kSize;
  const auto load_bits = [&](int v) { return LoadGroupBits<kDtype>(p, src, v); };
  HWY_ALIGN float multipliers[kN];
  if (!BatchScales(p, GroupMaxima32<kDtype>(p, src), multipliers, scale)) return false;
  // Payload vector s (kN bytes) is half-group vector s % kHalf of group s / kHalf.
  const auto bytes_of = [&](int s) {
    const int group = s / kHalf;
    const int lo = group * kPerGroup + s % kHalf;
    const VF mul = hn::Set(df, multipliers[group]);
    const VF lo_v = hn::Mul(hn::BitCast(df, load_bits(lo)), mul);
    const VF hi_v = hn::Mul(hn::BitCast(df, load_bits(lo + kHalf)), mul);
    if constexpr (kGgmlElements)
      return hn::Or(EncodeE2M1TiesZeroSignless(lo_v), hn::ShiftLeft<4>(EncodeE2M1TiesZeroSignless(hi_v)));
    const VI c_lo = EncodeElements<kRneSaturate>(p, lo_v, p.max_code);
    const VI c_hi = EncodeElements<kRneSaturate>(p, hi_v, p.max_code);
    return hn::Or(c_lo, hn::ShiftLeft<4>(c_hi));
  };
  // kN groups of 16 bytes: 16 vectors of kN bytes, four per store.
  std::uint8_t* dst = out + g0 * 16;
  for (int s = 0; s < 16; s += 4) CodeWriter::Store4(bytes_of(s), bytes_of(s + 1), bytes_of(s + 2), bytes_of(s + 3), dst + s * kN);
  return true;
#endif
}

#if HWY_TARGET != HWY_SCALAR
// The |x| maxima, as fp32 bits, of the Lanes consecutive groups of 32 bf16 values at src, group
// j's in lane j: a 32-bit lane holds two elements, each an fp32 value once moved to the top.
HWY_INLINE VI Bf16GroupMaxima(const std::uint8_t* HWY_RESTRICT src) {
  const DI di;
  const DU du;
  constexpr int kN = static_cast<int>(hn::MaxLanes(DF()));
  constexpr int kPerGroup = 16 / kN;
  const auto magnitude = hn::Set(du, 0x7FFF7FFFu);
  VI level[kN];
  for (int j = 0; j < kN; ++j) {
    VI m = hn::Zero(di);
    for (int v = 0; v < kPerGroup; ++v) {
      const auto a = hn::And(hn::LoadU(du, reinterpret_cast<const std::uint32_t*>(src + (j * kPerGroup + v) * kN * 4)), magnitude);
      m = hn::Max(m, hn::Max(hn::BitCast(di, hn::ShiftLeft<16>(a)), hn::BitCast(di, hn::And(a, hn::Set(du, 0xFFFF0000u)))));
    }
    level[j] = m;
  }
  return LaneMaxima<kN>(di, level);
}
#endif

// QuantizeBf16GroupBatch for E2M1 and E4M3 (RNE, saturating, zero signs kept) in 16-bit lanes,
// one element each: twice the elements per instruction. A bf16 magnitude times the group's
// multiplier 2^(127 - byte) is its bits plus (127 - byte) << 7, exact while the sum is a
// normal bf16; where the sum's exponent field reaches 0 or below (clamped at 0) the true
// product is below 2^-126, a zero code either way. A subnormal input's sum has no implicit one
// and is wrong, but below 2^(1 - byte), as its true product is: both are a zero code where
// that bound is at most half the element's smallest value, from byte kMinByte on (E2M1: 2^-4
// against 0.25, byte 5; E4M3: 2^-10 against its 2^-9, byte 11). Every rule gives a byte of at
// least e - emax - 1 for an amax of exponent field e, so batches take amaxes of field
// kMinByte + emax + 1 or more. Codes on the integer bits: the significand rounded to the
// element's mantissa bits (ties to even) and rebiased; below the smallest normal, E2M1's
// midpoints 0.25 (to 0) and 0.75 (to 1, even), E4M3's (2k + 1) 2^-10 (ties to even). Returns
// false, having written nothing, as the other batches.
template <class Grid>
HWY_INLINE bool QuantizeBf16Lanes16Batch(const MxPlan& p, const std::uint8_t* HWY_RESTRICT row, std::int64_t g0,
                                         std::uint8_t* HWY_RESTRICT out, std::uint8_t* HWY_RESTRICT scale) {
#if HWY_TARGET == HWY_SCALAR
  (void)p, (void)row, (void)g0, (void)out, (void)scale;
  return false;
#else
  static_assert(Grid::kBits == 4 || (Grid::kBits == 8 && Grid::kMbits == 3), "E2M1 or E4M3");
  constexpr bool kFp4 = Grid::kBits == 4;
  constexpr int kMinByte = kFp4 ? 5 : 11;
  constexpr int kEmax = kFp4 ? 2 : 8;
  const DI di;
  const DU du;
  const hn::Repartition<std::int16_t, DI> d16;
  using V16 = hn::Vec<decltype(d16)>;
  constexpr int kN = static_cast<int>(hn::MaxLanes(DF()));
  static_assert(kN <= 16 && 16 % kN == 0, "a group of 32 bf16 is whole vectors");
  constexpr int kPerGroup = 16 / kN;  // vectors of 2 kN bf16 per group of 32
  const std::uint8_t* src = row + g0 * 64;
  const VI amax = Bf16GroupMaxima(src);
  if (!hn::AllFalse(di, hn::Lt(amax, hn::Set(di, (kMinByte + kEmax + 1) << 23)))) return false;
  HWY_ALIGN float multipliers[kN];
  if (!BatchScales(p, amax, multipliers, scale)) return false;
  // (127 - byte) << 7 per group: the multiplier's exponent field, less 127 (byte 254's
  // multiplier is the subnormal 2^-127, field 0: -127 too).
  HWY_ALIGN std::int32_t offsets[kN];
  hn::Store(hn::ShiftLeft<7>(hn::Sub(hn::ShiftRight<23>(hn::BitCast(di, hn::Load(DF(), multipliers))), hn::Set(di, 127))), di,
            offsets);
  constexpr int kDrop = 7 - Grid::kMbits;  // bf16 significand bits below the element's
  constexpr std::int16_t kMaxBits = static_cast<std::int16_t>(Grid::kMaxBits >> 16);
  constexpr std::int16_t kNormalFrom = static_cast<std::int16_t>(Grid::kSubnormalBelow >> 16);
  // Half an element ulp less one, minus the exponent rebias.
  constexpr std::int16_t kRound = static_cast<std::int16_t>((1 << (kDrop - 1)) - 1 - ((127 - Grid::kBias) << 7));
  const auto count_above = [&](V16 ab, std::int16_t from) { return hn::VecFromMask(d16, hn::Gt(ab, hn::Set(d16, from))); };
  const auto codes = [&](int v) {
    const V16 x = hn::LoadU(d16, reinterpret_cast<const std::int16_t*>(src + v * kN * 4));
    const V16 shifted = hn::Add(hn::And(x, hn::Set(d16, 0x7FFF)), hn::Set(d16, static_cast<std::int16_t>(offsets[v / kPerGroup])));
    const V16 ab = hn::Min(hn::Max(shifted, hn::Zero(d16)), hn::Set(d16, kMaxBits));  // saturated at max
    const V16 lsb = hn::And(hn::ShiftRight<kDrop>(ab), hn::Set(d16, 1));
    V16 code = hn::ShiftRight<kDrop>(hn::Add(hn::Add(ab, hn::Set(d16, kRound)), lsb));
    const auto sub = hn::Lt(ab, hn::Set(d16, kNormalFrom));
    if constexpr (kFp4) {  // most lanes: no branch
      const V16 below = hn::Neg(hn::Add(count_above(ab, 0x3E80), count_above(ab, 0x3F3F)));  // 0.25; 0.75 and up
      code = hn::IfThenElse(sub, below, code);
      const auto w = hn::BitCast(du, hn::Or(code, hn::And(hn::ShiftRight<12>(x), hn::Set(d16, 8))));  // sign: bit 3
      // Element 2i in the low nibble of byte i, 2i + 1 in its high nibble.
      return hn::BitCast(di, hn::Or(hn::And(w, hn::Set(du, 0xFu)), hn::And(hn::ShiftRight<12>(w), hn::Set(du, 0xF0u))));
    } else {
      if (HWY_UNLIKELY(!hn::AllFalse(d16, sub))) {
        // Midpoint (2k + 1) 2^-10 rounds up to k + 1 when k is odd (to even): counted from it.
        V16 below = hn::Zero(d16);
        for (int k = 0; k < 8; ++k) {
          const auto mid = static_cast<std::int16_t>(std::bit_cast<std::uint32_t>(std::ldexp(2.0f * k + 1.0f, -10)) >> 16);
          below = hn::Sub(below, count_above(ab, static_cast<std::int16_t>(k % 2 ? mid - 1 : mid)));
        }
        code = hn::IfThenElse(sub, below, code);
      }
      return hn::BitCast(di, hn::Or(code, hn::And(hn::ShiftRight<8>(x), hn::Set(d16, 0x80))));  // sign: bit 7
    }
  };
  if constexpr (kFp4) {
    std::uint8_t* dst = out + g0 * 16;  // 16 vectors of kN bytes
    for (int at = 0; at < kN * kPerGroup; at += 4)
      CodeWriter::Store4(codes(at), codes(at + 1), codes(at + 2), codes(at + 3), dst + at * kN);
  } else {
    const hn::Rebind<std::uint8_t, decltype(d16)> d8;
    std::uint8_t* dst = out + g0 * 32;  // 16 vectors of 2 kN bytes
    for (int at = 0; at < kN * kPerGroup; ++at)
      hn::StoreU(hn::DemoteTo(d8, hn::BitCast(d16, codes(at))), d8, dst + at * 2 * kN);
  }
  return true;
#endif
}

// QuantizeGroupBatch for bf16 input and a grid fixed at compile time (RNE, saturating, signed
// zeros kept). A vector of 32-bit lanes loads twice as many bf16 elements: lane i holds
// elements 2i (low half) and 2i+1 (high half), each an fp32 value once moved to the top (a
// shift) or masked there. Their codes meet again in one lane, in element order: 8-bit codes as
// a 16-bit pair (even | odd << 8, the signs from bits 15 and 31), 4-bit codes as the byte the
// payload holds (even | odd << 4: element 2k in the low nibble). Returns false, having written
// nothing, for a batch with a special group (as QuantizeGroupBatch).
template <class Grid>
HWY_INLINE bool QuantizeBf16GroupBatch(const MxPlan& p, const std::uint8_t* HWY_RESTRICT row, std::int64_t g0,
                                       std::uint8_t* HWY_RESTRICT out, std::uint8_t* HWY_RESTRICT scale) {
#if HWY_TARGET == HWY_SCALAR
  (void)p, (void)row, (void)g0, (void)out, (void)scale;
  return false;
#else
  const DF df;
  const DI di;
  const DU du;
  using VU = hn::Vec<DU>;
  constexpr int kN = static_cast<int>(hn::MaxLanes(DF()));
  static_assert(kN <= 16 && 16 % kN == 0, "a group of 32 bf16 is whole vectors");
  constexpr int kPerGroup = 16 / kN;  // vectors of 2 * kN bf16 per group of 32
  const std::uint8_t* src = row + g0 * 64;
  const auto load = [&](int v) { return hn::LoadU(du, reinterpret_cast<const std::uint32_t*>(src + v * kN * 4)); };
  const VU magnitude = hn::Set(du, 0x7FFF7FFFu);
  const VU high = hn::Set(du, 0xFFFF0000u);
  const auto even = [&](VU a) { return hn::BitCast(df, hn::ShiftLeft<16>(a)); };
  const auto odd = [&](VU a) { return hn::BitCast(df, hn::And(a, high)); };
  HWY_ALIGN float multipliers[kN];
  if (!BatchScales(p, Bf16GroupMaxima(src), multipliers, scale)) return false;

  // The codes of vector v's element pairs, one pair per 32-bit lane.
  const auto pairs = [&](int v, VF mul) {
    const VU x = load(v);
    const VU a = hn::And(x, magnitude);
    const VU ce = hn::BitCast(du, EncodeMagnitudeFixed<Grid>(hn::Mul(even(a), mul)));
    const VU co = hn::BitCast(du, EncodeMagnitudeFixed<Grid>(hn::Mul(odd(a), mul)));
    // kB-bit codes, kPack bits apart: 4-bit codes share a byte, 6- and 8-bit codes have one each.
    constexpr int kB = Grid::kBits, kPack = kB == 4 ? 4 : 8;
    // Even sign: bit 15 to bit kB - 1; odd sign: bit 31 to bit kPack + kB - 1.
    const VU w = hn::OrAnd(hn::Or(ce, hn::ShiftLeft<kPack>(co)), hn::ShiftRight<16 - kB>(x), hn::Set(du, 1u << (kB - 1)));
    return hn::OrAnd(w, hn::ShiftRight<32 - kPack - kB>(x), hn::Set(du, 1u << (kPack + kB - 1)));
  };
  const auto codes = [&](int at) { return hn::BitCast(di, pairs(at, hn::Set(df, multipliers[at / kPerGroup]))); };
  if constexpr (Grid::kBits == 4) {
    // A group's 32 codes are 16 payload bytes: kPerGroup vectors of kN bytes, four per store.
    std::uint8_t* dst = out + g0 * 16;
    for (int at = 0; at < kN * kPerGroup; at += 4)
      CodeWriter::Store4(codes(at), codes(at + 1), codes(at + 2), codes(at + 3), dst + at * kN);
  } else {
    // A group's 32 codes are 32 payload bytes: kPerGroup vectors of 2 kN bytes, two per store.
    std::uint8_t* dst = out + g0 * 32;
    for (int at = 0; at < kN * kPerGroup; at += 2) CodeWriter::StorePairs2(codes(at), codes(at + 1), dst + at * 2 * kN);
  }
  return true;
#endif
}

// Batches prefetch their input this far ahead, not the common 8 KiB: measured on the 2-core VM
// (bench, 2^26 bf16, 3 alternated runs each, load ~1.5), 2 KiB took the MXFP8 quantizers from
// 0.66-0.72 to 0.76-0.79 of the copy at 2 threads and MXFP4 from 0.53 to 0.60 (1 KiB about as
// well, 4 KiB as 8). The other kernels did not gain the same way (HiF4 pack lost).
constexpr std::int64_t kBatchPrefetchBytes = 2048;

// Grid: the element grid fixed at compile time for batches (bf16 ones in
// QuantizeBf16GroupBatch; 4-bit codes only there), or NoGrid.
template <DType kDtype, bool kRneSaturate, class Grid>
void QuantizeGroupsOf(const MxPlan& plan, std::int64_t first, std::int64_t last) {
  // A local copy: the byte stores below may alias anything, which would make the compiler
  // reload every plan field after each of them.
  const MxPlan p = plan;
  HWY_ALIGN float buf[32];
  HWY_ALIGN std::uint8_t codes[32];
  constexpr std::size_t kSize = kDtype == DType::f32 ? 4 : 2;
  // Codes of a byte each (FP8, and FP6 as qexact stores it) from a contiguous row take the
  // register path.
  const bool direct = p.col_stride == 1 && !p.fp4;
  // Groups of 32 from a contiguous row, scale bytes of a row contiguous: kN at a time.
  constexpr std::int64_t kBatch = static_cast<std::int64_t>(hn::MaxLanes(DF()));
  constexpr std::int64_t kLanes = kBatch;
  static_assert(Grid::kBits != 4 || kDtype == DType::bf16, "4-bit batches are bf16 ones");
  // 4-bit codes: adjacent nibbles from the fixed grid's bf16 batches, halves from their own.
  // Batches leave a group that needs finite_products' cap to the per-group path, and read
  // the fp32 log2 of the floor rule only.
  const bool halves = p.fp4 && p.packing_halves && p.col_stride == 1;
  const bool ggml_elements = p.rounding == Rounding::ties_zero && p.overflow == Overflow::saturate &&
                             p.signed_zero == SignedZero::drop && p.max_code == 0x7;
  const bool batched = (direct || (Grid::kBits == 4 && p.col_stride == 1 && !p.packing_halves) || halves) &&
                       p.block == 32 && (!p.log2_fp32 || p.rule == ScaleRule::floor) &&
                       p.layout != ScaleLayout::swizzled && kBatch > 1;
  std::int64_t row = first / p.groups;
  std::int64_t g = first % p.groups;
  const std::uint8_t* row_ptr = p.data + static_cast<std::size_t>(mx_row_offset(p, row)) * kSize;
  const auto one_group = [&](std::int64_t gi) {
    const std::int64_t begin = gi * p.block;
    const int n = static_cast<int>(std::min<std::int64_t>(p.block, p.k - begin));
    std::uint8_t* out = p.payload + row * p.payload_row_bytes;
    std::uint8_t byte;
    if (direct && n == p.block) {
      PrefetchAheadBytes(row_ptr + begin * static_cast<std::int64_t>(kSize), p.block * static_cast<std::int64_t>(kSize));
      byte = QuantizeFullGroup<kDtype, kRneSaturate>(p, row_ptr, begin, out);
    } else {
      if (p.col_stride == 1 && n == p.block && p.block % kLanes == 0) {  // a whole group of a row: vector loads
        PrefetchAheadBytes(row_ptr + begin * static_cast<std::int64_t>(kSize), p.block * static_cast<std::int64_t>(kSize));
        for (int i = 0; i < p.block; i += static_cast<int>(kLanes))
          hn::Store(LoadWidened(DF(), kDtype, row_ptr + (begin + i) * static_cast<std::int64_t>(kSize)), DF(), buf + i);
      } else {
        for (int i = 0; i < p.block; ++i) buf[i] = i < n ? load_scalar_f32(kDtype, row_ptr, (begin + i) * p.col_stride) : 0.0f;
      }
      byte = QuantizeGroup<kRneSaturate>(p, buf, codes);
      if (p.fp4 && p.packing_halves) {  // whole groups (tail=reject): j with j + block / 2
        const int half = n / 2;
        int j = 0;
#if HWY_TARGET != HWY_SCALAR
        if (half == 16) {  // the block of 32: one 16-byte vector of each half
          const hn::FixedTag<std::uint8_t, 16> d16;
          hn::StoreU(hn::Or(hn::LoadU(d16, codes), hn::ShiftLeft<4>(hn::LoadU(d16, codes + 16))), d16, out + begin / 2);
          j = half;
        }
#endif
        for (; j < half; ++j) out[begin / 2 + j] = static_cast<std::uint8_t>(codes[j] | (codes[j + half] << 4));
      } else if (p.fp4) {
        for (int i = 0; i < n; i += 2) {  // groups start at even columns: whole bytes
          const std::uint8_t hi = i + 1 < n ? codes[i + 1] : 0;
          out[(begin + i) / 2] = static_cast<std::uint8_t>(codes[i] | (hi << 4));
        }
      } else {
        std::memcpy(out + begin, codes, static_cast<std::size_t>(n));
      }
    }
    p.scale[mx_scale_offset(p, row, gi)] = byte;
  };
  for (std::int64_t flat = first; flat < last;) {
    std::int64_t done = 1;
    if (batched && (g + kBatch) * p.block <= p.k && flat + kBatch <= last) {
      done = kBatch;
      PrefetchBytes(row_ptr + g * 32 * static_cast<std::int64_t>(kSize) + kBatchPrefetchBytes,
                    kBatch * 32 * static_cast<std::int64_t>(kSize));
      std::uint8_t* out = p.payload + row * p.payload_row_bytes;
      std::uint8_t* scale = p.scale + mx_scale_offset(p, row, g);
      bool done_batch;
      if (halves && ggml_elements)
        done_batch = QuantizeHalvesGroupBatch<kDtype, kRneSaturate, true>(p, row_ptr, g, out, scale);
      else if (halves)
        done_batch = QuantizeHalvesGroupBatch<kDtype, kRneSaturate, false>(p, row_ptr, g, out, scale);
      else if constexpr ((Grid::kBits == 4 || (Grid::kBits == 8 && Grid::kMbits == 3)) && kDtype == DType::bf16)
        done_batch = QuantizeBf16Lanes16Batch<Grid>(p, row_ptr, g, out, scale) ||
                     QuantizeBf16GroupBatch<Grid>(p, row_ptr, g, out, scale);
      else if constexpr (Grid::kBits != 0 && kDtype == DType::bf16)
        done_batch = QuantizeBf16GroupBatch<Grid>(p, row_ptr, g, out, scale);
      else
        done_batch = QuantizeGroupBatch<kDtype, kRneSaturate, Grid>(p, row_ptr, g, out, scale);
      if (!done_batch)
        for (std::int64_t j = 0; j < kBatch; ++j) one_group(g + j);
    } else {
      one_group(g);
    }
    flat += done;
    g += done;
    if (g == p.groups && flat < last) {
      g = 0;
      ++row;
      row_ptr = p.data + static_cast<std::size_t>(mx_row_offset(p, row)) * kSize;
    }
  }
}

template <DType kDtype>
void QuantizeGroupsOf(const MxPlan& p, std::int64_t first, std::int64_t last) {
  const bool rne_saturate =
      p.rounding == Rounding::rne && p.overflow == Overflow::saturate && p.signed_zero == SignedZero::keep;
  if (!rne_saturate) return QuantizeGroupsOf<kDtype, false, NoGrid>(p, first, last);
  if (E4M3Grid::matches(p)) return QuantizeGroupsOf<kDtype, true, E4M3Grid>(p, first, last);
  if (E5M2Grid::matches(p)) return QuantizeGroupsOf<kDtype, true, E5M2Grid>(p, first, last);
  if (E3M2Grid::matches(p)) return QuantizeGroupsOf<kDtype, true, E3M2Grid>(p, first, last);
  if (E2M3Grid::matches(p)) return QuantizeGroupsOf<kDtype, true, E2M3Grid>(p, first, last);
  if constexpr (kDtype == DType::bf16)  // 4-bit batches are bf16 ones only
    if (E2M1Grid::matches(p)) return QuantizeGroupsOf<kDtype, true, E2M1Grid>(p, first, last);
  QuantizeGroupsOf<kDtype, true, NoGrid>(p, first, last);
}

void QuantizeMxGroups(const MxPlan& p, std::int64_t first, std::int64_t last) {
  switch (p.dtype) {
    case DType::f32: QuantizeGroupsOf<DType::f32>(p, first, last); break;
    case DType::bf16: QuantizeGroupsOf<DType::bf16>(p, first, last); break;
    default: QuantizeGroupsOf<DType::f16>(p, first, last); break;
  }
  hwy::FlushStream();  // the streamed lines are visible to other threads once this returns
}

}  // namespace qexact::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qexact::kernels {
HWY_EXPORT(QuantizeMxGroups);

void quantize_mx_groups(const MxPlan& p, std::int64_t first, std::int64_t last) {
  HWY_DYNAMIC_DISPATCH(QuantizeMxGroups)(p, first, last);
}
}  // namespace qexact::kernels
#endif
