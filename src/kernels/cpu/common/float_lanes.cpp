// Array forms of float_lanes-inl.h, one body per SIMD target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/common/float_lanes.cpp"
#include "kernels/cpu/common/float_lanes.hpp"

#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/common/float_lanes-inl.h"

HWY_BEFORE_NAMESPACE();
namespace qexact::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using ArrayDF = hn::CappedTag<float, 16>;

void WidenToF32(DType dt, const void* in, std::int64_t n, float* out) {
  const ArrayDF df;
  const auto N = static_cast<std::int64_t>(hn::Lanes(df));
  const auto esize = static_cast<std::int64_t>(dtype_size(dt));
  const auto* src = static_cast<const std::uint8_t*>(in);
  HWY_ALIGN std::uint8_t pad[16 * 4];
  HWY_ALIGN float tail[16];
  for (std::int64_t i = 0; i < n; i += N) {
    const std::int64_t count = std::min(N, n - i);
    if (count == N) {
      hn::StoreU(LoadWidened(df, dt, src + i * esize), df, out + i);
      continue;
    }
    std::memset(pad, 0, sizeof pad);
    std::memcpy(pad, src + i * esize, static_cast<std::size_t>(count * esize));
    hn::Store(LoadWidened(df, dt, pad), df, tail);
    std::memcpy(out + i, tail, static_cast<std::size_t>(count) * sizeof(float));
  }
}

void NarrowFromF32(DType dt, const float* in, std::int64_t n, void* out) {
  const ArrayDF df;
  const auto N = static_cast<std::int64_t>(hn::Lanes(df));
  const auto esize = static_cast<std::int64_t>(dtype_size(dt));
  auto* dst = static_cast<std::uint8_t*>(out);
  HWY_ALIGN float pad[16];
  HWY_ALIGN std::uint8_t tail[16 * 4];
  for (std::int64_t i = 0; i < n; i += N) {
    const std::int64_t count = std::min(N, n - i);
    if (count == N) {
      StoreNarrowed(df, dt, hn::LoadU(df, in + i), dst + i * esize);
      continue;
    }
    std::fill(pad, pad + 16, 0.0f);
    std::memcpy(pad, in + i, static_cast<std::size_t>(count) * sizeof(float));
    StoreNarrowed(df, dt, hn::Load(df, pad), tail);
    std::memcpy(dst + i * esize, tail, static_cast<std::size_t>(count * esize));
  }
}

}  // namespace qexact::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qexact::kernels {
HWY_EXPORT(WidenToF32);
HWY_EXPORT(NarrowFromF32);

void widen_to_f32(DType dt, const void* in, std::int64_t n, float* out) {
  HWY_DYNAMIC_DISPATCH(WidenToF32)(dt, in, n, out);
}
void narrow_from_f32(DType dt, const float* in, std::int64_t n, void* out) {
  HWY_DYNAMIC_DISPATCH(NarrowFromF32)(dt, in, n, out);
}
}  // namespace qexact::kernels
#endif
