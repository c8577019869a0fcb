// Per-target SIMD steps of the int8 contracts on one run of input values (a span): the abs max
// (step 1) and the element quantization (steps 4-5), shared by the block, token and group
// kernels. Every value goes through the same IEEE fp32 operations as in the contract, in its
// order: a division is Div, a multiply is Mul, never fused. Included once per target.
#if defined(QEXACT_KERNELS_CPU_INT8_INT8_SPAN_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef QEXACT_KERNELS_CPU_INT8_INT8_SPAN_INL_H_
#undef QEXACT_KERNELS_CPU_INT8_INT8_SPAN_INL_H_
#else
#define QEXACT_KERNELS_CPU_INT8_INT8_SPAN_INL_H_
#endif

#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/common/byte_code_writer-inl.h"
#include "kernels/cpu/common/float_lanes-inl.h"
#include "kernels/cpu/int8/int8_plan.hpp"
#include "qexact/formats/bf16.hpp"
#include "qexact/formats/fp16.hpp"

HWY_BEFORE_NAMESPACE();
namespace qexact::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// n values of the plan's input dtype, `stride` elements apart, the first at `first`.
struct Span {
  const std::uint8_t* first;
  std::int64_t n;
  std::int64_t stride;
};

// fp32 bits of |x| at or above this are an infinity or a NaN.
constexpr std::uint32_t kNonFiniteBits = 0x7F800000u;

HWY_INLINE float ScalarF32(DType dt, const std::uint8_t* at) {
  if (dt == DType::f32) {
    float f;
    std::memcpy(&f, at, sizeof f);
    return f;
  }
  std::uint16_t h;
  std::memcpy(&h, at, sizeof h);
  return dt == DType::bf16 ? bf16_to_f32(h) : f16_to_f32(h);
}

HWY_INLINE std::uint32_t AbsBits(float x) { return std::bit_cast<std::uint32_t>(x) & 0x7FFFFFFFu; }

// Step 1 on the bits: for non-negative floats the integer order of the bits is the order of
// the values (NaN above +inf), so the max of |x|'s bits is the bits of max |x|, and NaN and
// infinities show as bits >= kNonFiniteBits. 0 for an empty span.
HWY_INLINE std::uint32_t AbsMaxBits(DType dt, const Span& s) {
  if (s.stride == 1) return AbsMaxBitsOfRun(dt, s.first, s.n);
  const std::int64_t step = s.stride * static_cast<std::int64_t>(dtype_size(dt));
  std::uint32_t m = 0;
  for (std::int64_t i = 0; i < s.n; ++i) m = std::max(m, AbsBits(ScalarF32(dt, s.first + i * step)));
  return m;
}

// Copies a span into `out` as fp32 and returns the bits of its max |x|: the single read of a
// token row into its working buffer.
HWY_INLINE std::uint32_t LoadF32AbsMaxBits(DType dt, const Span& s, float* out) {
  const hn::ScalableTag<float> df;
  const hn::ScalableTag<std::int32_t> di;
  const auto N = static_cast<std::int64_t>(hn::Lanes(df));
  std::int64_t i = 0;
  std::uint32_t m = 0;
  if (s.stride == 1) {
    const auto magnitude = hn::Set(di, 0x7FFFFFFF);
    auto mv = hn::Zero(di);
    const std::int64_t bytes = static_cast<std::int64_t>(dtype_size(dt));
    for (; i + N <= s.n; i += N) {
      PrefetchAhead(s.first + i * bytes);
      const auto v = LoadWidened(df, dt, s.first + i * bytes);
      hn::StoreU(v, df, out + i);
      mv = hn::Max(mv, hn::And(hn::BitCast(di, v), magnitude));
    }
    m = static_cast<std::uint32_t>(hn::GetLane(hn::MaxOfLanes(di, mv)));
  }
  const std::int64_t step = s.stride * static_cast<std::int64_t>(dtype_size(dt));
  for (; i < s.n; ++i) {
    out[i] = ScalarF32(dt, s.first + i * step);
    m = std::max(m, AbsBits(out[i]));
  }
  return m;
}

