// Fast int8.group kernel (ggml q8_0): one scale per `group` consecutive values of a row. A
// unit is one group, numbered in C order (the scale's flat index): reduce, form the scale,
// quantize the group again from cache.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/int8/int8_group.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/cpu/int8/int8_span-inl.h"

HWY_BEFORE_NAMESPACE();
namespace qexact::kernels::HWY_NAMESPACE {

// Groups are handled in batches: reduce every group of the batch, form their scales (the
// scalar divisions of independent groups overlap), then quantize the batch, still in L1.
constexpr std::int64_t kBatch = 64;

template <IntRounding kRounding, bool kDivide>
void GroupUnits(const Int8Plan& p, std::int64_t first, std::int64_t last) {
  const std::int64_t per_row = p.cols / p.group;
  std::int64_t row = first / per_row, g = first % per_row;
  std::int64_t row_start = p.rows.offset(row);
  Span spans[kBatch];
  std::uint32_t amax[kBatch];
  for (std::int64_t batch = first; batch < last; batch += kBatch) {
    if (p.nonfinite->load(std::memory_order_relaxed)) break;
    const std::int64_t size = std::min(kBatch, last - batch);
    std::uint32_t any = 0;
    for (std::int64_t j = 0; j < size; ++j) {
      spans[j] = Span{p.element(row_start + g * p.group * p.col_stride), p.group, p.col_stride};
      amax[j] = AbsMaxBits(p.dtype, spans[j]);
      any = std::max(any, amax[j]);
      if (++g == per_row && batch + j + 1 < last) {
        g = 0;
        row_start = p.rows.offset(++row);
      }
    }
    if (any >= kNonFiniteBits) {
      p.nonfinite->store(true, std::memory_order_relaxed);
      break;
    }
    Int8Quotient q[kBatch];
    for (std::int64_t j = 0; j < size; ++j) q[j] = int8_scale_domain(p, std::bit_cast<float>(amax[j]), batch + j);
    for (std::int64_t j = 0; j < size; ++j)
      QuantizeSpan<kRounding, kDivide>(p, q[j], p.dtype, spans[j], p.payload + (batch + j) * p.group);
  }
  hwy::FlushStream();  // the streamed payload is visible to other threads once this returns
}

void QuantizeInt8GroupUnits(const Int8Plan& p, std::int64_t first, std::int64_t last) {
  WithElementArithmetic(p,
                        [&]<IntRounding kRounding, bool kDivide>() { GroupUnits<kRounding, kDivide>(p, first, last); });
}

}  // namespace qexact::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qexact::kernels {
HWY_EXPORT(QuantizeInt8GroupUnits);
void quantize_int8_group_units(const Int8Plan& p, std::int64_t first, std::int64_t last) {
  HWY_DYNAMIC_DISPATCH(QuantizeInt8GroupUnits)(p, first, last);
}
}  // namespace qexact::kernels
#endif
