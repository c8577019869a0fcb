// Fast HiF4 unpacking (contracts §5), one SIMD body per x86 target, dispatched at run time: one
// sub-group per lane (its two value bytes, its L2 and L3 bits), StoreInterleaved4 putting its
// 4 elements back in order; each value is c * step with fake-quant's step (hif4_lanes-inl.h),
// so that unpack(pack(x)) is fake_quant(x) bit for bit.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/hif4/hif4_unpack.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/cpu/hif4/hif4_kernels.hpp"
#include "kernels/cpu/hif4/hif4_lanes-inl.h"

HWY_BEFORE_NAMESPACE();
namespace qexact::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void Hif4UnpackBlocks(const std::uint8_t* scale, const std::uint8_t* value, float* out, std::int64_t first,
                      std::int64_t last) {
  const Hif4DF df;
  const Hif4DI di;
  const hn::RebindToUnsigned<Hif4DF> du;
  const hn::Rebind<std::uint16_t, Hif4DF> d16;
  const std::size_t N = hn::Lanes(df);
  const Hif4VI lane = hn::Iota(di, 0);
  for (std::int64_t block = first; block < last; ++block) {
    const std::uint8_t* s = scale + 4 * block;
    float* o = out + 64 * block;
    if (s[0] == 0xFF) {  // a block that held NaN or +/-inf
      for (std::size_t i = 0; i < 64; i += N) hn::StoreU(hn::BitCast(df, hn::Set(di, kHif4NaNBits)), df, o + i);
      continue;
    }
    // fp32 bits of m * 2^(e-2) for the byte (e + 48) << 2 | (m - 4): 316 = (127 - 48) << 2.
    const Hif4VF scale_value = hn::BitCast(df, hn::Set(di, (static_cast<std::int32_t>(s[0]) + 316) << 21));
    const auto l2 = hn::Set(du, s[1]);                                          // group g at bit 7 - g
    const auto l3 = hn::Set(du, static_cast<std::uint32_t>(s[2]) << 8 | s[3]);  // sub-group j at bit 15 - j
    for (std::size_t sl = 0; sl < 16 / N; ++sl) {                               // N sub-groups at a time
      const Hif4VI j = hn::Add(lane, hn::Set(di, static_cast<std::int32_t>(sl * N)));
      const auto d8_bit =
          hn::And(hn::Shr(l2, hn::BitCast(du, hn::Sub(hn::Set(di, 7), hn::ShiftRight<1>(j)))), hn::Set(du, 1u));
      const auto d4_bit = hn::And(hn::Shr(l3, hn::BitCast(du, hn::Sub(hn::Set(di, 15), j))), hn::Set(du, 1u));
      const Hif4MF d8 = hn::RebindMask(df, hn::Eq(d8_bit, hn::Set(du, 1u)));
      const Hif4MF d4 = hn::RebindMask(df, hn::Eq(d4_bit, hn::Set(du, 1u)));
      const Hif4VF step = Hif4Step(scale_value, d8, d4);
      // Sub-group j's 4 nibbles: value bytes 2j (elements 4j, 4j+1) and 2j+1, low nibble first.
      const Hif4VI nibbles = hn::BitCast(
          di,
          hn::PromoteTo(du, hn::LoadU(d16, reinterpret_cast<const std::uint16_t*>(value + 32 * block + 2 * N * sl))));
      Hif4VF v[4];
      for (int k = 0; k < 4; ++k) {
        const Hif4VI n = hn::And(hn::ShiftRightSame(nibbles, 4 * k), hn::Set(di, 0xF));
        v[k] = Hif4Value(hn::ConvertTo(df, hn::And(n, hn::Set(di, 7))), hn::ShiftLeft<28>(hn::And(n, hn::Set(di, 8))),
                         step);
      }
      hn::StoreInterleaved4(v[0], v[1], v[2], v[3], df, o + 4 * N * sl);
    }
  }
}

}  // namespace qexact::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qexact::kernels {
HWY_EXPORT(Hif4UnpackBlocks);

void hif4_unpack_blocks(const std::uint8_t* scale, const std::uint8_t* value, float* out, std::int64_t first,
                        std::int64_t last) {
  HWY_DYNAMIC_DISPATCH(Hif4UnpackBlocks)(scale, value, out, first, last);
}
}  // namespace qexact::kernels
#endif
