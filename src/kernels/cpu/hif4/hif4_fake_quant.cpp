// Fast HiF4 fake-quant (contracts §5), one SIMD body per x86 target (google/highway), dispatched
// at run time. Blocks along the last axis are line blocks (64 contiguous values, see
// hif4_lanes-inl.h); blocks across a later axis are column blocks: N neighbouring inner
// positions are N blocks, one per lane, walked down the quantized axis a row at a time, so
// that the contiguous rows are read and written whole and no transposed copy is made.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/hif4/hif4_fake_quant.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/common/float_lanes-inl.h"
#include "kernels/cpu/hif4/hif4_kernels.hpp"
#include "kernels/cpu/hif4/hif4_lanes-inl.h"

HWY_BEFORE_NAMESPACE();
namespace qexact::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Fake-quant outputs of a line block, natural vector v to out + v * N elements of dtype kDt.
// A finite block's values c * step have at most 3 x 3 significant bits and fp32's exponent
// range, so their bf16 is their top half, exactly: no rounding and no NaN case. Those halves
// go out two natural vectors at a time, on AVX-512 one 64-byte streaming store per pair when
// the output is 64-byte aligned (it is not read again: no line is fetched for it).
template <DType kDt>
struct FakeQuantOutput {
  static constexpr std::size_t kSize = kDt == DType::f32 ? 4 : 2;
  using D16 = hn::Rebind<std::uint16_t, Hif4DF>;
  std::uint8_t* out;
  hn::Vec<D16> even_half{};
  HWY_INLINE void Bits(std::size_t, Hif4MF, Hif4MF) {}
  HWY_INLINE void Codes(std::size_t v, Hif4VF magic, Hif4VI sign, Hif4VF step) {
    const Hif4VF value = Hif4Value(Hif4CodeOfMagic(magic), sign, step);
    if constexpr (kDt != DType::bf16) {
      StoreNarrowed(Hif4DF(), kDt, value, out + v * kHif4Lanes * kSize);
    } else {
      const hn::RebindToUnsigned<Hif4DF> du;
      const auto half = hn::TruncateTo(D16(), hn::ShiftRight<16>(hn::BitCast(du, value)));
      std::uint8_t* at = out + v * kHif4Lanes * kSize;
#if HWY_TARGET <= HWY_AVX3
      if (v % 2 == 0) {
        even_half = half;
        return;
      }
      const hn::Full512<std::uint16_t> d512;
      const auto pair = hn::Combine(d512, half, even_half);
      auto* pair_at = reinterpret_cast<std::uint16_t*>(at - kHif4Lanes * kSize);
      if ((reinterpret_cast<std::uintptr_t>(pair_at) & 63) == 0) {
        hn::Stream(pair, d512, pair_at);
      } else {
        hn::StoreU(pair, d512, pair_at);
      }
#else
      hn::StoreU(half, D16(), reinterpret_cast<std::uint16_t*>(at));
#endif
    }
  }
#if HWY_TARGET != HWY_SCALAR
  // The bf16 path's chunk q: the even elements' results in the low halves of the lanes.
  HWY_INLINE void Pairs(std::size_t q, const Hif4Halves& even, const Hif4Halves& odd) {
    const Hif4DI di;
    const Hif4DU du;
    auto signed_value = [&](const Hif4Halves& h) {
      const Hif4VI magnitude = hn::BitCast(di, hn::Mul(Hif4CodeOfMagic(h.magic), h.step));
      return hn::OrAnd(magnitude, h.sign, hn::Set(di, static_cast<std::int32_t>(0x80000000u)));
    };
    const Hif4VI halves = Hif4BitSelect(hn::Set(di, static_cast<std::int32_t>(0xFFFF0000u)), signed_value(odd),
                                            hn::BitCast(di, hn::ShiftRight<16>(hn::BitCast(du, signed_value(even)))));
    auto* at = reinterpret_cast<std::uint32_t*>(out + q * 2 * kHif4Lanes * kSize);
    if ((reinterpret_cast<std::uintptr_t>(at) & (sizeof(std::uint32_t) * kHif4Lanes - 1)) == 0) {
      hn::Stream(hn::BitCast(du, halves), du, at);
    } else {
      hn::StoreU(hn::BitCast(du, halves), du, at);
    }
  }
#endif
  HWY_INLINE void NaNs() {
    const Hif4VF nan = hn::BitCast(Hif4DF(), hn::Set(Hif4DI(), kHif4NaNBits));
    for (std::size_t v = 0; v < 64 / kHif4Lanes; ++v) StoreNarrowed(Hif4DF(), kDt, nan, out + v * kHif4Lanes * kSize);
  }
};

