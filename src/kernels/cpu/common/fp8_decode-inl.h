// FP8 codes (E4M3 with its S.1111.111 NaN, E5M2 with IEEE inf and NaN) as fp32 values, in
// vectors, and runs of them under one scale: shared by the MX and fp8.scaled dequantizers (a Highway per-target header:
// foreach_target includes it once per target). Exact for every code; no rounding happens here.
#if defined(QEXACT_KERNELS_CPU_COMMON_FP8_DECODE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef QEXACT_KERNELS_CPU_COMMON_FP8_DECODE_INL_H_
#undef QEXACT_KERNELS_CPU_COMMON_FP8_DECODE_INL_H_
#else
#define QEXACT_KERNELS_CPU_COMMON_FP8_DECODE_INL_H_
#endif

#include <hwy/highway.h>

#include <bit>
#include <cstdint>

#include "kernels/cpu/common/float_lanes-inl.h"

HWY_BEFORE_NAMESPACE();
namespace qexact::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// FP8 codes in u32 lanes (E4M3 for kMbits 3, E5M2 for 2): the magnitude bits shifted under
// fp32's exponent field, read as a float and multiplied by 2^(127 - bias) (exact for every code:
// a subnormal code lands on the fp32 subnormal of the same significand, which the power of two
// scales into the normal range); then E4M3's NaN, or E5M2's exponent 31 (inf, NaN), and the
// sign on the bits. A NaN code gives a NaN whose sign and payload the caller canonicalizes.
template <int kMbits, class DF>
HWY_INLINE hn::Vec<DF> DecodeFp8(DF df, hn::Vec<hn::RebindToUnsigned<DF>> c) {
  const hn::RebindToUnsigned<DF> du;
  constexpr int kBias = kMbits == 3 ? 7 : 15;
  const auto mag = hn::And(c, hn::Set(du, 0x7Fu));
  const float unbias = std::bit_cast<float>(static_cast<std::uint32_t>(254 - kBias) << 23);
  auto v = hn::Mul(hn::BitCast(df, hn::ShiftLeft<23 - kMbits>(mag)), hn::Set(df, unbias));
  if constexpr (kMbits == 3) {
    v = hn::IfThenElse(hn::RebindMask(df, hn::Eq(mag, hn::Set(du, 0x7Fu))), hn::NaN(df), v);
  } else {
    const auto special = hn::Or(hn::Set(du, 0x7F800000u), hn::ShiftLeft<21>(hn::And(mag, hn::Set(du, 3u))));
    v = hn::IfThenElse(hn::RebindMask(df, hn::Gt(mag, hn::Set(du, 0x7Bu))), hn::BitCast(df, special), v);
  }
  return hn::Or(v, hn::BitCast(df, hn::ShiftLeft<24>(hn::And(c, hn::Set(du, 0x80u)))));
}

// The values of FP8 codes c (u32 lanes) under one scale s: code * s (kTimes) or code / s (an
// IEEE division), a NaN value the canonical quiet NaN.
template <int kMbits, bool kTimes, class DF>
HWY_INLINE hn::Vec<DF> ScaledFp8Codes(DF df, hn::Vec<hn::RebindToUnsigned<DF>> c, hn::Vec<DF> s) {
  const hn::RebindToUnsigned<DF> du;
  const auto q = DecodeFp8<kMbits>(df, c);
  const auto v = kTimes ? hn::Mul(q, s) : hn::Div(q, s);
  return hn::IfThenElse(hn::IsNaN(v), hn::BitCast(df, hn::Set(du, 0x7FC00000u)), v);
}

// The same for one vector of FP8 codes at `at`.
template <int kMbits, bool kTimes, class DF>
HWY_INLINE hn::Vec<DF> ScaledFp8(DF df, const std::uint8_t* at, hn::Vec<DF> s) {
  const hn::RebindToUnsigned<DF> du;
  return ScaledFp8Codes<kMbits, kTimes>(df, hn::PromoteTo(du, hn::LoadU(hn::Rebind<std::uint8_t, DF>(), at)), s);
}

// ScaledFp8 over codes [i, end), whole vectors only, in streaming stores where `out + i` is
// aligned (the caller flushes them). Returns where it stopped: the caller takes the last codes,
// fewer than a vector.
template <int kMbits, bool kTimes, class DF>
HWY_INLINE std::int64_t ScaleFp8Vectors(DF df, const std::uint8_t* codes, float s, std::int64_t i, std::int64_t end,
                                        float* out) {
  const std::int64_t N = static_cast<std::int64_t>(hn::Lanes(df));
  const auto vs = hn::Set(df, s);
  const bool stream = reinterpret_cast<std::uintptr_t>(out + i) % (N * sizeof(float)) == 0;
  for (; i + N <= end; i += N) {
    if (i % 64 == 0) PrefetchAhead(codes + i);  // a line of codes at a time
    const auto y = ScaledFp8<kMbits, kTimes>(df, codes + i, vs);
    if (stream) hn::Stream(y, df, out + i);
    else hn::StoreU(y, df, out + i);
  }
  return i;
}

}  // namespace qexact::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // QEXACT_KERNELS_CPU_COMMON_FP8_DECODE_INL_H_ toggle
