// Fast int8.block kernel (contracts §3): one scale per (b, head, token block) of a (B, S, N, D)
// input. A unit is one such domain: its token_block runs of D values are reduced, the scale is
// formed, then the runs (still in cache) are quantized. Units are numbered (b, block, head) so
// that consecutive units of a thread read neighbouring runs of the same tokens.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/int8_block.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/cpu/int8_span-inl.h"

HWY_BEFORE_NAMESPACE();
namespace qexact::kernels::HWY_NAMESPACE {

template <IntRounding kRounding, bool kDivide>
void BlockUnits(const Int8Plan& p, std::int64_t first, std::int64_t last) {
  const std::int64_t seq = p.shape[1], heads = p.shape[2], dim = p.shape[3];
  for (std::int64_t u = first; u < last; ++u) {
    if (p.nonfinite->load(std::memory_order_relaxed)) return;
    const std::int64_t n = u % heads;
    const std::int64_t blk = (u / heads) % p.blocks;
    const std::int64_t b = u / (heads * p.blocks);
    const std::int64_t s_begin = blk * p.token_block;
    const std::int64_t s_end = std::min(seq, s_begin + p.token_block);
    const auto run = [&](std::int64_t s) {
      return Span{p.element(b * p.strides[0] + s * p.strides[1] + n * p.strides[2]), dim, p.col_stride};
    };
    std::uint32_t amax = 0;
    for (std::int64_t s = s_begin; s < s_end; ++s) amax = std::max(amax, AbsMaxBits(p.dtype, run(s)));
    if (amax >= kNonFiniteBits) {
      p.nonfinite->store(true, std::memory_order_relaxed);
      return;
    }
    const Int8Quotient q = int8_scale_domain(p, std::bit_cast<float>(amax), (b * heads + n) * p.blocks + blk);
    for (std::int64_t s = s_begin; s < s_end; ++s)
      QuantizeSpan<kRounding, kDivide>(p, q, p.dtype, run(s), p.payload + ((b * seq + s) * heads + n) * dim);
  }
}

void QuantizeInt8BlockUnits(const Int8Plan& p, std::int64_t first, std::int64_t last) {
  WithElementArithmetic(p,
                        [&]<IntRounding kRounding, bool kDivide>() { BlockUnits<kRounding, kDivide>(p, first, last); });
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