template <DType kDt>
HWY_INLINE void FakeQuantLinesAs(const Hif4Plan& p, std::uint8_t* out, std::int64_t first, std::int64_t last) {
  constexpr auto kBlockBytes = static_cast<std::int64_t>(kHif4Block * FakeQuantOutput<kDt>::kSize);
  // x: the block's fp32 values, or its bf16 elements in place.
  auto emit = [&](std::int64_t block, std::size_t i, const Hif4LineBatch& b, const auto* x) {
    FakeQuantOutput<kDt> o{out + block * kBlockBytes};
    if (b.non_finite[i]) {
      o.NaNs();
    } else {
      Hif4QuantizeLine<true>(x, b, i, o);
    }
  };
#if HWY_TARGET != HWY_SCALAR
  if (kDt == DType::bf16 && p.axis_stride == 1) {
    Hif4ForBf16LineBatches(p, first, last, emit);
  } else {
    Hif4ForLineBatches(p, first, last, emit);
  }
#else
  Hif4ForLineBatches(p, first, last, emit);
#endif
  hwy::FlushStream();  // the streamed lines are visible to other threads once this returns
}

void Hif4FakeQuantLines(const Hif4Plan& p, std::uint8_t* out, std::int64_t first, std::int64_t last) {
  switch (p.dtype) {
    case DType::bf16: return FakeQuantLinesAs<DType::bf16>(p, out, first, last);
    case DType::f16: return FakeQuantLinesAs<DType::f16>(p, out, first, last);
    default: return FakeQuantLinesAs<DType::f32>(p, out, first, last);
  }
}

// N blocks side by side, one per lane: element k of the block in lane c is lane c of row k.
// Input rows start every src_row bytes from src (dtype dt), output rows every dst_row bytes
// from dst; only the first `lanes` lanes of each output row are written.
HWY_INLINE void FakeQuantColumnBlocks(DType dt, const std::uint8_t* src, std::int64_t src_row, std::uint8_t* dst,
                                      std::int64_t dst_row, std::size_t lanes) {
  const Hif4DF df;
  const Hif4DI di;
  const std::size_t N = hn::Lanes(df);
  const std::size_t esize = dt == DType::f32 ? 4 : 2;
  auto row_bits = [&](int k) { return hn::BitCast(di, LoadWidened(df, dt, src + k * src_row)); };

  HWY_ALIGN std::int32_t max4[16 * 16];  // [sub-group][lane]: fp32 bits of the sub-group's max
  Hif4VI block_max = hn::Zero(di), raw_max = hn::Zero(di);
  for (int j = 0; j < 16; ++j) {
    Hif4VI m4 = hn::Zero(di);
    for (int k = 4 * j; k < 4 * j + 4; ++k) {
      const Hif4VI bits = row_bits(k);
      raw_max = hn::Max(raw_max, hn::And(bits, hn::Set(di, 0x7FFFFFFF)));
      m4 = hn::Max(m4, Hif4FiniteMagnitude(bits));
    }
    hn::Store(m4, di, max4 + static_cast<std::size_t>(j) * N);
    block_max = hn::Max(block_max, m4);
  }
  const Hif4MF non_finite = hn::RebindMask(df, hn::Gt(raw_max, hn::Set(di, kHif4LargestFinite)));
  const Hif4VF nan = hn::BitCast(df, hn::Set(di, kHif4NaNBits));
  const Hif4Scale scale = Hif4ScaleOf(hn::BitCast(df, block_max));

  HWY_ALIGN std::uint8_t partial[16 * 4];
  for (int g = 0; g < 8; ++g) {
    const Hif4VI m8 = hn::Max(hn::Load(di, max4 + static_cast<std::size_t>(2 * g) * N),
                              hn::Load(di, max4 + static_cast<std::size_t>(2 * g + 1) * N));
    const Hif4MF d8 = Hif4L2Bit(hn::BitCast(df, m8), scale.rec);
    const Hif4VF down8 = Hif4Halve(d8, hn::Set(df, 1.0f));
    for (int j = 2 * g; j < 2 * g + 2; ++j) {
      const Hif4VF m4 = hn::BitCast(df, hn::Load(di, max4 + static_cast<std::size_t>(j) * N));
      const Hif4MF d4 = Hif4L3Bit(m4, scale.rec, down8);
      const Hif4VF r = Hif4CodeMultiplier(hn::Mul(scale.rec, hn::Set(df, 4.0f)), Hif4Halve(d4, down8));
      const Hif4VF step = Hif4Step(scale.value, d8, d4);
      for (int k = 4 * j; k < 4 * j + 4; ++k) {
        const Hif4VI bits = row_bits(k);
        const Hif4VF code = Hif4CodeOfMagic(Hif4CodeMagic(hn::BitCast(df, Hif4FiniteMagnitude(bits)), r));
        const Hif4VF v = hn::IfThenElse(non_finite, nan, Hif4Value(code, Hif4Sign(bits), step));
        if (lanes == N) {
          StoreNarrowed(df, dt, v, dst + k * dst_row);
        } else {
          StoreNarrowed(df, dt, v, partial);
          std::memcpy(dst + k * dst_row, partial, lanes * esize);
        }
      }
    }
  }
}

