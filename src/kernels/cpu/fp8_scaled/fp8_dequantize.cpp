// The fast fp8.scaled dequantizer's SIMD part (google/highway, one body per x86 target,
// dispatched at run time): a run of codes of one domain decoded on their bits (exact), then
// the contract's one fp32 operation with the stored scale, a multiply or a real IEEE division,
// a NaN result canonical (0x7FC00000).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/fp8_scaled/fp8_dequantize.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/common/fp8_decode-inl.h"
#include "kernels/cpu/fp8_scaled/fp8_plan.hpp"

HWY_BEFORE_NAMESPACE();
namespace qexact::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ScaleFp8Vectors, then the last codes from a zero-padded copy.
template <int kMbits, bool kTimes>
HWY_INLINE void DequantizeCodes(const std::uint8_t* codes, std::int64_t n, float s, float* out) {
  const hn::ScalableTag<float> df;
  constexpr std::int64_t kMax = static_cast<std::int64_t>(hn::MaxLanes(df));
  const std::int64_t i = ScaleFp8Vectors<kMbits, kTimes>(df, codes, s, 0, n, out);
  if (i < n) {
    HWY_ALIGN std::uint8_t tail_codes[kMax] = {};
    HWY_ALIGN float tail_values[kMax];
    const auto count = static_cast<std::size_t>(std::min(n - i, kMax));
    std::memcpy(tail_codes, codes + i, count);
    hn::Store(ScaledFp8<kMbits, kTimes>(df, tail_codes, hn::Set(df, s)), df, tail_values);
    std::memcpy(out + i, tail_values, count * sizeof(float));
  }
}

void Fp8DequantizeRun(int mbits, const std::uint8_t* codes, std::int64_t n, float s, bool times, float* out) {
  if (mbits == 3) {
    if (times) DequantizeCodes<3, true>(codes, n, s, out);
    else DequantizeCodes<3, false>(codes, n, s, out);
  } else {
    if (times) DequantizeCodes<2, true>(codes, n, s, out);
    else DequantizeCodes<2, false>(codes, n, s, out);
  }
}

}  // namespace qexact::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qexact::kernels {
HWY_EXPORT(Fp8DequantizeRun);
void fp8_dequantize_run(int mbits, const std::uint8_t* codes, std::int64_t n, float s, bool times, float* out) {
  HWY_DYNAMIC_DISPATCH(Fp8DequantizeRun)(mbits, codes, n, s, times, out);
}
}  // namespace qexact::kernels
#endif
