// The fast fp8.scaled kernel's SIMD parts (google/highway, one body per x86 target, dispatched at
// run time): the abs-max of a run on the integer bits of |x| (exact and order-free: a max), and
// the element codes: the quotient (a real IEEE division or multiplication per lane), the clamp
// to +/-max on the bits (NaN passes, inf clamps), and RNE to E4M3/E5M2 by integer arithmetic
// on the fp32 bits (normal grid) or one fp32 addition of 2^23 (subnormal grid).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/fp8_scaled/fp8_quantize.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/common/float_lanes-inl.h"
#include "kernels/cpu/fp8_scaled/fp8_plan.hpp"

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

// Codes (in int32 lanes) of quotients v: clamp |v| to max on the bits, round to the element.
HWY_INLINE VI Codes(const Fp8Plan& p, VF v) {
  const DF df;
  const DI di;
  const VI bits = hn::BitCast(di, v);
  const VI raw = hn::And(bits, hn::Set(di, 0x7FFFFFFF));
  const auto nan = hn::Gt(raw, hn::Set(di, 0x7F800000));
  const VI ab = hn::Min(raw, hn::Set(di, static_cast<std::int32_t>(p.max_bits)));  // inf included
  const int drop = 23 - p.mbits;
  const int e_min = 1 - p.bias;  // the element's smallest normal exponent
  // Normal grid: add half an element ulp less one, plus the kept lsb (ties to even), then shift
  // and move the exponent from fp32's bias to the element's.
  const VI lsb = hn::And(hn::ShiftRightSame(ab, drop), hn::Set(di, 1));
  const VI normal = hn::Sub(hn::ShiftRightSame(hn::Add(ab, hn::Add(hn::Set(di, (1 << (drop - 1)) - 1), lsb)), drop),
                            hn::Set(di, (127 - p.bias) << p.mbits));
  // Subnormal grid: |v| / 2^(e_min - mbits) (exact) is below 2^mbits; adding 2^23 rounds it to an
  // integer (RNE) held in the low mantissa bits.
  const VF units = hn::Mul(hn::BitCast(df, ab), hn::Set(df, std::ldexp(1.0f, p.mbits - e_min)));
  const VI sub = hn::Sub(hn::BitCast(di, hn::Add(units, hn::Set(df, 8388608.0f))), hn::Set(di, 0x4B000000));
  VI code = hn::IfThenElse(hn::Lt(ab, hn::Set(di, (127 + e_min) << 23)), sub, normal);
  code = hn::IfThenElse(nan, hn::Set(di, 0x7F), code);  // NaN keeps its sign, as torch's cast
  const VI sign = hn::ShiftLeft<7>(hn::BitCast(di, hn::ShiftRight<31>(hn::BitCast(DU(), bits))));
  return hn::Or(code, sign);
}

HWY_INLINE void StoreCodes(VI code, std::int64_t count, std::uint8_t* out) {
  const hn::Rebind<std::uint8_t, DU> d8;
  if (count == static_cast<std::int64_t>(hn::Lanes(DF()))) {
    hn::StoreU(hn::TruncateTo(d8, hn::BitCast(DU(), code)), d8, out);
    return;
  }
  HWY_ALIGN std::uint8_t tmp[kMaxLanes];
  hn::StoreU(hn::TruncateTo(d8, hn::BitCast(DU(), code)), d8, tmp);
  // count < Lanes <= sizeof tmp; the min makes that visible to GCC's overread check (ASan build).
  std::memcpy(out, tmp, std::min(static_cast<std::size_t>(count), sizeof tmp));
}

std::uint32_t AbsMaxBits(const Fp8Plan& p, std::int64_t offset, std::int64_t n) {
  const DI di;
  VI m = hn::Zero(di);
  ForEachVector(p.dtype, p.elem_size, p.data + offset * p.elem_size, n, [&](std::int64_t, std::int64_t, VF v) {
    m = hn::Max(m, hn::And(hn::BitCast(di, v), hn::Set(di, 0x7FFFFFFF)));
  });
  return static_cast<std::uint32_t>(hn::GetLane(hn::MaxOfLanes(di, m)));
}

void QuantizeRun(const Fp8Plan& p, std::int64_t offset, std::int64_t n, float operand) {
  const DF df;
  const VF s = hn::Set(df, operand);
  const bool divide = p.quotient == Fp8Quotient::divide;
  std::uint8_t* out = p.payload + offset;
  ForEachVector(p.dtype, p.elem_size, p.data + offset * p.elem_size, n, [&](std::int64_t i, std::int64_t count, VF v) {
    StoreCodes(Codes(p, divide ? hn::Div(v, s) : hn::Mul(v, s)), count, out + i);
  });
}

void EncodeValues(const Fp8Plan& p, const float* q, std::int64_t n, std::uint8_t* out) {
  ForEachVector(DType::f32, 4, reinterpret_cast<const std::uint8_t*>(q), n,
                [&](std::int64_t i, std::int64_t count, VF v) { StoreCodes(Codes(p, v), count, out + i); });
}

}  // namespace qexact::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qexact::kernels {
HWY_EXPORT(AbsMaxBits);
HWY_EXPORT(QuantizeRun);
HWY_EXPORT(EncodeValues);

std::uint32_t fp8_abs_max_bits(const Fp8Plan& p, std::int64_t offset, std::int64_t n) {
  return HWY_DYNAMIC_DISPATCH(AbsMaxBits)(p, offset, n);
}
void fp8_quantize_run(const Fp8Plan& p, std::int64_t offset, std::int64_t n, float operand) {
  HWY_DYNAMIC_DISPATCH(QuantizeRun)(p, offset, n, operand);
}
void fp8_encode_values(const Fp8Plan& p, const float* q, std::int64_t n, std::uint8_t* out) {
  HWY_DYNAMIC_DISPATCH(EncodeValues)(p, q, n, out);
}
}  // namespace qexact::kernels
#endif
