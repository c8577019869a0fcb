// Fast int8 dequantize (all three int8 families): each payload value times its domain's scale,
// float(q) * scale, one fp32 multiply as in the contract. A unit is a run of payload values in
// C order that share one scale.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/int8/int8_dequantize.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/common/float_lanes-inl.h"
#include "kernels/cpu/int8/int8_plan.hpp"
#include "qexact/formats/fp16.hpp"

HWY_BEFORE_NAMESPACE();
namespace qexact::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

HWY_INLINE std::int64_t ScaleIndex(const Int8DequantPlan& p, std::int64_t run) {
  if (p.family != Family::int8_block) return run;  // a token row, or a group in C order
  const std::int64_t n = run % p.heads;
  const std::int64_t s = (run / p.heads) % p.seq;
  const std::int64_t b = run / (p.heads * p.seq);
  return (b * p.heads + n) * p.blocks + s / p.token_block;
}

HWY_INLINE float ScaleValue(const Int8DequantPlan& p, std::int64_t index) {
  const std::int64_t at = p.scale_contiguous ? index : p.scale_view->offset_of(index);
  if (p.f16_scale) {
    std::uint16_t h;
    std::memcpy(&h, p.scale + at * 2, sizeof h);
    return f16_to_f32(h);
  }
  float f;
  std::memcpy(&f, p.scale + at * 4, sizeof f);
  return f;
}

void DequantizeInt8Runs(const Int8DequantPlan& p, std::int64_t first, std::int64_t last) {
  const hn::ScalableTag<float> df;
  const hn::Rebind<std::int32_t, decltype(df)> di;
  const hn::Rebind<std::int8_t, decltype(df)> d8;
  const auto N = static_cast<std::int64_t>(hn::Lanes(df));
  for (std::int64_t u = first; u < last; ++u) {
    const float scale = ScaleValue(p, ScaleIndex(p, u));
    float* out = p.out + u * p.run;
    if (p.payload_contiguous) {
      const std::int8_t* q = p.payload + u * p.run;
      const auto vs = hn::Set(df, scale);
      PrefetchAheadBytes(q, p.run);
      std::int64_t i = 0;
      // The output is not read again: streaming stores (no read for ownership of its lines)
      // where the destination is vector-aligned, as it is for rows of a multiple of N values
      // in a Tensor's 64-byte aligned storage.
      const bool stream = reinterpret_cast<std::uintptr_t>(out) % (N * sizeof(float)) == 0;
      for (; i + N <= p.run; i += N) {
        const auto v = hn::Mul(hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, q + i))), vs);
        if (stream) hn::Stream(v, df, out + i);
        else hn::StoreU(v, df, out + i);
      }
      for (; i < p.run; ++i) out[i] = static_cast<float>(q[i]) * scale;
    } else {
      const std::int64_t start = p.payload_view->offset_of(u * p.run);
      for (std::int64_t i = 0; i < p.run; ++i)
        out[i] = static_cast<float>(p.payload[start + i * p.payload_col_stride]) * scale;
    }
  }
  hwy::FlushStream();  // the streamed lines are visible to other threads once this returns
}

}  // namespace qexact::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qexact::kernels {
HWY_EXPORT(DequantizeInt8Runs);
void dequantize_int8_runs(const Int8DequantPlan& p, std::int64_t first, std::int64_t last) {
  HWY_DYNAMIC_DISPATCH(DequantizeInt8Runs)(p, first, last);
}
}  // namespace qexact::kernels
#endif
