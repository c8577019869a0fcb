// Fast pooled mean (contracts §6), the two passes over a work item's rows, one SIMD body per
// x86 target: lanes are features (columns), rows are walked in order. Pass 1 finds each
// column's exponent range; pass 2 sums the elements as integers in units of the column's
// smallest ulp (significand << (exponent - smallest), in 64-bit lanes), which is exact when
// the range fits (the caller checks, and sums the other columns another way).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/pool/pool_mean.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cstring>

#include "kernels/cpu/common/float_lanes-inl.h"
#include "kernels/cpu/pool/pool_plan.hpp"

HWY_BEFORE_NAMESPACE();
namespace qexact::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using PoolDF = hn::CappedTag<float, 16>;
// Pass 2 adds in 64-bit lanes: fp32 lanes as many as those.
using PoolD64 = hn::CappedTag<std::uint64_t, 8>;
using PoolDF64 = hn::Rebind<float, PoolD64>;

// fp32 bits of features [f, f + N) of the row at `row`; lanes at or past f_end are 0.
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> PoolLoadBits(DF df, const PoolPlan& p, const std::uint8_t* row,
                                                          std::int64_t f, std::int64_t f_end,
                                                          std::uint8_t* HWY_RESTRICT pad) {
  const hn::RebindToUnsigned<DF> du;
  const auto N = static_cast<std::int64_t>(hn::Lanes(df));
  const auto esize = static_cast<std::int64_t>(p.esize);
  if (p.features_regular && p.feature_stride == 1 && f + N <= f_end)
    return hn::BitCast(du, LoadWidened(df, p.dtype, row + f * esize));
  std::memset(pad, 0, static_cast<std::size_t>(N * esize));
  for (std::int64_t c = 0; c < N && f + c < f_end; ++c)
    std::memcpy(pad + c * esize, row + p.feature_offset(f + c) * esize, p.esize);
  return hn::BitCast(du, LoadWidened(df, p.dtype, pad));
}

void PoolColumnExponents(const PoolPlan& p, std::int64_t b, std::int64_t s0, std::int64_t s1, std::int64_t f0,
                         std::int64_t width, std::int32_t* emax, std::int32_t* emin) {
  const hn::RebindToSigned<PoolDF> di;
  const auto N = static_cast<std::int64_t>(hn::Lanes(di));
  HWY_ALIGN std::uint8_t pad[16 * 4];
  for (std::int64_t c = 0; c < width; c += N) {
    hn::StoreU(hn::Zero(di), di, emax + c);
    hn::StoreU(hn::Set(di, 255), di, emin + c);
  }
  for (std::int64_t s = s0; s < s1; ++s) {
    const std::uint8_t* row = p.row(b, s);
    for (std::int64_t c = 0; c < width; c += N) {
      const auto abs =
          hn::And(hn::BitCast(di, PoolLoadBits(PoolDF(), p, row, f0 + c, f0 + width, pad)), hn::Set(di, 0x7FFFFFFF));
      const auto exponent = hn::Max(hn::ShiftRight<23>(abs), hn::Set(di, 1));  // subnormals: 1
      const auto non_zero = hn::Gt(abs, hn::Zero(di));
      hn::StoreU(hn::Max(hn::LoadU(di, emax + c), hn::IfThenElseZero(non_zero, exponent)), di, emax + c);
      hn::StoreU(hn::Min(hn::LoadU(di, emin + c), hn::IfThenElse(non_zero, exponent, hn::Set(di, 255))), di, emin + c);
    }
  }
}

void PoolColumnSums(const PoolPlan& p, std::int64_t b, std::int64_t s0, std::int64_t s1, std::int64_t f0,
                    std::int64_t width, const std::int32_t* emin, std::uint64_t* sums) {
  const PoolD64 d64;
  const PoolDF64 df;
  const hn::RebindToSigned<PoolDF64> di;
  const hn::RebindToUnsigned<PoolDF64> du;
  const auto N = static_cast<std::int64_t>(hn::Lanes(d64));
  HWY_ALIGN std::uint8_t pad[16 * 4];
  for (std::int64_t c = 0; c < width; c += N) hn::StoreU(hn::Zero(d64), d64, sums + c);
  for (std::int64_t s = s0; s < s1; ++s) {
    const std::uint8_t* row = p.row(b, s);
    for (std::int64_t c = 0; c < width; c += N) {
      const auto bits = PoolLoadBits(df, p, row, f0 + c, f0 + width, pad);
      const auto field = hn::And(hn::ShiftRight<23>(bits), hn::Set(du, 0xFFu));
      const auto fraction = hn::And(bits, hn::Set(du, 0x7FFFFFu));
      const auto significand =
          hn::IfThenElse(hn::Eq(field, hn::Zero(du)), fraction, hn::Or(fraction, hn::Set(du, 0x800000u)));
      // exponent - emin, kept in [0, 63] for lanes whose sum is not used (zeros, wide ranges).
      const auto exponent = hn::Max(hn::BitCast(di, field), hn::Set(di, 1));
      const auto shift = hn::Min(hn::Max(hn::Sub(exponent, hn::LoadU(di, emin + c)), hn::Zero(di)), hn::Set(di, 63));
      const auto magnitude = hn::Shl(hn::PromoteTo(d64, significand), hn::PromoteTo(d64, hn::BitCast(du, shift)));
      const auto negative = hn::Eq(hn::PromoteTo(d64, hn::ShiftRight<31>(bits)), hn::Set(d64, 1u));
      const auto term = hn::IfThenElse(negative, hn::Sub(hn::Zero(d64), magnitude), magnitude);
      hn::StoreU(hn::Add(hn::LoadU(d64, sums + c), term), d64, sums + c);
    }
  }
}

}  // namespace qexact::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qexact::kernels {
HWY_EXPORT(PoolColumnExponents);
HWY_EXPORT(PoolColumnSums);

void pool_column_exponents(const PoolPlan& p, std::int64_t b, std::int64_t s0, std::int64_t s1, std::int64_t f0,
                           std::int64_t width, std::int32_t* emax, std::int32_t* emin) {
  HWY_DYNAMIC_DISPATCH(PoolColumnExponents)(p, b, s0, s1, f0, width, emax, emin);
}
void pool_column_sums(const PoolPlan& p, std::int64_t b, std::int64_t s0, std::int64_t s1, std::int64_t f0,
                      std::int64_t width, const std::int32_t* emin, std::uint64_t* sums) {
  HWY_DYNAMIC_DISPATCH(PoolColumnSums)(p, b, s0, s1, f0, width, emin, sums);
}
}  // namespace qexact::kernels
#endif
