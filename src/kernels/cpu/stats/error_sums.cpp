// error_sums.hpp's SIMD bodies (google/highway, one per x86 target, dispatched at run time).
// The 32 partials of each sum live in 32 / Lanes(double) vectors; x and d are formed as full
// f32 vectors (the bf16 / f16 widening and the code decoding at f32 width) and each half widened
// to double by one instruction.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/stats/error_sums.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cstddef>
#include <limits>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "kernels/cpu/common/float_lanes-inl.h"
#include "kernels/cpu/common/fp4_codes-inl.h"
#include "kernels/cpu/common/fp8_decode-inl.h"
#include "kernels/cpu/common/simd_target.hpp"
#include "kernels/cpu/stats/error_sums.hpp"
#include "qexact/formats/bf16.hpp"
#include "qexact/formats/fp16.hpp"

HWY_BEFORE_NAMESPACE();
namespace qexact::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr std::size_t kPartials = 32, kBlock = 8;

using DF = hn::ScalableTag<float>;
using D64 = hn::ScalableTag<double>;
constexpr std::size_t kLanes64 = hn::MaxLanes(D64());
constexpr std::size_t kLanesF = hn::MaxLanes(DF());
static_assert(kLanesF == kLanes64 || kLanesF == 2 * kLanes64, "an f32 vector widens to one or two double vectors");
static_assert(kPartials % kLanesF == 0 && kBlock % kLanes64 == 0);
constexpr std::size_t kAcc = kPartials / kLanes64;

// f(integral_constant<I>) for I in [0, kCount): every index a constant, so that the partials
// below, an array, are indexed only by constants and stay in registers (an array indexed by a
// loop variable is kept in memory, and every add then waits on a store and a load).
template <std::size_t kCount, class F>
HWY_INLINE void Unrolled(const F& f) {
  [&]<std::size_t... I>(std::index_sequence<I...>) { (f(std::integral_constant<std::size_t, I>()), ...); }
  (std::make_index_sequence<kCount>());
}

// Partial 8c + l of each sum is lane l % Lanes of vector (8c + l) / Lanes.
struct Partials {
  hn::Vec<D64> s[kAcc], n[kAcc];
  Partials() {
    Unrolled<kAcc>([&](auto a) { s[a] = n[a] = hn::Zero(D64()); });
  }
};

HWY_INLINE void AddTerms(hn::Vec<D64> x, hn::Vec<D64> d, hn::Vec<D64>& s, hn::Vec<D64>& n) {
  const auto e = hn::Sub(x, d);
  s = hn::Add(s, hn::Mul(x, x));
  n = hn::Add(n, hn::Mul(e, e));
}

// Lanes(DF) elements from partial kA * Lanes(D64) on.
template <std::size_t kA>
HWY_INLINE void AddF32(hn::Vec<DF> x, hn::Vec<DF> d, Partials& p) {
  const D64 d64;
#if HWY_TARGET == HWY_SCALAR  // one lane of each
  AddTerms(hn::PromoteTo(d64, x), hn::PromoteTo(d64, d), p.s[kA], p.n[kA]);
#else
  static_assert(kLanesF == 2 * kLanes64);
  const hn::Half<DF> dh;
  AddTerms(hn::PromoteTo(d64, hn::LowerHalf(dh, x)), hn::PromoteTo(d64, hn::LowerHalf(dh, d)), p.s[kA], p.n[kA]);
  AddTerms(hn::PromoteTo(d64, hn::UpperHalf(dh, x)), hn::PromoteTo(d64, hn::UpperHalf(dh, d)), p.s[kA + 1],
           p.n[kA + 1]);
#endif
}

template <DType kDt>
HWY_INLINE const std::uint8_t* At(const void* x, std::size_t i) {
  return static_cast<const std::uint8_t*>(x) + i * (kDt == DType::f32 ? 4 : 2);
}

