// Fast HiF4 packing (contracts §5), one SIMD body per x86 target, dispatched at run time: the
// line blocks of hif4_lanes-inl.h, their codes written as nibbles and their L2 and L3 bits
// gathered into the scale bytes.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/hif4/hif4_pack.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/cpu/hif4/hif4_kernels.hpp"
#include "kernels/cpu/hif4/hif4_lanes-inl.h"

HWY_BEFORE_NAMESPACE();
namespace qexact::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Per compact lane (sub-group j), the weight of its L3 bit, 1 << (15 - j), and of its group's
// L2 bit, 1 << (23 - j / 2) for even j: the sum over the set bits is L2 << 16 | L3, most
// significant bit first, the scale bytes 1 to 3.
struct Hif4BitWeights {
  HWY_ALIGN std::int32_t l3[16];
  HWY_ALIGN std::int32_t l2[16];
  Hif4BitWeights() {
    for (std::size_t c = 0; c < kHif4Compacts; ++c)
      for (std::size_t lane = 0; lane < kHif4Lanes; ++lane) {
        const std::size_t j = Hif4SubGroupOf(c, lane);
        l3[c * kHif4Lanes + lane] = 1 << (15 - j);
        l2[c * kHif4Lanes + lane] = j % 2 == 0 ? 1 << (23 - j / 2) : 0;
      }
  }
};

// Packed bytes of a line block: element nibbles sign << 3 | c, two per value byte (the even
// element low), and the L2 and L3 bits gathered by weight.
struct PackOutput {
  const Hif4BitWeights& weights;
  std::uint8_t* value;
  Hif4VI bits = hn::Zero(Hif4DI());
#if HWY_TARGET == HWY_SCALAR
  std::int32_t even_nibble = 0;
#endif

  HWY_INLINE void Bits(std::size_t c, Hif4MF d8, Hif4MF d4) {
    const Hif4DI di;
    bits = hn::Add(bits, hn::IfThenElseZero(hn::RebindMask(di, d4), hn::Load(di, weights.l3 + c * kHif4Lanes)));
    bits = hn::Add(bits, hn::IfThenElseZero(hn::RebindMask(di, d8), hn::Load(di, weights.l2 + c * kHif4Lanes)));
  }

  HWY_INLINE void Codes(std::size_t v, Hif4VF code, Hif4VI sign, Hif4VF) {
    const Hif4DI di;
    const Hif4VI nibble = hn::Or(Hif4CodeBits(code), hn::And(hn::ShiftRight<28>(sign), hn::Set(di, 8)));
#if HWY_TARGET == HWY_SCALAR
    if (v % 2 == 0) {
      even_nibble = hn::GetLane(nibble);
    } else {
      value[v / 2] = static_cast<std::uint8_t>(even_nibble | hn::GetLane(nibble) << 4);
    }
#else
    // Elements 2m and 2m + 1 share a 64-bit lane: its low byte after adding the high half
    // shifted down to bit 4 is their value byte.
    const hn::Repartition<std::uint64_t, Hif4DI> d64;
    const hn::Rebind<std::uint8_t, decltype(d64)> d8;
    const auto pairs = hn::BitCast(d64, nibble);
    hn::StoreU(hn::TruncateTo(d8, hn::Or(pairs, hn::ShiftRight<28>(pairs))), d8, value + v * kHif4Lanes / 2);
#endif
  }
};

void Hif4PackBlocks(const Hif4Plan& p, std::uint8_t* scale, std::uint8_t* value, std::int64_t first,
                    std::int64_t last) {
  const Hif4DI di;
  const Hif4BitWeights weights;
  Hif4ForLineBatches(p, first, last, [&](std::int64_t block, std::size_t i, const Hif4LineBatch& b, const float* x) {
    PackOutput o{weights, value + 32 * block};
    if (b.non_finite[i]) {
      Hif4QuantizeLine<false>(x, b, i, o);
    } else {
      Hif4QuantizeLine<true>(x, b, i, o);
    }
    const auto word = static_cast<std::uint32_t>(hn::GetLane(hn::SumOfLanes(di, o.bits)));
    std::uint8_t* s = scale + 4 * block;
    s[0] = b.non_finite[i] ? std::uint8_t{0xFF} : static_cast<std::uint8_t>(b.scale_byte[i]);
    s[1] = static_cast<std::uint8_t>(word >> 16);
    s[2] = static_cast<std::uint8_t>(word >> 8);
    s[3] = static_cast<std::uint8_t>(word);
  });
}

}  // namespace qexact::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qexact::kernels {
HWY_EXPORT(Hif4PackBlocks);

void hif4_pack_blocks(const Hif4Plan& p, std::uint8_t* scale, std::uint8_t* value, std::int64_t first,
                      std::int64_t last) {
  HWY_DYNAMIC_DISPATCH(Hif4PackBlocks)(p, scale, value, first, last);
}
}  // namespace qexact::kernels
#endif
