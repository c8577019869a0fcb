// Exact conversions between fp32 lanes and the f32 / bf16 / f16 elements of a tensor, for the
// fast kernels (a Highway per-target header: foreach_target includes it once per target).
// Written on the integer bits because Highway's own f16 conversions are not exact on every
// target. Loads widen exactly (every bf16 and f16 value is an fp32 value); stores round to
// nearest even with the narrow format's subnormals, overflow to +/-inf and NaN kept quiet with
// its sign, as qexact/formats/{bf16,fp16}.hpp define them.
#if defined(QEXACT_KERNELS_CPU_COMMON_FLOAT_LANES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef QEXACT_KERNELS_CPU_COMMON_FLOAT_LANES_INL_H_
#undef QEXACT_KERNELS_CPU_COMMON_FLOAT_LANES_INL_H_
#else
#define QEXACT_KERNELS_CPU_COMMON_FLOAT_LANES_INL_H_
#endif

#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cstdint>

#include "qexact/tensor.hpp"

HWY_BEFORE_NAMESPACE();
namespace qexact::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Contiguous reads prefetch this far ahead: on the machine measured (a 2-core VM) the hardware
// prefetchers alone left the kernels about 20% slower out of cache (perf put half of the MX
// quantizer's samples on the load of a group's second vector); 4, 8 and 16 KiB did about
// equally well. A prefetch never faults, so one past the end of the input is harmless.
constexpr std::int64_t kPrefetchBytes = 8192;

HWY_INLINE void PrefetchAhead(const void* at) { hwy::Prefetch(static_cast<const std::uint8_t*>(at) + kPrefetchBytes); }

// The same for `bytes` contiguous bytes from `at`: one prefetch per 64-byte cache line.
HWY_INLINE void PrefetchAheadBytes(const void* at, std::int64_t bytes) {
  for (std::int64_t off = 0; off < bytes; off += 64) PrefetchAhead(static_cast<const std::uint8_t*>(at) + off);
}

// The `bytes` contiguous bytes from `at` themselves (a kernel that knows what it reads next).
HWY_INLINE void PrefetchBytes(const void* at, std::int64_t bytes) {
  for (std::int64_t off = 0; off < bytes; off += 64) hwy::Prefetch(static_cast<const std::uint8_t*>(at) + off);
}

// fp32 value of IEEE half bits held in 32-bit lanes: subnormals, inf and NaN included.
template <class DF>
HWY_INLINE hn::Vec<DF> WidenHalfBits(DF df, hn::Vec<hn::RebindToUnsigned<DF>> h) {
  const hn::RebindToUnsigned<DF> du;
  const hn::RebindToSigned<DF> di;
  const auto sign = hn::ShiftLeft<16>(hn::And(h, hn::Set(du, 0x8000u)));
  const auto exp = hn::And(hn::ShiftRight<10>(h), hn::Set(du, 0x1Fu));
  const auto man = hn::And(h, hn::Set(du, 0x3FFu));
  const auto normal = hn::Or(hn::ShiftLeft<23>(hn::Add(exp, hn::Set(du, 112u))), hn::ShiftLeft<13>(man));
  const auto special = hn::Or(hn::Set(du, 0x7F800000u), hn::ShiftLeft<13>(man));
  // Subnormal or zero: man * 2^-24; both the conversion (man < 2^10) and the product are exact.
  const auto tiny = hn::Mul(hn::ConvertTo(df, hn::BitCast(di, man)), hn::Set(df, 0x1p-24f));
  auto v = hn::BitCast(df, hn::IfThenElse(hn::Eq(exp, hn::Set(du, 31u)), special, normal));
  v = hn::IfThenElse(hn::RebindMask(df, hn::Eq(exp, hn::Zero(du))), tiny, v);
  return hn::Or(v, hn::BitCast(df, sign));
}

// v rounded (RNE) to bf16's precision on its fp32 bits, the value kept in fp32 lanes, as torch
// rounds each operation on a bf16 tensor. For v that is not NaN (no quieting, two operations
// fewer than NarrowToBf16Bits): b + 0x7FFF + lsb with the low half cleared; an overflow carries
// into inf's bits, as bf16 rounding overflows.
template <class DF>
HWY_INLINE hn::Vec<DF> RoundedToBf16(DF df, hn::Vec<DF> v) {
  const hn::RebindToUnsigned<DF> du;
  const auto b = hn::BitCast(du, v);
  const auto lsb = hn::And(hn::ShiftRight<16>(b), hn::Set(du, 1u));
  return hn::BitCast(df, hn::And(hn::Add(hn::Add(b, hn::Set(du, 0x7FFFu)), lsb), hn::Set(du, 0xFFFF0000u)));
}