// Steps 4-5 on N lanes of one domain: the quotient v (x / operand or x * operand), rounded to
// an integer by the contract's rule, NaN to 0, saturated to [lowest, 127] (never wrapping).
//
// The saturation comes first here: every rounding rule is monotonic and leaves the integer
// bounds unchanged, so round-then-clamp and clamp-then-round agree on every v. The clamped,
// rounded value r then becomes its byte exactly: r + 1.5 * 2^23 lies in [2^23, 2^24), where
// the fp32 spacing is 1 and the low byte of the bits is r in two's complement. The codes come
// back as that byte (0..255) in int32 lanes, as the CodeWriter takes them.
//
// A division is the contract's IEEE division, one per vector. Multiplying by fp32(1 / scale)
// and dividing only the vectors with a lane next to a rounding step gave the same bytes and was
// slower on the AMD EPYC (Zen 4) it was measured on: the divider works beside the vector ALUs,
// which the step test kept busy (int8.block.ascend 0.58 -> 0.71 of the copy out of cache at
// two threads, AVX-512; docs/decisions.md "Divisions are divisions").
//
// NaN: the kernels reject any non-finite input before its domain is encoded, so x is finite.
// x / operand (operand != 0) is then never NaN; x * operand only where the operand is not
// finite (0 * inf): only then is the NaN select paid.
template <IntRounding kRounding, bool kDivide, DType kRound>
class Encoder {
 public:
  using DF = hn::ScalableTag<float>;
  using DI = hn::RebindToSigned<DF>;

  Encoder(float operand, float lowest)
      : operand_(hn::Set(DF(), operand)),
        lowest_(hn::Set(DF(), lowest)),
        top_(hn::Set(DF(), 127.0f)),
        magic_(hn::Set(DF(), 12582912.0f)),
        maybe_nan_(!kDivide && !std::isfinite(operand)) {}

  // The int8 codes of x's lanes, in the low byte of int32 lanes.
  HWY_INLINE hn::Vec<DI> operator()(hn::Vec<DF> x) const {
    if constexpr (kDivide) {
      // kRound: quotient_arith=input's dtype, to which x / operand is rounded before the
      // element's rounding (a double rounding). x / operand is never NaN here, as the rounding
      // helpers require.
      auto v = hn::Div(x, operand_);
      if constexpr (kRound == DType::bf16) v = RoundedToBf16(DF(), v);
      if constexpr (kRound == DType::f16) v = RoundedToF16(DF(), v);
      return LowByte(Biased(Clamp(v)));
    } else {
      auto v = hn::Mul(x, operand_);
      if (maybe_nan_) v = hn::IfThenZeroElse(hn::IsNaN(v), v);
      return LowByte(Biased(Clamp(v)));
    }
  }

 private:
  static HWY_INLINE hn::Vec<DI> LowByte(hn::Vec<DF> biased) {
    return hn::And(hn::BitCast(DI(), biased), hn::Set(DI(), 0xFF));
  }

  HWY_INLINE hn::Vec<DF> Clamp(hn::Vec<DF> v) const { return hn::Min(hn::Max(v, lowest_), top_); }

  // The clamped v rounded by the rule, plus 1.5 * 2^23.
  HWY_INLINE hn::Vec<DF> Biased(hn::Vec<DF> v) const {
    const DF df;
    if constexpr (kRounding == IntRounding::rne) {
      return hn::Add(v, magic_);  // the addition itself rounds to nearest even
    } else if constexpr (kRounding == IntRounding::half_away) {
      // Exact: v - trunc(v) and trunc(v) +/- 1 are representable for |v| <= 128.
      const auto t = hn::Trunc(v);
      const auto away = hn::Add(t, hn::CopySign(hn::Set(df, 1.0f), v));
      return hn::Add(hn::IfThenElse(hn::Ge(hn::Abs(hn::Sub(v, t)), hn::Set(df, 0.5f)), away, t), magic_);
    } else if constexpr (kRounding == IntRounding::trunc) {
      return hn::Add(hn::Trunc(v), magic_);
    } else {
      // The fp32 addition of +/-0.5 rounds, as the contract's Triton kernel does.
      return hn::Add(hn::Trunc(hn::Add(v, hn::CopySign(hn::Set(df, 0.5f), v))), magic_);
    }
  }

  hn::Vec<DF> operand_, lowest_, top_, magic_;
  bool maybe_nan_;
};