template <DType kDt>
HWY_INLINE double ScalarValue(const void* x, std::size_t i) {
  if constexpr (kDt == DType::f32) return static_cast<double>(static_cast<const float*>(x)[i]);
  const std::uint16_t h = static_cast<const std::uint16_t*>(x)[i];
  return static_cast<double>(kDt == DType::bf16 ? bf16_to_f32(h) : f16_to_f32(h));
}

// The partials added pairwise, after `tail` has added its terms to partial 0.
template <class Tail>
HWY_INLINE ErrorSums Reduce(const Partials& p, const Tail& tail) {
  const D64 d64;
  double s[kPartials], n[kPartials];
  Unrolled<kAcc>([&](auto a) {
    hn::StoreU(p.s[a], d64, s + a * kLanes64);
    hn::StoreU(p.n[a], d64, n + a * kLanes64);
  });
  tail(s[0], n[0]);
  for (std::size_t w = kPartials / 2; w > 0; w /= 2)
    for (std::size_t l = 0; l < w; ++l) {
      s[l] += s[l + w];
      n[l] += n[l + w];
    }
  // Which NaN an add returns (its first operand's) depends on the order the compiler picks
  // for a commutative add, so a NaN sum is given as the one canonical quiet NaN.
  const auto canonical = [](double v) { return v != v ? std::numeric_limits<double>::quiet_NaN() : v; };
  ErrorSums r;
  r.signal = canonical(s[0]);
  r.noise = canonical(n[0]);
  return r;
}

template <DType kDt>
ErrorSums ValueSums(const void* x, std::size_t n, const float* d) {
  const DF df;
  Partials p;
  std::size_t i = 0;
  for (; i + kPartials <= n; i += kPartials) {
    PrefetchAhead(At<kDt>(x, i));
    Unrolled<kPartials / kLanesF>([&](auto v) {
      const std::size_t at = i + v * kLanesF;
      AddF32<v * kLanesF / kLanes64>(LoadWidened(df, kDt, At<kDt>(x, at)), hn::LoadU(df, d + at), p);
    });
  }
  // Up to three whole blocks of 8 after the last 32, at partials 0-7, 8-15, 16-23.
  const hn::Rebind<float, D64> dh;
  const D64 d64;
  Unrolled<3>([&](auto b) {
    if (i + kBlock > n) return;
    Unrolled<kBlock / kLanes64>([&](auto v) {
      const std::size_t at = i + v * kLanes64;
      constexpr std::size_t a = b * kBlock / kLanes64 + v;
      AddTerms(hn::PromoteTo(d64, LoadWidened(dh, kDt, At<kDt>(x, at))), hn::PromoteTo(d64, hn::LoadU(dh, d + at)),
               p.s[a], p.n[a]);
    });
    i += kBlock;
  });
  return Reduce(p, [&](double& s0, double& n0) {
    for (; i < n; ++i) {
      const double xi = ScalarValue<kDt>(x, i), e = xi - static_cast<double>(d[i]);
      s0 += xi * xi;
      n0 += e * e;
    }
  });
}

ErrorSums ValueErrorSums(DType dt, const void* x, std::int64_t n, const float* d) {
  const auto count = static_cast<std::size_t>(n);
  switch (dt) {
    case DType::f32: return ValueSums<DType::f32>(x, count, d);
    case DType::bf16: return ValueSums<DType::bf16>(x, count, d);
    case DType::f16: return ValueSums<DType::f16>(x, count, d);
    default: break;
  }
  throw std::logic_error("error sums take f32, bf16 or f16 values");
}

// The E2M1 codes of elements [at, at + Lanes(DF)) of a packed payload, in u32 lanes.
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> E2m1Codes(const std::uint8_t* codes, std::size_t at) {
#if HWY_TARGET == HWY_SCALAR
  return hn::Set(hn::RebindToUnsigned<DF>(), (codes[at / 2] >> (4 * (at & 1))) & 0xFu);
#else
  return Fp4AdjacentCodes(DF(), codes, static_cast<std::int64_t>(at));
#endif
}

