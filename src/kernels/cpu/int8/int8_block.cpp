// Fast int8.block kernel (contracts §3): one scale per (b, head, token block) of a (B, S, N, D)
// input. A unit is one (b, token block) with all its heads: its tokens are read in order, each
// token's N runs of D values (contiguous N * D values in a C-order input) reduced into the N
// heads' maxima, the N scales formed, then the same runs (still in cache) quantized. Reading a
// whole token at a time streams through memory; a unit per (b, head, token block) read runs of
// D values one token stride apart, a new page each, which the prefetchers did not keep up with.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/int8/int8_block.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <vector>

#include "kernels/cpu/int8/int8_span-inl.h"

HWY_BEFORE_NAMESPACE();
namespace qexact::kernels::HWY_NAMESPACE {

template <IntRounding kRounding, bool kDivide, DType kRound>
void BlockUnits(const Int8Plan& p, std::int64_t first, std::int64_t last) {
  const std::int64_t seq = p.shape[1], heads = p.shape[2], dim = p.shape[3];
  std::vector<std::uint32_t> amax(static_cast<std::size_t>(heads));
  std::vector<Int8Quotient> q(static_cast<std::size_t>(heads));
  for (std::int64_t u = first; u < last; ++u) {
    if (p.nonfinite->load(std::memory_order_relaxed)) break;
    const std::int64_t blk = u % p.blocks;
    const std::int64_t b = u / p.blocks;
    const std::int64_t s_begin = blk * p.token_block;
    const std::int64_t s_end = std::min(seq, s_begin + p.token_block);
    const auto run = [&](std::int64_t s, std::int64_t n) {
      return Span{p.element(b * p.strides[0] + s * p.strides[1] + n * p.strides[2]), dim, p.col_stride};
    };
    std::fill(amax.begin(), amax.end(), 0u);
    for (std::int64_t s = s_begin; s < s_end; ++s)
      for (std::int64_t n = 0; n < heads; ++n) {
        auto& m = amax[static_cast<std::size_t>(n)];
        m = std::max(m, AbsMaxBits(p.dtype, run(s, n)));
      }
    for (std::int64_t n = 0; n < heads; ++n) {
      const float a = std::bit_cast<float>(amax[static_cast<std::size_t>(n)]);
      if (amax[static_cast<std::size_t>(n)] >= kNonFiniteBits) {
        p.nonfinite->store(true, std::memory_order_relaxed);
        hwy::FlushStream();
        return;
      }
      q[static_cast<std::size_t>(n)] = int8_scale_domain(p, a, (b * heads + n) * p.blocks + blk);
    }
    for (std::int64_t s = s_begin; s < s_end; ++s)
      for (std::int64_t n = 0; n < heads; ++n)
        QuantizeSpan<kRounding, kDivide, kRound>(p, q[static_cast<std::size_t>(n)], p.dtype, run(s, n),
                                                 p.payload + ((b * seq + s) * heads + n) * dim);
  }
  hwy::FlushStream();  // the streamed payload is visible to other threads once this returns
}

void QuantizeInt8BlockUnits(const Int8Plan& p, std::int64_t first, std::int64_t last) {
  WithElementArithmetic(p, [&]<IntRounding kRounding, bool kDivide, DType kRound>() {
    BlockUnits<kRounding, kDivide, kRound>(p, first, last);
  });
}

}  // namespace qexact::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qexact::kernels {
HWY_EXPORT(QuantizeInt8BlockUnits);
void quantize_int8_block_units(const Int8Plan& p, std::int64_t first, std::int64_t last) {
  HWY_DYNAMIC_DISPATCH(QuantizeInt8BlockUnits)(p, first, last);
}
}  // namespace qexact::kernels
#endif
