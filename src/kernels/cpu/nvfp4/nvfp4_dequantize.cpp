// Fast nvfp4 dequantize (contracts §9.2): e2m1 * m per element, m the block's multiplier from a
// 256-entry table (one per E4M3 scale code, formed once per call with the reference's own
// operations and order: torchao's t * s, or TE's (s * amax) * fp32(1 / 2688)). The E2M1 nibbles
// are spread to one per 32-bit lane and decoded on their bits (a lane permute of a 16-entry
// value table where a vector holds 16 lanes); one fp32 multiply per element as in the contract;
// a NaN is made canonical only in blocks whose multiplier is not finite (elsewhere e2m1 * m has
// no NaN). The fp32 output is not read again: it is streamed where aligned.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/nvfp4/nvfp4_dequantize.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include <hwy/cache_control.h>

#include "kernels/cpu/common/float_lanes-inl.h"
#include "kernels/cpu/nvfp4/nvfp4_plan.hpp"

HWY_BEFORE_NAMESPACE();
namespace qexact::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr std::uint32_t kCanonicalNaN = 0x7FC00000u;

// fp32 bits of E2M1 code c (0..15): 0, 0.5 (0x3F000000), then for magnitudes 2..7
// (mag + 252) << 22 (1, 1.5, 2, 3, 4, 6); the sign is bit 3.
HWY_INLINE std::uint32_t E2m1Bits(std::uint32_t c) {
  const std::uint32_t mag = c & 7u;
  const std::uint32_t bits = mag >= 2 ? (mag + 252u) << 22 : mag * 0x3F000000u;
  return bits | ((c & 8u) << 28);
}

#if HWY_TARGET != HWY_SCALAR
using DF = hn::ScalableTag<float>;
using DU = hn::RebindToUnsigned<DF>;
using DI = hn::RebindToSigned<DF>;
using D64 = hn::Repartition<std::uint64_t, DF>;

// The Lanes(DF) nibbles of Lanes(DF) / 2 payload bytes, one per 32-bit lane in element order
// (low nibble first): each byte widened to a 64-bit lane as b | b << 28, masked to the two
// nibbles at bit 0 and bit 32.
HWY_INLINE hn::Vec<DU> Nibbles(const std::uint8_t* bytes) {
  const D64 d64;
  const hn::Rebind<std::uint32_t, D64> d32;
  const hn::Rebind<std::uint8_t, D64> d8;
  const auto b = hn::PromoteTo(d64, hn::PromoteTo(d32, hn::LoadU(d8, bytes)));
  return hn::BitCast(DU(), hn::And(hn::Or(b, hn::ShiftLeft<28>(b)), hn::Set(d64, 0x0000000F0000000Full)));
}

// The E2M1 values of codes c (0..15 per lane).
HWY_INLINE hn::Vec<DF> E2m1Values(hn::Vec<DU> c) {
  const DF df;
  if constexpr (hn::MaxLanes(DF()) == 16) {
    HWY_ALIGN static constexpr float kTable[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                                   -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
    return hn::TableLookupLanes(hn::Load(df, kTable), hn::IndicesFromVec(df, hn::BitCast(DI(), c)));
  } else {
    const DU du;
    const DI di;
    const auto mag = hn::And(c, hn::Set(du, 7u));
    const auto big = hn::ShiftLeft<22>(hn::Add(mag, hn::Set(du, 252u)));
    const auto small = hn::And(hn::Sub(hn::Zero(du), mag), hn::Set(du, 0x3F000000u));  // mag 1: 0.5, 0: 0
    const auto is_big = hn::RebindMask(du, hn::Gt(hn::BitCast(di, mag), hn::Set(di, 1)));
    const auto sign = hn::ShiftLeft<28>(hn::And(c, hn::Set(du, 8u)));
    return hn::BitCast(df, hn::Or(hn::IfThenElse(is_big, big, small), sign));
  }
}
#endif

void DequantizeNvfp4Blocks(const Nvfp4DequantPlan& p, std::int64_t first, std::int64_t last) {
  std::int64_t b = first;
#if HWY_TARGET != HWY_SCALAR
  const DF df;
  constexpr std::int64_t kBlock = 16;
  const auto N = static_cast<std::int64_t>(hn::Lanes(df));
  if (N <= kBlock) {
    // Every block starts 64 bytes after the previous one: one check tells whether all are aligned.
    const bool stream = reinterpret_cast<std::uintptr_t>(p.out + first * kBlock) % (N * sizeof(float)) == 0;
    const auto nan = hn::BitCast(df, hn::Set(DU(), kCanonicalNaN));
    for (; b < last; ++b) {
      const std::uint8_t* in = p.payload + b * (kBlock / 2);
      float* o = p.out + b * kBlock;
      if ((b & 7) == 0) PrefetchAhead(in);  // one payload line per 8 blocks
      const float m = p.multiplier[p.scale[b]];
      const auto vm = hn::Set(df, m);
      const bool finite = std::isfinite(m);
      for (std::int64_t i = 0; i < kBlock; i += N) {
        auto v = hn::Mul(E2m1Values(Nibbles(in + i / 2)), vm);
        if (!finite) v = hn::IfThenElse(hn::IsNaN(v), nan, v);
        if (stream)
          hn::Stream(v, df, o + i);
        else
          hn::StoreU(v, df, o + i);
      }
    }
  }
#endif
  // One element at a time (the scalar target): the same product and NaN rule.
  for (; b < last; ++b) {
    const float m = p.multiplier[p.scale[b]];
    for (int i = 0; i < 16; ++i) {
      const std::uint8_t byte = p.payload[b * 8 + i / 2];
      const std::uint32_t bits = E2m1Bits(i % 2 == 0 ? byte & 0x0Fu : byte >> 4);
      float e;
      std::memcpy(&e, &bits, sizeof e);
      const float v = e * m;
      float canonical;
      std::memcpy(&canonical, &kCanonicalNaN, sizeof canonical);
      p.out[b * 16 + i] = std::isnan(v) ? canonical : v;
    }
  }
  hwy::FlushStream();  // the streamed lines are visible to other threads once this returns
}

}  // namespace qexact::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qexact::kernels {
HWY_EXPORT(DequantizeNvfp4Blocks);
void dequantize_nvfp4_blocks(const Nvfp4DequantPlan& p, std::int64_t first, std::int64_t last) {
  HWY_DYNAMIC_DISPATCH(DequantizeNvfp4Blocks)(p, first, last);
}
}  // namespace qexact::kernels
#endif
