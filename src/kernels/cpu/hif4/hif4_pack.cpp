// Fast HiF4 packing (contracts §5), one SIMD body per x86 target, dispatched at run time: the
// line blocks of hif4_lanes-inl.h, their codes written as nibbles and their L2 and L3 bits
// gathered into the scale bytes.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/hif4/hif4_pack.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <bit>
#include <cstring>

#include "kernels/cpu/hif4/hif4_kernels.hpp"
#include "kernels/cpu/hif4/hif4_lanes-inl.h"

HWY_BEFORE_NAMESPACE();
namespace qexact::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The scale bytes 1 to 3 from the L2 and L3 masks' bits: bit g = c * N + lane of the 16-bit
// word of all compact vectors' mask bits is sub-group j = Hif4SubGroupOf(c, lane). Per byte of
// that word and its 256 values, the L3 bits as L3 << 8 of bytes 2 and 3 (sub-group j at bit
// 15 - j: most significant first) and the L2 bits of byte 1 (group j / 2 at bit 7 - j / 2, from
// the even sub-groups), so that two table reads per mask replace a sum over lanes.
struct Hif4BitTables {
  std::uint16_t l3[2][256];
  std::uint8_t l2[2][256];
  constexpr Hif4BitTables() : l3{}, l2{} {
    for (std::size_t half = 0; half < 2; ++half)
      for (std::size_t byte = 0; byte < 256; ++byte)
        for (std::size_t bit = 0; bit < 8; ++bit) {
          if ((byte >> bit & 1) == 0) continue;
          const std::size_t g = 8 * half + bit;
          const std::size_t j = Hif4SubGroupOf(g / kHif4Lanes, g % kHif4Lanes);
          l3[half][byte] = static_cast<std::uint16_t>(l3[half][byte] | 1u << (15 - j));
          if (j % 2 == 0) l2[half][byte] = static_cast<std::uint8_t>(l2[half][byte] | 1u << (7 - j / 2));
        }
  }
};
inline constexpr Hif4BitTables kHif4BitTables{};

// Packed bytes of a line block: element nibbles sign << 3 | c, two per value byte (the even
// element low), and the L2 and L3 masks' bits gathered into one 16-bit word each.
struct PackOutput {
  std::uint8_t* value;
  std::uint32_t l2_bits = 0, l3_bits = 0;
#if HWY_TARGET == HWY_SCALAR
  std::int32_t even_nibble = 0;
#endif

  HWY_INLINE void Bits(std::size_t c, Hif4MF d8, Hif4MF d4) {
    const Hif4DF df;
    HWY_ALIGN std::uint8_t bits[8] = {};
    hn::StoreMaskBits(df, d8, bits);
    l2_bits |= static_cast<std::uint32_t>(bits[0] | bits[1] << 8) << (c * kHif4Lanes);
    hn::StoreMaskBits(df, d4, bits);
    l3_bits |= static_cast<std::uint32_t>(bits[0] | bits[1] << 8) << (c * kHif4Lanes);
  }

  // Scale bytes 1 to 3 (L2, then L3 most significant first), as a little-endian word's bytes.
  HWY_INLINE std::uint32_t ScaleBits() const {
    const Hif4BitTables& t = kHif4BitTables;
    const std::uint32_t l3 = t.l3[0][l3_bits & 0xFF] | t.l3[1][l3_bits >> 8];
    const std::uint32_t l2 = t.l2[0][l2_bits & 0xFF] | t.l2[1][l2_bits >> 8];
    return l2 << 8 | (l3 >> 8) << 16 | (l3 & 0xFF) << 24;
  }

#if HWY_TARGET != HWY_SCALAR
  // The bf16 path's chunk q: value byte L of it is even lane L's nibble | odd lane L's << 4.
  HWY_INLINE void Pairs(std::size_t q, const Hif4Halves& even, const Hif4Halves& odd) {
    const Hif4DI di;
    const Hif4DU du;
    const hn::Rebind<std::uint8_t, Hif4DU> d8;
    // sign's bit 31 shifted logically to bit 3 (the bits below it are undefined, cut by the select).
    auto nibble = [&](const Hif4Halves& h) {
      return Hif4BitSelect(hn::Set(di, 7), hn::BitCast(di, h.magic),
                               hn::BitCast(di, hn::ShiftRight<28>(hn::BitCast(du, h.sign))));
    };
    const Hif4VI bytes = hn::Or(nibble(even), hn::ShiftLeft<4>(nibble(odd)));
    // Ordinary stores: streaming ones (16 or 32 bytes at a time) measured no faster at 2
    // threads out of cache and 7% slower at 1 (the value bytes are a fifth of the traffic).
    hn::StoreU(hn::TruncateTo(d8, hn::BitCast(du, bytes)), d8, value + q * kHif4Lanes);
  }
#endif

  HWY_INLINE void Codes(std::size_t v, Hif4VF magic, Hif4VI sign, Hif4VF) {
    const Hif4DI di;
    const hn::RebindToUnsigned<Hif4DI> du;
    // sign holds bit 31 only: shifted logically it is the nibble's 8.
    const Hif4VI nibble = hn::Or(Hif4CodeBits(magic), hn::BitCast(di, hn::ShiftRight<28>(hn::BitCast(du, sign))));
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
  // The scale word: byte 0 the scale's (0xFF for a non-finite block), bytes 1-3 the bits.
  auto store_scale = [&](std::int64_t block, std::size_t i, const Hif4LineBatch& b, const PackOutput& o) {
    const std::uint32_t byte0 = b.non_finite[i] ? 0xFFu : static_cast<std::uint32_t>(b.scale_byte[i]);
    const std::uint32_t word = byte0 | o.ScaleBits();
    static_assert(std::endian::native == std::endian::little, "the scale word's bytes are stored in memory order");
    std::memcpy(scale + 4 * block, &word, 4);
  };
  // x: the block's fp32 values, or its bf16 elements in place.
  auto emit = [&](std::int64_t block, std::size_t i, const Hif4LineBatch& b, const auto* x) {
    PackOutput o{value + 32 * block};
    if (b.non_finite[i]) {
      Hif4QuantizeLine<false>(x, b, i, o);
    } else {
      Hif4QuantizeLine<true>(x, b, i, o);
    }
    store_scale(block, i, b, o);
  };
#if HWY_TARGET != HWY_SCALAR
  if (p.dtype == DType::bf16 && p.axis_stride == 1) {
    Hif4ForBf16LineBatches(p, first, last, emit);
    return;
  }
#endif
  Hif4ForLineBatches(p, first, last, emit);
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