void Hif4FakeQuantColumns(const Hif4Plan& p, std::uint8_t* out, std::int64_t first, std::int64_t last) {
  const Hif4DF df;
  const auto N = static_cast<std::int64_t>(hn::Lanes(df));
  const auto esize = static_cast<std::int64_t>(p.esize);
  const std::int64_t chunks = p.column_chunks();
  const std::int64_t dst_row = p.inner * esize;
  HWY_ALIGN std::uint8_t tile[64 * kHif4ColumnChunk * 4];  // [row][column], zero padded
  for (std::int64_t item = first; item < last; ++item) {
    const std::int64_t line_block = item / chunks;
    const std::int64_t o = line_block / p.blocks_per_line;
    const std::int64_t l = line_block % p.blocks_per_line * kHif4Block;
    const std::int64_t i0 = item % chunks * kHif4ColumnChunk;
    const std::int64_t width = std::min(kHif4ColumnChunk, p.inner - i0);
    std::uint8_t* dst = out + ((o * p.length + l) * p.inner + i0) * esize;

    std::int64_t done = 0;  // columns read straight from the input: whole vectors of unit stride
    if (p.inner_dims.unit_stride()) {
      const std::uint8_t* src = p.data + p.offset(o, l, i0) * esize;
      for (; done + N <= width; done += N)
        FakeQuantColumnBlocks(p.dtype, src + done * esize, p.axis_stride * esize, dst + done * esize, dst_row,
                              static_cast<std::size_t>(N));
    }
    if (done == width) continue;
    // The other columns are gathered into the tile, whose unused lanes hold zero blocks.
    const std::int64_t columns = width - done;
    std::memset(tile, 0, sizeof tile);
    std::int64_t column_offset[kHif4ColumnChunk];
    for (std::int64_t c = 0; c < columns; ++c) column_offset[c] = p.offset(o, l, i0 + done + c);
    for (std::int64_t k = 0; k < kHif4Block; ++k)
      for (std::int64_t c = 0; c < columns; ++c)
        std::memcpy(tile + (k * kHif4ColumnChunk + c) * esize, p.data + (column_offset[c] + k * p.axis_stride) * esize,
                    p.esize);
    for (std::int64_t c = 0; c < columns; c += N)
      FakeQuantColumnBlocks(p.dtype, tile + c * esize, kHif4ColumnChunk * esize, dst + (done + c) * esize, dst_row,
                            static_cast<std::size_t>(std::min(N, columns - c)));
  }
}

}  // namespace qexact::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qexact::kernels {
HWY_EXPORT(Hif4FakeQuantLines);
HWY_EXPORT(Hif4FakeQuantColumns);

void hif4_fake_quant_lines(const Hif4Plan& p, std::uint8_t* out, std::int64_t first, std::int64_t last) {
  HWY_DYNAMIC_DISPATCH(Hif4FakeQuantLines)(p, out, first, last);
}
void hif4_fake_quant_columns(const Hif4Plan& p, std::uint8_t* out, std::int64_t first, std::int64_t last) {
  HWY_DYNAMIC_DISPATCH(Hif4FakeQuantColumns)(p, out, first, last);
}
}  // namespace qexact::kernels
#endif
