// E2M1 (FP4) codes packed two per byte, element 2j in byte j's low nibble and 2j + 1 in its
// high one (the adjacent packing of MX and NVFP4 payloads), unpacked into u32 lanes and decoded
// exactly: shared by the MX dequantizer and the checkpoint statistics (a Highway per-target
// header: foreach_target includes it once per target). No rounding happens here.
#if defined(QEXACT_KERNELS_CPU_COMMON_FP4_CODES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef QEXACT_KERNELS_CPU_COMMON_FP4_CODES_INL_H_
#undef QEXACT_KERNELS_CPU_COMMON_FP4_CODES_INL_H_
#else
#define QEXACT_KERNELS_CPU_COMMON_FP4_CODES_INL_H_
#endif

#include <hwy/highway.h>

#include <cstdint>

HWY_BEFORE_NAMESPACE();
namespace qexact::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET != HWY_SCALAR
// The Lanes(df) FP4 codes of elements i .. i + Lanes(df) of a row from `row`: read as
// Lanes(df) / 2 bytes widened to u32, each byte's two nibbles split into the two u16 halves of
// its lane, and those halves widened to lanes of their own.
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> Fp4AdjacentCodes(DF df, const std::uint8_t* row, std::int64_t i) {
  const hn::RebindToUnsigned<DF> du;
  const hn::Half<decltype(du)> dh;
  const hn::Rebind<std::uint8_t, decltype(dh)> d8h;
  const hn::Repartition<std::uint16_t, decltype(dh)> d16;
  (void)df;
  const auto w = hn::PromoteTo(dh, hn::LoadU(d8h, row + i / 2));
  const auto split = hn::Or(hn::And(w, hn::Set(dh, 0xFu)), hn::ShiftLeft<12>(hn::And(w, hn::Set(dh, 0xF0u))));
  return hn::PromoteTo(du, hn::BitCast(d16, split));
}
#endif

// E2M1 codes' values (u32 lanes, 0..15): magnitude m = 2e + b is 0 or 0.5 for e = 0, else
// 2^(e - 1) * (1 + b / 2), built on the fp32 bits; the sign is bit 3.
template <class DF>
HWY_INLINE hn::Vec<DF> DecodeE2m1(DF df, hn::Vec<hn::RebindToUnsigned<DF>> c) {
  const hn::RebindToUnsigned<DF> du;
  const auto e = hn::And(hn::ShiftRight<1>(c), hn::Set(du, 3u));
  const auto b = hn::And(c, hn::Set(du, 1u));
  const auto normal = hn::Or(hn::ShiftLeft<23>(hn::Add(e, hn::Set(du, 126u))), hn::ShiftLeft<22>(b));
  const auto half = hn::And(hn::Sub(hn::Zero(du), b), hn::Set(du, 0x3F000000u));  // 0.5 where b = 1
  const auto magnitude = hn::IfThenElse(hn::Eq(e, hn::Zero(du)), half, normal);
  return hn::BitCast(df, hn::Or(magnitude, hn::ShiftLeft<28>(hn::And(c, hn::Set(du, 8u)))));
}

}  // namespace qexact::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // QEXACT_KERNELS_CPU_COMMON_FP4_CODES_INL_H_ toggle
