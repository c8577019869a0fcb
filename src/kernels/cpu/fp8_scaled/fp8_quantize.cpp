// The fast fp8.scaled kernel's SIMD parts (google/highway, one body per x86 target, dispatched at
// run time): the abs-max of a run on the integer bits of |x| (exact and order-free: a max), and
// the element codes: the quotient (a real IEEE division or multiplication per lane), the clamp
// to +/-max on the bits (NaN passes, inf clamps), and RNE to E4M3/E5M2 by integer arithmetic
// on the fp32 bits (normal grid) or one fp32 addition of 2^23 (subnormal grid, computed only
// for vectors that have such a lane). Codes leave in 64-byte streaming stores where aligned.
// Domains other than the tensor run in one call per thread: each domain's amax from memory,
// then its codes from the cache.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/fp8_scaled/fp8_quantize.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

#include <hwy/cache_control.h>

#include "kernels/cpu/common/byte_code_writer-inl.h"
#include "kernels/cpu/common/float_lanes-inl.h"
#include "kernels/cpu/fp8_scaled/fp8_plan.hpp"
#include "kernels/cpu/common/scalar_load.hpp"  // load_scalar_f32

HWY_BEFORE_NAMESPACE();
namespace qexact::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using DI = hn::RebindToSigned<DF>;
using DU = hn::RebindToUnsigned<DF>;
using VF = hn::Vec<DF>;
using VI = hn::Vec<DI>;

constexpr std::int64_t kMaxLanes = static_cast<std::int64_t>(hn::MaxLanes(DF()));

// f(i, count, v) for each vector of the n elements of dtype dt at base; the last, partial one is
// loaded from a zero-padded copy (count < lanes there).
template <class F>
HWY_INLINE void ForEachVector(DType dt, std::int64_t elem_size, const std::uint8_t* base, std::int64_t n, F&& f) {
  const DF df;
  const auto lanes = static_cast<std::int64_t>(hn::Lanes(df));
  std::int64_t i = 0;
  for (; i + lanes <= n; i += lanes) f(i, lanes, LoadWidened(df, dt, base + i * elem_size));
  if (i < n) {
    HWY_ALIGN std::uint8_t tail[kMaxLanes * 4] = {};
    std::memcpy(tail, base + i * elem_size, static_cast<std::size_t>((n - i) * elem_size));
    f(i, n - i, LoadWidened(df, dt, tail));
  }
}

// The element format's grid, fixed at compile time (E4M3: 3 mantissa bits, bias 7; E5M2: 2, 15).
template <int kMbits>
struct Grid {
  static constexpr int kDrop = 23 - kMbits;  // fp32 significand bits below the element's
  static constexpr int kBias = kMbits == 3 ? 7 : 15;
  static constexpr int kEmin = 1 - kBias;    // smallest normal exponent
  static constexpr std::int32_t kHalf = 1 << (kDrop - 1);
  static constexpr std::int32_t kSubnormalBelow = (127 + kEmin) << 23;
};

// The clamped magnitude bits of quotients q: |q| on the bits, capped at max's (inf included; a
// NaN's bits too, which kNaN lanes replace).
HWY_INLINE VI ClampedMagnitude(VF q, VI max_bits) {
  const DI di;
  return hn::Min(hn::And(hn::BitCast(di, q), hn::Set(di, 0x7FFFFFFF)), max_bits);
}

// q's sign at the code's bit 7.
HWY_INLINE VI SignBit(VF q) {
  const DI di;
  return hn::And(hn::ShiftRight<24>(hn::BitCast(di, q)), hn::Set(di, 0x80));
}

// Magnitude codes (int32 lanes) on the normal grid of the clamped magnitude ab: add half an
// element ulp less one plus the kept lsb (ties to even), shift, and move the exponent from
// fp32's bias to the element's (subtracted before the shift: a multiple of the dropped bits).
// Lanes below the smallest normal get garbage.
template <int kMbits>
HWY_INLINE VI NormalMagnitude(VI ab) {
  using G = Grid<kMbits>;
  const DI di;
  const VI lsb = hn::And(hn::ShiftRight<G::kDrop>(ab), hn::Set(di, 1));
  return hn::ShiftRight<G::kDrop>(hn::Add(hn::Add(ab, hn::Set(di, G::kHalf - 1 - ((127 - G::kBias) << 23))), lsb));
}