// One vector's codes (u32 lanes; int8 sign-extended) from element `at` on.
template <ElementCode kCode>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> CodesAt(const std::uint8_t* codes, std::size_t at) {
  const hn::RebindToUnsigned<DF> du;
  if constexpr (kCode == ElementCode::int8) {
    const hn::RebindToSigned<DF> di;
    return hn::BitCast(du, hn::PromoteTo(di, hn::LoadU(hn::Rebind<std::int8_t, DF>(),
                                                       reinterpret_cast<const std::int8_t*>(codes + at))));
  } else if constexpr (kCode == ElementCode::e2m1) {
    return E2m1Codes(codes, at);
  } else {
    return hn::PromoteTo(du, hn::LoadU(hn::Rebind<std::uint8_t, DF>(), codes + at));
  }
}

// The codes' values times (or, kDivide, divided by) the group's scale s, as the family's
// dequantize gives them: one IEEE fp32 operation, an FP8 NaN the canonical quiet NaN.
template <ElementCode kCode, bool kDivide>
HWY_INLINE hn::Vec<DF> Dequantized(hn::Vec<hn::RebindToUnsigned<DF>> c, hn::Vec<DF> s) {
  const DF df;
  if constexpr (kCode == ElementCode::e4m3 || kCode == ElementCode::e5m2)
    return ScaledFp8Codes<kCode == ElementCode::e4m3 ? 3 : 2, !kDivide>(df, c, s);
  const auto value = kCode == ElementCode::int8 ? hn::ConvertTo(df, hn::BitCast(hn::RebindToSigned<DF>(), c))
                                                : DecodeE2m1(df, c);
  return kDivide ? hn::Div(value, s) : hn::Mul(value, s);
}

// The largest magnitude code of a floating-point element format, and its sign bit.
template <ElementCode kCode>
constexpr std::uint32_t kLargestCode = kCode == ElementCode::e4m3 ? 0x7E : kCode == ElementCode::e5m2 ? 0x7B : 0x7;
template <ElementCode kCode>
constexpr std::uint32_t kSignBit = kCode == ElementCode::e2m1 ? 0x8 : 0x80;

// The lanes of one vector that are clamped (see ClampBounds); first a test that most vectors
// fail (no x beyond either bound), then the codes (floating-point formats) or the values (int8).
template <ElementCode kCode>
HWY_INLINE std::size_t ClampedLanes(hn::Vec<DF> x, hn::Vec<hn::RebindToUnsigned<DF>> c, hn::Vec<DF> d,
                                    const ClampBounds& b) {
  const DF df;
  const auto beyond_hi = hn::Gt(x, hn::Set(df, b.above)), beyond_lo = hn::Lt(x, hn::Set(df, b.below));
  if (hn::AllFalse(df, hn::Or(beyond_hi, beyond_lo))) return 0;
  if constexpr (kCode == ElementCode::int8) {
    return hn::CountTrue(df, hn::Or(hn::And(beyond_hi, hn::Eq(d, hn::Set(df, b.hi))),
                                    hn::And(beyond_lo, hn::Eq(d, hn::Set(df, b.lo)))));
  } else {
    const hn::RebindToUnsigned<DF> du;
    constexpr std::uint32_t kLargest = kLargestCode<kCode>, kSign = kSignBit<kCode>;
    const auto largest = hn::Eq(hn::And(c, hn::Set(du, kSign - 1)), hn::Set(du, kLargest));
    const auto negative = hn::Ne(hn::And(c, hn::Set(du, kSign)), hn::Zero(du));
    const auto hi_side = hn::AndNot(hn::RebindMask(df, negative), beyond_hi);
    const auto lo_side = hn::And(hn::RebindMask(df, negative), beyond_lo);
    return hn::CountTrue(df, hn::And(hn::RebindMask(df, largest), hn::Or(hi_side, lo_side)));
  }
}

