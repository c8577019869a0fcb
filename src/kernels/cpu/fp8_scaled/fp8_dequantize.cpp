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

#include "kernels/cpu/common/float_lanes-inl.h"
#include "kernels/cpu/common/fp8_decode-inl.h"
#include "kernels/cpu/fp8_scaled/fp8_plan.hpp"

HWY_BEFORE_NAMESPACE();
namespace qexact::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <int kMbits, bool kTimes>
HWY_INLINE void DequantizeCodes(const std::uint8_t* codes, std::int64_t n, float s, float* out) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const hn::Rebind<std::uint8_t, decltype(df)> d8;
  constexpr std::int64_t kMax = static_cast<std::int64_t>(hn::MaxLanes(df));
  const std::int64_t N = static_cast<std::int64_t>(hn::Lanes(df));
  const auto vs = hn::Set(df, s);
  const auto canonical = hn::BitCast(df, hn::Set(du, 0x7FC00000u));
  const auto value = [&](const std::uint8_t* at) {
    const auto q = DecodeFp8<kMbits>(df, hn::PromoteTo(du, hn::LoadU(d8, at)));
    const auto v = kTimes ? hn::Mul(q, vs) : hn::Div(q, vs);
    return hn::IfThenElse(hn::IsNaN(v), canonical, v);
  };
  // Streaming stores (the values are not read again: no line is fetched for them) where the
  // destination is aligned; the caller flushes them (fp8_dequantize_run's contract).
  const bool stream = reinterpret_cast<std::uintptr_t>(out) % (N * sizeof(float)) == 0;
  std::int64_t i = 0;
  for (; i + N <= n; i += N) {
    if (i % 64 == 0) PrefetchAhead(codes + i);  // a line of codes at a time, far enough ahead
    if (stream) hn::Stream(value(codes + i), df, out + i);
    else hn::StoreU(value(codes + i), df, out + i);
  }
  if (i < n) {  // the last codes, from a zero-padded copy
    HWY_ALIGN std::uint8_t tail_codes[kMax] = {};
    HWY_ALIGN float tail_values[kMax];
    std::memcpy(tail_codes, codes + i, static_cast<std::size_t>(std::min(n - i, kMax)));
    hn::Store(value(tail_codes), df, tail_values);
    std::memcpy(out + i, tail_values, static_cast<std::size_t>(std::min(n - i, kMax)) * sizeof(float));
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