// The subnormal grid's code of magnitude bits ab (exact below 2^e_min and at it, where it is the
// smallest normal's code): ab / 2^(e_min - mbits) is exact, and adding 2^23 rounds it (RNE) to
// an integer held in the low mantissa bits.
template <int kMbits>
HWY_INLINE VI SubnormalMagnitude(VI ab) {
  const DF df;
  const DI di;
  const VF units = hn::Mul(hn::BitCast(df, ab), hn::Set(df, std::ldexp(1.0f, kMbits - Grid<kMbits>::kEmin)));
  return hn::Sub(hn::BitCast(di, hn::Add(units, hn::Set(df, 8388608.0f))), hn::Set(di, 0x4B000000));
}

// Codes (int32 lanes) of quotients q: clamp |q| to max on the bits, round to the element (RNE);
// lanes below the smallest normal take the subnormal grid: |q| / 2^(e_min - mbits) (exact) is
// below 2^mbits, and adding 2^23 rounds it to an integer (RNE) held in the low mantissa bits.
// kNaN: a NaN lane gives 0x7F with its sign, as torch's cast.
template <int kMbits, bool kNaN>
HWY_INLINE VI Codes(VF q, VI max_bits) {
  using G = Grid<kMbits>;
  const DI di;
  const VI ab = ClampedMagnitude(q, max_bits);
  VI code = NormalMagnitude<kMbits>(ab);
  const auto sub = hn::Lt(ab, hn::Set(di, G::kSubnormalBelow));
  if (!hn::AllFalse(di, sub)) code = hn::IfThenElse(sub, SubnormalMagnitude<kMbits>(ab), code);
  if constexpr (kNaN) {
    const auto nan = hn::Gt(hn::And(hn::BitCast(di, q), hn::Set(di, 0x7FFFFFFF)), hn::Set(di, 0x7F800000));
    code = hn::IfThenElse(nan, hn::Set(di, 0x7F), code);
  }
  return hn::Or(code, SignBit(q));
}

// overflow=nan / inf: lanes of non-NaN quotients at or past the plan's overflow bound take its
// overflow code, with their sign, in place of the clamp's max.
HWY_INLINE VI Overflowed(const Fp8Plan& p, VF q, VI code) {
  if (!p.overflows) return code;
  const DI di;
  const VI mag = hn::And(hn::BitCast(di, q), hn::Set(di, 0x7FFFFFFF));
  const auto over = hn::And(hn::Gt(mag, hn::Set(di, p.overflow_from - 1)), hn::Lt(mag, hn::Set(di, 0x7F800001)));
  return hn::IfThenElse(over, hn::Or(hn::Set(di, p.overflow_code), SignBit(q)), code);
}

// The codes of quotients q with the contract's zero sign: signed_zero=false clears the sign of
// every zero code, underflow that of a quotient that is exactly zero.
HWY_INLINE VI ZeroSign(SignedZero rule, VF q, VI code) {
  const DI di;
  if (rule == SignedZero::drop) return hn::IfThenElse(hn::Eq(code, hn::Set(di, 0x80)), hn::Zero(di), code);
  if (rule == SignedZero::underflow) return hn::IfThenElse(hn::RebindMask(di, hn::Eq(q, hn::Zero(DF()))), hn::Zero(di), code);
  return code;
}

// The quotient of a plain domain (finite amax, finite non-zero operand: no NaN can arise) and
// its codes, one vector of input at a time. A division is the contract's IEEE division, one
// per vector. A multiplication by fp32(1 / s) with a near-midpoint test that fell back to the
// division gave the same bytes and was slower on the AMD EPYC (Zen 4) this was measured on: the
// divider works beside the vector ALUs, which the test's operations kept busy (fp8.ascend.token
// 0.36 -> 0.23 ns/element in cache at one thread, AVX-512; docs/decisions.md "Divisions are
// divisions").
template <int kMbits, bool kDivide, bool kBf16 = false, bool kUnderflowZero = false>
class PlainEncoder {
 public:
  PlainEncoder(const Fp8Plan& p, float operand)
      : max_bits_(hn::Set(DI(), static_cast<std::int32_t>(p.max_bits))), operand_(hn::Set(DF(), operand)) {}