// The same for f16, v not NaN: 10 fraction bits from 2^-14 up (past 65504 the result is inf, as
// f16 overflows), and multiples of 2^-24 below, where adding 0.5 (whose fp32 ulp is 2^-24)
// rounds |v| exactly, RNE.
template <class DF>
HWY_INLINE hn::Vec<DF> RoundedToF16(DF df, hn::Vec<DF> v) {
  const hn::RebindToSigned<DF> di;
  const auto b = hn::BitCast(di, v);
  const auto sign = hn::And(b, hn::Set(di, static_cast<std::int32_t>(0x80000000u)));
  const auto mag = hn::And(b, hn::Set(di, 0x7FFFFFFF));
  const auto lsb = hn::And(hn::ShiftRight<13>(mag), hn::Set(di, 1));
  auto normal = hn::And(hn::Add(hn::Add(mag, hn::Set(di, 0x0FFF)), lsb), hn::Set(di, static_cast<std::int32_t>(0xFFFFE000u)));
  normal = hn::IfThenElse(hn::Gt(normal, hn::Set(di, 0x477FE000)), hn::Set(di, 0x7F800000), normal);  // > 65504
  const auto small = hn::Sub(hn::Add(hn::BitCast(df, mag), hn::Set(df, 0.5f)), hn::Set(df, 0.5f));
  const auto r = hn::IfThenElse(hn::Lt(mag, hn::Set(di, 0x38800000)), hn::BitCast(di, small), normal);  // below 2^-14
  return hn::BitCast(df, hn::Or(r, sign));
}

// Lanes(df) consecutive elements of dtype dt at p, as fp32.
template <class DF>
HWY_INLINE hn::Vec<DF> LoadWidened(DF df, DType dt, const void* p) {
  if (dt == DType::f32) return hn::LoadU(df, static_cast<const float*>(p));
  const hn::Rebind<std::uint16_t, DF> d16;
  const hn::RebindToUnsigned<DF> du;
  const auto w = hn::PromoteTo(du, hn::LoadU(d16, static_cast<const std::uint16_t*>(p)));
  if (dt == DType::bf16) return hn::BitCast(df, hn::ShiftLeft<16>(w));
  return WidenHalfBits(df, w);
}

// bf16 bits (in 32-bit lanes) of fp32 bits: b + 0x7FFF + lsb, then the top half; NaN quiet.
template <class DU>
HWY_INLINE hn::Vec<DU> NarrowToBf16Bits(DU du, hn::Vec<DU> b) {
  const hn::RebindToSigned<DU> di;
  const auto abs = hn::BitCast(di, hn::And(b, hn::Set(du, 0x7FFFFFFFu)));
  const auto is_nan = hn::RebindMask(du, hn::Gt(abs, hn::Set(di, 0x7F800000)));
  const auto lsb = hn::And(hn::ShiftRight<16>(b), hn::Set(du, 1u));
  const auto rounded = hn::ShiftRight<16>(hn::Add(b, hn::Add(hn::Set(du, 0x7FFFu), lsb)));
  const auto quiet = hn::Or(hn::ShiftRight<16>(b), hn::Set(du, 0x0040u));
  return hn::IfThenElse(is_nan, quiet, rounded);
}

// IEEE half bits (in 32-bit lanes) of fp32 bits, rounded to nearest even.
template <class DU>
HWY_INLINE hn::Vec<DU> NarrowToHalfBits(DU du, hn::Vec<DU> b) {
  const hn::RebindToSigned<DU> di;
  const auto sign = hn::And(hn::ShiftRight<16>(b), hn::Set(du, 0x8000u));
  const auto a = hn::And(b, hn::Set(du, 0x7FFFFFFFu));
  const auto ai = hn::BitCast(di, a);  // non-negative: signed comparisons order it
  // (Integer lanes have only strict comparisons on every target.)
  auto at_least = [&](std::int32_t bits) { return hn::RebindMask(du, hn::Gt(ai, hn::Set(di, bits - 1))); };

  const auto nan = hn::Or(hn::Set(du, 0x7E00u), hn::And(hn::ShiftRight<13>(a), hn::Set(du, 0x3FFu)));
  // Normal half: rebias the exponent (127 -> 15) and round the 13 dropped bits.
  const auto r = hn::Sub(a, hn::Set(du, 0x38000000u));
  const auto normal =
      hn::ShiftRight<13>(hn::Add(r, hn::Add(hn::Set(du, 0xFFFu), hn::And(hn::ShiftRight<13>(r), hn::Set(du, 1u)))));
  // Subnormal half: the full significand shifted right by 126 - e (14..24), rounded to even.
  const auto e = hn::BitCast(di, hn::ShiftRight<23>(a));
  const auto shift = hn::BitCast(du, hn::Min(hn::Max(hn::Sub(hn::Set(di, 126), e), hn::Set(di, 14)), hn::Set(di, 24)));
  const auto sig = hn::Or(hn::And(a, hn::Set(du, 0x7FFFFFu)), hn::Set(du, 0x800000u));
  const auto half_minus_one = hn::Sub(hn::Shl(hn::Set(du, 1u), hn::Sub(shift, hn::Set(du, 1u))), hn::Set(du, 1u));
  const auto odd = hn::And(hn::Shr(sig, shift), hn::Set(du, 1u));
  const auto subnormal = hn::Shr(hn::Add(sig, hn::Add(half_minus_one, odd)), shift);

  auto h = hn::IfThenElseZero(at_least(0x33000000), subnormal);  // below 2^-25: +/-0
  h = hn::IfThenElse(at_least(0x38800000), normal, h);
  h = hn::IfThenElse(at_least(0x477FF000), hn::Set(du, 0x7C00u), h);  // rounds past 65504
  h = hn::IfThenElse(hn::RebindMask(du, hn::Gt(ai, hn::Set(di, 0x7F800000))), nan, h);
  return hn::Or(h, sign);
}