// Quantizes a span into its n payload bytes: contiguous spans four vectors at a time through
// the CodeWriter (one 64-byte streaming store where the payload is aligned: it is not read
// again). The kernels call hwy::FlushStream() before they return.
template <IntRounding kRounding, bool kDivide, DType kRound>
HWY_INLINE void QuantizeSpan(const Encoder<kRounding, kDivide, kRound>& encode, DType dt, const Span& s, std::int8_t* out) {
  const hn::ScalableTag<float> df;
  const auto N = static_cast<std::int64_t>(hn::Lanes(df));
  auto* bytes = reinterpret_cast<std::uint8_t*>(out);
  const std::uint8_t* first = s.first;
  const std::int64_t n = s.n;
  std::int64_t i = 0;
  if (s.stride == 1) {
    if (dt == DType::f32) {
      const auto* x = reinterpret_cast<const float*>(first);
      for (; i + 4 * N <= n; i += 4 * N) {
        PrefetchAheadBytes(x + i, 16 * N);
        CodeWriter::Store4(encode(hn::LoadU(df, x + i)), encode(hn::LoadU(df, x + i + N)),
                           encode(hn::LoadU(df, x + i + 2 * N)), encode(hn::LoadU(df, x + i + 3 * N)), bytes + i);
      }
      for (; i + N <= n; i += N) CodeWriter::Store(encode(hn::LoadU(df, x + i)), bytes + i);
    } else {
      for (; i + 4 * N <= n; i += 4 * N) {
        const std::uint8_t* at = first + 2 * i;
        PrefetchAheadBytes(at, 8 * N);
        CodeWriter::Store4(encode(LoadWidened(df, dt, at)), encode(LoadWidened(df, dt, at + 2 * N)),
                           encode(LoadWidened(df, dt, at + 4 * N)), encode(LoadWidened(df, dt, at + 6 * N)),
                           bytes + i);
      }
      for (; i + N <= n; i += N) CodeWriter::Store(encode(LoadWidened(df, dt, first + 2 * i)), bytes + i);
    }
    if (i == n) return;
  }
  // The rest (a tail, or every value of a strided span) through an fp32 staging vector: the
  // same lane arithmetic as above.
  const std::int64_t step = s.stride * static_cast<std::int64_t>(dtype_size(dt));
  HWY_ALIGN float staged[hn::MaxLanes(df)];
  while (i < n) {
    const std::int64_t k = std::min(N, n - i);
    for (std::int64_t j = 0; j < N; ++j) staged[j] = j < k ? ScalarF32(dt, first + (i + j) * step) : 0.0f;
    const auto codes = encode(hn::Load(df, staged));
    if (k == N)
      CodeWriter::Store(codes, bytes + i);
    else
      CodeWriter::StorePartial(codes, k, bytes + i);
    i += k;
  }
}

// Steps 4-5 for a span of one domain whose quotient is q.
template <IntRounding kRounding, bool kDivide, DType kRound>
HWY_INLINE void QuantizeSpan(const Int8Plan& p, const Int8Quotient& q, DType dt, const Span& s, std::int8_t* out) {
  if (q.sign_payload) {  // x / 0: +-inf saturates, 0 / 0 (either zero) is NaN, code 0
    const std::int64_t step = s.stride * static_cast<std::int64_t>(dtype_size(dt));
    const auto low = static_cast<std::int8_t>(p.lowest);
    for (std::int64_t i = 0; i < s.n; ++i) {
      const float x = ScalarF32(dt, s.first + i * step);
      out[i] = x > 0.0f ? std::int8_t{127} : x < 0.0f ? low : std::int8_t{0};
    }
    return;
  }
  if (q.zero_payload) {
    if (s.n > 0) std::memset(out, 0, static_cast<std::size_t>(s.n));
    return;
  }
  QuantizeSpan(Encoder<kRounding, kDivide, kRound>(q.operand, p.lowest), dt, s, out);
}

// Calls body.template operator()<rounding, divide, round>() with the plan's element arithmetic
// as template arguments, so that each kernel's loop is compiled for it: the integer rounding,
// division or multiplication, and (divisions only: quotient_arith=input) the dtype the quotient
// is rounded to first. Chosen at run time inside the encoder, that dtype's tests stayed in the
// loops: int8.ct.token quantize took 0.24 instead of 0.20 ns per element in cache (one thread).
template <IntRounding kRounding, class Body>
HWY_INLINE void WithQuotientRounding(const Int8Plan& p, Body&& body) {
  if (p.quotient != Quotient::divide) return body.template operator()<kRounding, false, DType::f32>();
  switch (p.quotient_round) {
    case DType::bf16: return body.template operator()<kRounding, true, DType::bf16>();
    case DType::f16: return body.template operator()<kRounding, true, DType::f16>();
    default: return body.template operator()<kRounding, true, DType::f32>();
  }
}

template <class Body>
HWY_INLINE void WithElementArithmetic(const Int8Plan& p, Body&& body) {
  switch (p.rounding) {
    case IntRounding::rne: return WithQuotientRounding<IntRounding::rne>(p, body);
    case IntRounding::half_away: return WithQuotientRounding<IntRounding::half_away>(p, body);
    case IntRounding::half_away_fp32: return WithQuotientRounding<IntRounding::half_away_fp32>(p, body);
    case IntRounding::trunc: return WithQuotientRounding<IntRounding::trunc>(p, body);
  }
}

}  // namespace qexact::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // QEXACT_KERNELS_CPU_INT8_INT8_SPAN_INL_H_