  // kBf16: the quotient rounded to bf16 first (quotient_arith=input on bf16 input, the stacks'
  // rule); kUnderflowZero: signed_zero=underflow. RoundedEncoder does both, and the other
  // rules, with run-time choices; these two combinations are the stacks' presets.
  HWY_INLINE VI operator()(VF x) const {
    VF q = kDivide ? hn::Div(x, operand_) : hn::Mul(x, operand_);
    if constexpr (kBf16) q = RoundedToBf16(DF(), q);  // plain domains: no NaN
    const VI code = Codes<kMbits, false>(q, max_bits_);
    if constexpr (kUnderflowZero) return ZeroSign(SignedZero::underflow, q, code);
    return code;
  }

 private:
  VI max_bits_;
  VF operand_;
};

// The plain quotient of contracts that round it to the input's dtype first (quotient_arith=input),
// treat zero signs apart (signed_zero other than true) or do not saturate (overflow=nan / inf):
// one exact IEEE operation per lane, the rounding, then the codes.
template <int kMbits>
class RoundedEncoder {
 public:
  RoundedEncoder(const Fp8Plan& p, float operand)
      : plan_(p),
        max_bits_(hn::Set(DI(), static_cast<std::int32_t>(p.max_bits))),
        operand_(hn::Set(DF(), operand)),
        divide_(p.quotient == Fp8Quotient::divide),
        round_(p.quotient_round),
        signed_zero_(p.signed_zero) {}

  HWY_INLINE VI operator()(VF x) const {
    VF q = divide_ ? hn::Div(x, operand_) : hn::Mul(x, operand_);
    if (round_ == DType::bf16) q = RoundedToBf16(DF(), q);  // plain domains: no NaN
    else if (round_ == DType::f16) q = RoundedToF16(DF(), q);
    return ZeroSign(signed_zero_, q, Overflowed(plan_, q, Codes<kMbits, false>(q, max_bits_)));
  }

 private:
  const Fp8Plan& plan_;
  VI max_bits_;
  VF operand_;
  bool divide_;
  DType round_;
  SignedZero signed_zero_;
};

// Codes of n elements of dtype kDtype from `src` into `out`, four vectors per step.
template <DType kDtype, class Encoder>
// `ahead`: how far ahead of the vectors read the input is prefetched, in bytes.
HWY_INLINE void EncodeRun(const Encoder& encode, const std::uint8_t* src, std::int64_t n, std::uint8_t* out,
                          std::int64_t ahead) {
  const DF df;
  constexpr std::int64_t kN = CodeWriter::kN;
  constexpr std::int64_t kSize = kDtype == DType::f32 ? 4 : 2;
  std::int64_t i = 0;
  for (; i + 4 * kN <= n; i += 4 * kN) {
    const std::uint8_t* at = src + i * kSize;
    PrefetchBytes(at + ahead, 4 * kN * kSize);
    CodeWriter::Store4(encode(LoadWidened(df, kDtype, at)), encode(LoadWidened(df, kDtype, at + kN * kSize)),
                       encode(LoadWidened(df, kDtype, at + 2 * kN * kSize)),
                       encode(LoadWidened(df, kDtype, at + 3 * kN * kSize)), out + i);
  }
  for (; i + kN <= n; i += kN) CodeWriter::Store(encode(LoadWidened(df, kDtype, src + i * kSize)), out + i);
  if (i < n) {
    HWY_ALIGN std::uint8_t tail[kMaxLanes * 4] = {};
    std::memcpy(tail, src + i * kSize, static_cast<std::size_t>((n - i) * kSize));
    CodeWriter::StorePartial(encode(LoadWidened(df, kDtype, tail)), n - i, out + i);
  }
}

template <int kMbits, DType kDtype>
HWY_INLINE void QuantizePlainRun(const Fp8Plan& p, std::int64_t offset, std::int64_t n, float operand, std::int64_t ahead) {
  const std::uint8_t* src = p.data + offset * p.elem_size;
  std::uint8_t* out = p.payload + offset;
  const bool divide = p.quotient == Fp8Quotient::divide;
  const bool stacks_quotient = divide && p.quotient_round == DType::bf16 && !p.overflows;  // the stacks' rule
  if (stacks_quotient && p.signed_zero == SignedZero::keep) {
    EncodeRun<kDtype>(PlainEncoder<kMbits, true, true, false>(p, operand), src, n, out, ahead);
  } else if (stacks_quotient && p.signed_zero == SignedZero::underflow) {
    EncodeRun<kDtype>(PlainEncoder<kMbits, true, true, true>(p, operand), src, n, out, ahead);
  } else if (p.quotient_round != DType::f32 || p.signed_zero != SignedZero::keep || p.overflows) {
    EncodeRun<kDtype>(RoundedEncoder<kMbits>(p, operand), src, n, out, ahead);
  } else if (!divide) {
    EncodeRun<kDtype>(PlainEncoder<kMbits, false>(p, operand), src, n, out, ahead);
  } else {
    EncodeRun<kDtype>(PlainEncoder<kMbits, true>(p, operand), src, n, out, ahead);
  }
}