// Stores the Lanes(df) values of v as consecutive elements of dtype dt at p.
template <class DF>
HWY_INLINE void StoreNarrowed(DF df, DType dt, hn::Vec<DF> v, void* p) {
  if (dt == DType::f32) {
    hn::StoreU(v, df, static_cast<float*>(p));
    return;
  }
  const hn::RebindToUnsigned<DF> du;
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<std::uint16_t, DF> d16;
  const auto bits = hn::BitCast(du, v);
  const auto h = dt == DType::bf16 ? NarrowToBf16Bits(du, bits) : NarrowToHalfBits(du, bits);
  hn::StoreU(hn::DemoteTo(d16, hn::BitCast(di, h)), d16, static_cast<std::uint16_t*>(p));
}

// The largest of n magnitude bit patterns (x & mask) of the T lanes at x: two running maxima
// hide the max's latency; the input is prefetched ahead.
template <class T>
HWY_INLINE T MaxMagnitudeBits(const T* x, std::int64_t n, T mask) {
  const hn::ScalableTag<T> d;
  const auto N = static_cast<std::int64_t>(hn::Lanes(d));
  const auto m = hn::Set(d, mask);
  auto m0 = hn::Zero(d), m1 = hn::Zero(d);
  std::int64_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    PrefetchAheadBytes(x + i, 2 * N * static_cast<std::int64_t>(sizeof(T)));
    m0 = hn::Max(m0, hn::And(hn::LoadU(d, x + i), m));
    m1 = hn::Max(m1, hn::And(hn::LoadU(d, x + i + N), m));
  }
  if (i + N <= n) {
    m0 = hn::Max(m0, hn::And(hn::LoadU(d, x + i), m));
    i += N;
  }
  T most = hn::GetLane(hn::MaxOfLanes(d, hn::Max(m0, m1)));
  for (; i < n; ++i) most = std::max(most, static_cast<T>(x[i] & mask));
  return most;
}

// Bits of max |x| over n contiguous elements of dtype dt at p, as fp32 bits with the sign
// cleared (0 for n = 0): for non-negative floats the integer order of the bits is the order of
// the values, NaN above +inf, in every IEEE width, so the max is taken on the input's own bits
// (16-bit lanes for bf16 and f16: twice the elements per instruction) and widened once.
HWY_INLINE std::uint32_t AbsMaxBitsOfRun(DType dt, const void* p, std::int64_t n) {
  if (dt == DType::f32)
    return static_cast<std::uint32_t>(MaxMagnitudeBits(static_cast<const std::int32_t*>(p), n, std::int32_t{0x7FFFFFFF}));
  const auto h = static_cast<std::uint16_t>(MaxMagnitudeBits(static_cast<const std::int16_t*>(p), n, std::int16_t{0x7FFF}));
  if (dt == DType::bf16) return static_cast<std::uint32_t>(h) << 16;
  // f16 magnitude bits to fp32 bits, exactly: one lane through the vector conversion.
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  return static_cast<std::uint32_t>(hn::GetLane(hn::BitCast(du, WidenHalfBits(df, hn::Set(du, h)))));
}

// kN vectors of int32 lanes reduced so that lane j of the result holds the max of vector j's
// lanes (kN = Lanes): each level of ConcatEven/ConcatOdd + Max halves both the vectors and the
// lanes per vector. `level` is overwritten.
// (Not on HWY_SCALAR, which has one lane and no Concat.)
#if HWY_TARGET != HWY_SCALAR
template <int kN, class DI>
HWY_INLINE hn::Vec<DI> LaneMaxima(DI di, hn::Vec<DI>* level) {
  for (int width = kN; width > 1; width /= 2)
    for (int j = 0; j < width / 2; ++j)
      level[j] = hn::Max(hn::ConcatEven(di, level[2 * j + 1], level[2 * j]), hn::ConcatOdd(di, level[2 * j + 1], level[2 * j]));
  return level[0];
}
#endif

}  // namespace qexact::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // QEXACT_KERNELS_CPU_COMMON_FLOAT_LANES_INL_H_ toggle
