// Per-target loads of the quantizers' float inputs (f32, bf16, f16) as fp32 lanes, shared by
// the fast kernels. Included by each kernel translation unit after hwy/highway.h, once per
// SIMD target (Highway's re-inclusion guard below).
#if defined(QEXACT_KERNELS_CPU_LOAD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef QEXACT_KERNELS_CPU_LOAD_INL_H_
#undef QEXACT_KERNELS_CPU_LOAD_INL_H_
#else
#define QEXACT_KERNELS_CPU_LOAD_INL_H_
#endif

#include <hwy/highway.h>

#include <cstdint>

#include "qexact/tensor.hpp"

HWY_BEFORE_NAMESPACE();
namespace qexact::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// IEEE half bits (in 32-bit lanes) to fp32, exactly, subnormals, inf and NaN included. Written
// out on integers because Highway's emulated f16 promotion differs between targets.
HWY_INLINE hn::Vec<hn::ScalableTag<float>> F16BitsToF32(hn::Vec<hn::ScalableTag<std::uint32_t>> h) {
  const hn::ScalableTag<float> df;
  const hn::ScalableTag<std::uint32_t> du;
  const hn::ScalableTag<std::int32_t> di;
  const auto sign = hn::ShiftLeft<16>(hn::And(h, hn::Set(du, 0x8000u)));
  const auto exp = hn::And(hn::ShiftRight<10>(h), hn::Set(du, 0x1Fu));
  const auto man = hn::And(h, hn::Set(du, 0x3FFu));
  const auto normal = hn::Or(hn::ShiftLeft<23>(hn::Add(exp, hn::Set(du, 112u))), hn::ShiftLeft<13>(man));
  const auto special = hn::Or(hn::Set(du, 0x7F800000u), hn::ShiftLeft<13>(man));
  const auto sub = hn::Mul(hn::ConvertTo(df, hn::BitCast(di, man)), hn::Set(df, 0x1p-24f));
  auto v = hn::BitCast(df, hn::IfThenElse(hn::Eq(exp, hn::Set(du, 31u)), special, normal));
  v = hn::IfThenElse(hn::RebindMask(df, hn::Eq(exp, hn::Zero(du))), sub, v);
  return hn::Or(v, hn::BitCast(df, sign));
}

// Loads lanes [i, i+N) of a contiguous row of dtype `dt` (f32, bf16 or f16) as fp32.
HWY_INLINE hn::Vec<hn::ScalableTag<float>> LoadAsF32(hn::ScalableTag<float> df, DType dt, const std::uint8_t* row,
                                                     std::int64_t i) {
  if (dt == DType::f32) return hn::LoadU(df, reinterpret_cast<const float*>(row) + i);
  const hn::ScalableTag<std::uint32_t> du;
  const hn::Rebind<std::uint16_t, decltype(df)> d16;
  const auto h = hn::LoadU(d16, reinterpret_cast<const std::uint16_t*>(row) + i);
  const auto w = hn::PromoteTo(du, h);
  if (dt == DType::bf16) return hn::BitCast(df, hn::ShiftLeft<16>(w));
  return F16BitsToF32(w);
}

}  // namespace qexact::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // QEXACT_KERNELS_CPU_LOAD_INL_H_