template <int kMbits>
HWY_INLINE void QuantizePlainRunOf(const Fp8Plan& p, std::int64_t offset, std::int64_t n, float operand, std::int64_t ahead) {
  switch (p.dtype) {
    case DType::f32: return QuantizePlainRun<kMbits, DType::f32>(p, offset, n, operand, ahead);
    case DType::bf16: return QuantizePlainRun<kMbits, DType::bf16>(p, offset, n, operand, ahead);
    default: return QuantizePlainRun<kMbits, DType::f16>(p, offset, n, operand, ahead);
  }
}

// ahead: see EncodeRun (the default: the next bytes of this run).
HWY_INLINE void PlainRun(const Fp8Plan& p, std::int64_t offset, std::int64_t n, float operand,
                         std::int64_t ahead = kPrefetchBytes) {
  if (p.mbits == 3) QuantizePlainRunOf<3>(p, offset, n, operand, ahead);
  else QuantizePlainRunOf<2>(p, offset, n, operand, ahead);
}

// Codes of n ready quotients (NaN included), in the element's grid.
template <int kMbits>
HWY_INLINE void EncodeValuesOf(const Fp8Plan& p, const float* q, std::int64_t n, std::uint8_t* out) {
  const VI max_bits = hn::Set(DI(), static_cast<std::int32_t>(p.max_bits));
  ForEachVector(DType::f32, 4, reinterpret_cast<const std::uint8_t*>(q), n, [&](std::int64_t i, std::int64_t count, VF v) {
    const VI code = ZeroSign(p.signed_zero, v, Overflowed(p, v, Codes<kMbits, true>(v, max_bits)));
    if (count == CodeWriter::kN) CodeWriter::Store(code, out + i);
    else CodeWriter::StorePartial(code, count, out + i);
  });
}

void EncodeValues(const Fp8Plan& p, const float* q, std::int64_t n, std::uint8_t* out) {
  if (p.mbits == 3) EncodeValuesOf<3>(p, q, n, out);
  else EncodeValuesOf<2>(p, q, n, out);
}

std::uint32_t AbsMaxBits(const Fp8Plan& p, std::int64_t offset, std::int64_t n) {
  return AbsMaxBitsOfRun(p.dtype, p.data + offset * p.elem_size, n);
}

// Codes of one run under a domain's scale: zeros, the plain vector path, or (a non-finite amax
// or operand) each quotient with x86's NaN rules, then its code.
HWY_INLINE void QuantizeRunUnder(const Fp8Plan& p, const Fp8Scale& s, std::int64_t offset, std::int64_t n) {
  if (n == 0) return;  // an empty tensor's payload may be null, which memset must not be handed
  if (s.zero) {
    std::memset(p.payload + offset, 0, static_cast<std::size_t>(n));
  } else if (s.plain) {
    PlainRun(p, offset, n, s.operand);
  } else {
    std::vector<float> q(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i)
      q[static_cast<std::size_t>(i)] = fp8_special_quotient(p, load_scalar_f32(p.dtype, p.data, offset + i), s.operand);
    EncodeValues(p, q.data(), n, p.payload + offset);
  }
}

void QuantizeRun(const Fp8Plan& p, const Fp8Scale& s, std::int64_t offset, std::int64_t n) {
  QuantizeRunUnder(p, s, offset, n);
  hwy::FlushStream();  // the streamed lines are visible to other threads once this returns
}

// Whether the scales of a contract can come out of vectors (BatchScales): fp32 arithmetic,
// rounded to the input's dtype or not (not fp64, whose rounding would need doubles, nor torch's
// reciprocal multiplier), no log2-based power of two, and no amax replaced by 1.
bool VectorScales(const Fp8Plan& p) {
  return (p.arith == ScaleArith::fp32 || p.arith == ScaleArith::reciprocal || p.arith == ScaleArith::fp32_satfinite ||
          p.arith == ScaleArith::input) &&
         p.pow2 != ScalePow2::down_log2f && p.zero_group != ZeroGroup::amax_one;
}