template <DType kDt, ElementCode kCode, bool kDivide>
ErrorSums CodedSums(const void* x, const CodedRows& r) {
  const DF df;
  const auto* codes = static_cast<const std::uint8_t*>(r.codes);
  const auto k = static_cast<std::size_t>(r.k), group = static_cast<std::size_t>(r.group);
  const auto row_group = static_cast<std::size_t>(r.row_group);
  Partials p;
  std::int64_t clamped = 0;
  for (std::size_t row = 0; row < static_cast<std::size_t>(r.rows); ++row) {
    const std::size_t first_group = row / row_group * static_cast<std::size_t>(r.stride);
    for (std::size_t j0 = 0, g = first_group; j0 < k; j0 += group, ++g) {
      const float scale = r.scales[g];
      const bool zero = kDivide && r.zero_scale_gives_zero && scale == 0.0f;
      const auto s = hn::Set(df, scale);
      const ClampBounds b = r.bounds[g];
      for (std::size_t i = row * k + j0, end = i + group; i < end; i += kPartials) {
        PrefetchAhead(At<kDt>(x, i));
        Unrolled<kPartials / kLanesF>([&](auto v) {
          const std::size_t at = i + v * kLanesF;
          const auto xv = LoadWidened(df, kDt, At<kDt>(x, at));
          const auto cv = CodesAt<kCode>(codes, at);
          const auto dv = zero ? hn::Zero(df) : Dequantized<kCode, kDivide>(cv, s);
          clamped += static_cast<std::int64_t>(ClampedLanes<kCode>(xv, cv, dv, b));
          AddF32<v * kLanesF / kLanes64>(xv, dv, p);
        });
      }
    }
  }
  ErrorSums sums = Reduce(p, [](double&, double&) {});
  sums.clamped = clamped;
  return sums;
}

template <DType kDt, ElementCode kCode>
ErrorSums CodedSumsOp(const void* x, const CodedRows& r) {
  if constexpr (kCode == ElementCode::int8) return CodedSums<kDt, kCode, false>(x, r);  // int8 multiplies
  return r.divide ? CodedSums<kDt, kCode, true>(x, r) : CodedSums<kDt, kCode, false>(x, r);
}

template <DType kDt>
ErrorSums CodedSumsOf(const void* x, const CodedRows& r) {
  switch (r.code) {
    case ElementCode::e4m3: return CodedSumsOp<kDt, ElementCode::e4m3>(x, r);
    case ElementCode::e5m2: return CodedSumsOp<kDt, ElementCode::e5m2>(x, r);
    case ElementCode::e2m1: return CodedSumsOp<kDt, ElementCode::e2m1>(x, r);
    case ElementCode::int8: return CodedSumsOp<kDt, ElementCode::int8>(x, r);
  }
  throw std::logic_error("unknown byte code");
}

ErrorSums CodedErrorSums(DType dt, const void* x, const CodedRows& r) {
  switch (dt) {
    case DType::f32: return CodedSumsOf<DType::f32>(x, r);
    case DType::bf16: return CodedSumsOf<DType::bf16>(x, r);
    case DType::f16: return CodedSumsOf<DType::f16>(x, r);
    default: break;
  }
  throw std::logic_error("error sums take f32, bf16 or f16 values");
}

}  // namespace qexact::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qexact::kernels {
HWY_EXPORT(ValueErrorSums);
HWY_EXPORT(CodedErrorSums);

ErrorSums value_error_sums(DType dt, const void* x, std::int64_t n, const float* d) {
  apply_forced_target();
  return HWY_DYNAMIC_DISPATCH(ValueErrorSums)(dt, x, n, d);
}

ErrorSums coded_error_sums(DType dt, const void* x, const CodedRows& rows) {
  if (rows.k % 32 != 0 || rows.group % 32 != 0 || rows.group <= 0 || rows.k % rows.group != 0)
    throw std::logic_error("coded error sums take rows and groups of a multiple of 32 elements");
  apply_forced_target();
  return HWY_DYNAMIC_DISPATCH(CodedErrorSums)(dt, x, rows);
}
}  // namespace qexact::kernels
#endif