// The scales of kN domains with finite amaxes, lane j for domain j, as fp8_scale_of derives
// them one by one (the same IEEE operations in the same order: max with the floor, the
// division or the product by fp32(1 / max), the power of two on the bits, the inverses).
// Lanes that fp8_scale_of treats specially (zero domains, zero or non-finite operands) and
// subnormal scales under a power-of-two rule come back as false in `vector_ok`; their
// domains take fp8_scale_of.
struct BatchScale {
  VF stored, operand;
  hn::Mask<DI> vector_ok;
};

HWY_INLINE BatchScale BatchScales(const Fp8Plan& p, VI amax_bits) {
  const DF df;
  const DI di;
  const VF floored = hn::Max(hn::BitCast(df, amax_bits), hn::Set(df, static_cast<float>(p.amax_floor)));
  VF s;
  if (p.multiplier) {
    s = hn::Div(hn::Set(df, p.max), floored);
    if (p.arith == ScaleArith::fp32_satfinite)
      s = hn::IfThenElse(hn::RebindMask(df, hn::Eq(hn::BitCast(di, s), hn::Set(di, 0x7F800000))), hn::Set(df, FLT_MAX), s);
  } else if (p.arith == ScaleArith::reciprocal) {
    s = hn::Mul(floored, hn::Set(df, 1.0f / p.max));
  } else {
    s = hn::Div(floored, hn::Set(df, p.max));
  }
  // scale_arith=input: the fp32 quotient rounded once more to bf16 / f16 (finite amaxes only
  // come here, and an inf multiplier stays inf under both roundings). A scale that rounds to 0
  // is a zero operand: fp8_scale_of gives it zero_group's eps.
  if (p.arith == ScaleArith::input && p.dtype == DType::bf16) s = RoundedToBf16(df, s);
  if (p.arith == ScaleArith::input && p.dtype == DType::f16) s = RoundedToF16(df, s);
  if (p.zero_group == ZeroGroup::one) s = hn::IfThenElse(hn::Eq(floored, hn::Zero(df)), hn::Set(df, 1.0f), s);
  VI b = hn::BitCast(di, s);
  auto ok = hn::Not(hn::Eq(amax_bits, hn::Zero(di)));  // a zero amax: fp8_scale_of's rules
  if (p.pow2 != ScalePow2::none) {
    const VI exp = hn::And(b, hn::Set(di, 0x7F800000));
    ok = hn::And(ok, hn::Not(hn::And(hn::Eq(exp, hn::Zero(di)), hn::Ne(b, hn::Zero(di)))));  // subnormal s
    if (p.pow2 == ScalePow2::down) {
      b = hn::IfThenElse(hn::Lt(b, hn::Set(di, 0x7F800000)), exp, b);
    } else {
      const auto whole = hn::Eq(hn::And(b, hn::Set(di, 0x007FFFFF)), hn::Zero(di));
      b = hn::IfThenElse(whole, b, hn::Add(exp, hn::Set(di, 0x00800000)));
    }
    s = hn::BitCast(df, b);
  }
  BatchScale r;
  const VF inverse = hn::Div(hn::Set(df, 1.0f), s);
  r.stored = p.stored_inverse ? inverse : s;
  r.operand = p.quotient == Fp8Quotient::reciprocal ? inverse : s;
  const VI op = hn::And(hn::BitCast(di, r.operand), hn::Set(di, 0x7FFFFFFF));
  r.vector_ok = hn::And(ok, hn::And(hn::Ne(op, hn::Zero(di)), hn::Lt(op, hn::Set(di, 0x7F800000))));
  return r;
}

// Domains [first, last) of a granularity other than tensor, each its amax then its codes (its
// runs are re-read from the cache). Domains of one run each (row, group) go kN at a time: their
// amaxes, then their scales in one vector (BatchScales), then their codes. Returns false, at
// the first domain with a non-finite amax that the contract rejects.
bool QuantizeDomains(const Fp8Plan& plan, std::int64_t first, std::int64_t last) {
  // A local copy: the byte stores below may alias anything, which would make the compiler
  // reload every plan field after each of them.
  const Fp8Plan p = plan;
  const auto one_domain = [&](std::int64_t d, std::uint32_t amax) {
    if (amax >= 0x7F800000u && !p.propagate) return false;  // the call throws: the rest is never returned
    const Fp8Scale s = fp8_scale_of(p, amax);
    p.scale[d] = s.zero ? 0.0f : s.stored;
    fp8_for_each_segment(p, d, [&](std::int64_t off, std::int64_t n) { QuantizeRunUnder(p, s, off, n); });
    return true;
  };
  const auto amax_of = [&](std::int64_t d) {
    std::uint32_t amax = 0;
    fp8_for_each_segment(p, d, [&](std::int64_t off, std::int64_t n) {
      amax = std::max(amax, AbsMaxBitsOfRun(p.dtype, p.data + off * p.elem_size, n));
    });
    return amax;
  };
  constexpr std::int64_t kN = static_cast<std::int64_t>(hn::MaxLanes(DF()));
  const bool batched = (p.kind == Granularity::row || p.kind == Granularity::group) && VectorScales(p) && kN > 1;
  // A batch's domains are one contiguous span of the input (rows, or groups of consecutive rows);
  // its amaxes come from memory, its codes from the cache. Encoding prefetches the next batch's
  // span (as far ahead as one batch is long), so that memory works while the codes are computed.
  const auto offset_of = [&](std::int64_t domain) {
    std::int64_t at = 0;
    fp8_for_each_segment(p, domain, [&](std::int64_t off, std::int64_t) { at = off; });
    return at;
  };
  const std::int64_t ahead =
      batched && first + kN < last ? std::max(kPrefetchBytes, (offset_of(first + kN) - offset_of(first)) * p.elem_size) : kPrefetchBytes;
  bool ok = true;
  std::int64_t d = first;
  for (; batched && ok && d + kN <= last; d += kN) {
    HWY_ALIGN std::int32_t amax[kN];
    for (std::int64_t j = 0; j < kN; ++j) amax[j] = static_cast<std::int32_t>(amax_of(d + j));
    const VI amax_bits = hn::Load(DI(), amax);
    if (!hn::AllTrue(DI(), hn::Lt(amax_bits, hn::Set(DI(), 0x7F800000)))) {
      for (std::int64_t j = 0; j < kN && ok; ++j) ok = one_domain(d + j, static_cast<std::uint32_t>(amax[j]));
      continue;
    }
    const BatchScale bs = BatchScales(p, amax_bits);
    HWY_ALIGN float stored[kN], operand[kN];
    HWY_ALIGN std::int32_t vector_ok[kN];
    hn::Store(bs.stored, DF(), stored);
    hn::Store(bs.operand, DF(), operand);
    hn::Store(hn::VecFromMask(DI(), bs.vector_ok), DI(), vector_ok);
    for (std::int64_t j = 0; j < kN; ++j) {
      if (!vector_ok[j]) {
        one_domain(d + j, static_cast<std::uint32_t>(amax[j]));
        continue;
      }
      p.scale[d + j] = stored[j];
      fp8_for_each_segment(p, d + j, [&](std::int64_t off, std::int64_t n) { PlainRun(p, off, n, operand[j], ahead); });
    }
  }
  for (; ok && d < last; ++d) ok = one_domain(d, amax_of(d));
  hwy::FlushStream();
  return ok;
}

// Bands [first, last) of a tile or head_block granularity: a band is the rows that share a set
// of domains side by side (128 rows of every tile column; the tokens of one token block of one
// batch, each row holding all heads). Its domains' amaxes come from reading its rows in order
// (segment by segment, a max of bits: the order cannot change it), then its codes from the
// cache, row by row: the memory is read front to back instead of one strided tile at a time.
// Returns false, at the first band holding a domain with a non-finite amax that the contract
// rejects (its domains unwritten).
// Domains side by side per chunk of a band: 8 tiles of 128 bf16 columns are 256 KiB over 128
// rows, which the codes re-read from L2 (2, 4 and 16 measured no faster, 32 slower).
constexpr std::int64_t kBandSegments = 8;

bool QuantizeBands(const Fp8Plan& plan, std::int64_t first, std::int64_t last) {
  const Fp8Plan p = plan;  // a local copy: see QuantizeDomains
  const bool tile = p.kind == Granularity::tile;
  const std::int64_t segments = tile ? p.col_blocks : p.H;
  const std::int64_t row_len = tile ? p.cols : p.H * p.D;
  std::vector<std::uint32_t> amax(static_cast<std::size_t>(segments));
  std::vector<Fp8Scale> scales(static_cast<std::size_t>(segments));
  const auto width = [&](std::int64_t j) { return tile ? std::min(p.grain_cols, p.cols - j * p.grain_cols) : p.D; };
  const auto start = [&](std::int64_t j) { return tile ? j * p.grain_cols : j * p.D; };
  for (std::int64_t band = first; band < last; ++band) {
    // Rows [r0, r1) of the (rows x row_len) view, and domain j's index.
    std::int64_t r0, r1;
    if (tile) {
      r0 = band * p.grain_rows;
      r1 = std::min(p.rows, r0 + p.grain_rows);
    } else {
      const std::int64_t b = band / p.token_blocks, t = band % p.token_blocks;
      r0 = b * p.S + t * p.grain_rows;
      r1 = b * p.S + std::min(p.S, (t + 1) * p.grain_rows);
    }
    const auto domain = [&](std::int64_t j) {
      return tile ? band * p.col_blocks + j : ((band / p.token_blocks) * p.H + j) * p.token_blocks + band % p.token_blocks;
    };
    // Side by side domains a few at a time, so that what the codes re-read stays in L2.
    for (std::int64_t j0 = 0; j0 < segments; j0 += kBandSegments) {
      const std::int64_t j1 = std::min(segments, j0 + kBandSegments);
      std::fill(amax.begin() + j0, amax.begin() + j1, 0u);
      for (std::int64_t r = r0; r < r1; ++r)
        for (std::int64_t j = j0; j < j1; ++j) {
          const std::uint32_t m = AbsMaxBitsOfRun(p.dtype, p.data + (r * row_len + start(j)) * p.elem_size, width(j));
          amax[static_cast<std::size_t>(j)] = std::max(amax[static_cast<std::size_t>(j)], m);
        }
      for (std::int64_t j = j0; j < j1; ++j) {
        const std::uint32_t a = amax[static_cast<std::size_t>(j)];
        if (a >= 0x7F800000u && !p.propagate) return false;  // the call throws: the rest is never returned
        const Fp8Scale sc = fp8_scale_of(p, a);
        scales[static_cast<std::size_t>(j)] = sc;
        p.scale[domain(j)] = sc.zero ? 0.0f : sc.stored;
      }
      // While a row's codes are computed, the same row of the next chunk of this band is
      // fetched (of the next band past the last chunk), so that its amax reads the cache.
      const bool last_chunk = j1 == segments;
      const std::int64_t next_rows = last_chunk ? (tile ? p.grain_rows : r1 - r0) : 0;
      const std::int64_t next_j0 = last_chunk ? 0 : j1, next_j1 = std::min(segments, next_j0 + kBandSegments);
      const std::int64_t next_bytes = (start(next_j1 - 1) + width(next_j1 - 1) - start(next_j0)) * p.elem_size;
      const bool fetch_next = !last_chunk || band + 1 < last;
      for (std::int64_t r = r0; r < r1; ++r) {
        if (fetch_next && r + next_rows < p.numel / row_len)
          PrefetchBytes(p.data + ((r + next_rows) * row_len + start(next_j0)) * p.elem_size, next_bytes);
        for (std::int64_t j = j0; j < j1; ++j)
          QuantizeRunUnder(p, scales[static_cast<std::size_t>(j)], r * row_len + start(j), width(j));
      }
    }
  }
  hwy::FlushStream();
  return true;
}

}  // namespace qexact::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qexact::kernels {
HWY_EXPORT(AbsMaxBits);
HWY_EXPORT(QuantizeRun);
HWY_EXPORT(QuantizeDomains);
HWY_EXPORT(QuantizeBands);

std::uint32_t fp8_abs_max_bits(const Fp8Plan& p, std::int64_t offset, std::int64_t n) {
  return HWY_DYNAMIC_DISPATCH(AbsMaxBits)(p, offset, n);
}
void fp8_quantize_run(const Fp8Plan& p, const Fp8Scale& s, std::int64_t offset, std::int64_t n) {
  HWY_DYNAMIC_DISPATCH(QuantizeRun)(p, s, offset, n);
}
bool fp8_quantize_domains(const Fp8Plan& p, std::int64_t first, std::int64_t last) {
  return HWY_DYNAMIC_DISPATCH(QuantizeDomains)(p, first, last);
}
bool fp8_quantize_bands(const Fp8Plan& p, std::int64_t first, std::int64_t last) {
  return HWY_DYNAMIC_DISPATCH(QuantizeBands)(p, first, last);
}
}  // namespace qexact::kernels
#endif
