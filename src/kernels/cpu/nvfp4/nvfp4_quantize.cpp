// Fast nvfp4 quantizer: one SIMD body compiled for every x86 target (google/highway), dispatched
// at run time. Per block of 16 it reduces |x| on the fp32 bits, derives the E4M3 scale and the
// multiplier in scalar fp32 (nvfp4_block_math.hpp), then multiplies, clamps and rounds the
// elements to E2M1 by comparisons with the round-to-nearest-even thresholds. A block whose amax
// or multiplier is not finite (NaN, inf, a tensor scale of 0 or inf) goes element by element
// through the scalar steps, which carry torchao's NaN bits. It shares no code with reference/.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/nvfp4/nvfp4_quantize.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cmath>

#include "kernels/cpu/common/float_lanes-inl.h"
#include "kernels/cpu/common/scalar_load.hpp"
#include "kernels/cpu/nvfp4/nvfp4_block_math.hpp"
#include "kernels/cpu/nvfp4/nvfp4_plan.hpp"

HWY_BEFORE_NAMESPACE();
namespace qexact::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// At most one block per vector: the block loops below step through 16 elements.
using DF16 = hn::CappedTag<float, 16>;
using DI16 = hn::RebindToSigned<DF16>;

template <DType kDtype>
std::uint32_t AbsMaxBitsOf(const std::uint8_t* data, std::int64_t first, std::int64_t last) {
  const DF16 df;
  const DI16 di;
  constexpr std::size_t kSize = kDtype == DType::f32 ? 4 : 2;
  const std::int64_t n = static_cast<std::int64_t>(hn::Lanes(df));
  auto m = hn::Zero(di);
  std::int64_t i = first;
  for (; i + n <= last; i += n) {
    PrefetchAhead(data + i * static_cast<std::int64_t>(kSize));
    const auto b = hn::BitCast(di, LoadWidened(df, kDtype, data + i * static_cast<std::int64_t>(kSize)));
    m = hn::Max(m, hn::And(b, hn::Set(di, 0x7FFFFFFF)));
  }
  std::uint32_t r = static_cast<std::uint32_t>(hn::GetLane(hn::MaxOfLanes(di, m)));
  for (; i < last; ++i) {
    const std::uint32_t b = nvfp4::bits(load_scalar_f32(kDtype, data, i)) & 0x7FFFFFFFu;
    if (b > r) r = b;
  }
  return r;
}

std::uint32_t Nvfp4AbsMaxBits(DType dtype, const std::uint8_t* data, std::int64_t first, std::int64_t last) {
  switch (dtype) {
    case DType::f32: return AbsMaxBitsOf<DType::f32>(data, first, last);
    case DType::bf16: return AbsMaxBitsOf<DType::bf16>(data, first, last);
    default: return AbsMaxBitsOf<DType::f16>(data, first, last);
  }
}

// E2M1 codes (int32 lanes) of the finite products v = x * multiplier, already clamped to +/-6
// in magnitude `a`; the sign comes from v (a negative value that rounds to 0 keeps it).
template <class D>
HWY_INLINE hn::Vec<hn::RebindToSigned<D>> E2m1Codes(D df, hn::Vec<D> v) {
  const hn::RebindToSigned<D> di;
  const auto a = hn::Min(hn::Abs(v), hn::Set(df, 6.0f));
  auto code = hn::Zero(di);
  const auto one = hn::Set(di, 1);
  code = hn::Add(code, hn::IfThenElseZero(hn::RebindMask(di, hn::Gt(a, hn::Set(df, 0.25f))), one));
  code = hn::Add(code, hn::IfThenElseZero(hn::RebindMask(di, hn::Ge(a, hn::Set(df, 0.75f))), one));
  code = hn::Add(code, hn::IfThenElseZero(hn::RebindMask(di, hn::Gt(a, hn::Set(df, 1.25f))), one));
  code = hn::Add(code, hn::IfThenElseZero(hn::RebindMask(di, hn::Ge(a, hn::Set(df, 1.75f))), one));
  code = hn::Add(code, hn::IfThenElseZero(hn::RebindMask(di, hn::Gt(a, hn::Set(df, 2.5f))), one));
  code = hn::Add(code, hn::IfThenElseZero(hn::RebindMask(di, hn::Ge(a, hn::Set(df, 3.5f))), one));
  code = hn::Add(code, hn::IfThenElseZero(hn::RebindMask(di, hn::Gt(a, hn::Set(df, 5.0f))), one));
  const auto sign = hn::And(hn::ShiftRight<28>(hn::BitCast(di, v)), hn::Set(di, 8));
  return hn::Or(code, sign);
}

template <DType kDtype>
void QuantizeBlocksOf(const Nvfp4Plan& p, std::int64_t first, std::int64_t last) {
  const DF16 df;
  const DI16 di;
  constexpr std::int64_t kSize = kDtype == DType::f32 ? 4 : 2;
  const int n = static_cast<int>(hn::Lanes(df));
  HWY_ALIGN float x[kNvfp4Block];
  HWY_ALIGN std::int32_t codes[kNvfp4Block];
  for (std::int64_t b = first; b < last; ++b) {
    const std::uint8_t* src = p.data + b * kNvfp4Block * kSize;
    PrefetchAheadBytes(src, kNvfp4Block * kSize);
    auto m = hn::Zero(di);
    for (int i = 0; i < kNvfp4Block; i += n) {
      const auto v = LoadWidened(df, kDtype, src + i * kSize);
      hn::Store(v, df, x + i);
      m = hn::Max(m, hn::And(hn::BitCast(di, v), hn::Set(di, 0x7FFFFFFF)));
    }
    const std::uint32_t amax_bits = static_cast<std::uint32_t>(hn::GetLane(hn::MaxOfLanes(di, m)));
    // torch.amax's NaN is the canonical one; only its E4M3 code (0x7F) matters here.
    const float amax = nvfp4::is_nan_bits(amax_bits) ? nvfp4::value(0x7FC00000u) : nvfp4::value(amax_bits);
    const nvfp4::BlockScale s =
        p.te ? nvfp4::te_block_scale(amax, p.tensor_scale) : nvfp4::block_scale(p.two_level, amax, p.tensor_scale);
    p.scale[b] = s.code;
    std::uint8_t* out = p.payload + b * (kNvfp4Block / 2);
    if (amax_bits < 0x7F800000u && std::isfinite(s.multiplier)) {
      const auto mul = hn::Set(df, s.multiplier);
      for (int i = 0; i < kNvfp4Block; i += n) hn::Store(E2m1Codes(df, hn::Mul(hn::Load(df, x + i), mul)), di, codes + i);
    } else {
      for (int i = 0; i < kNvfp4Block; ++i) codes[i] = nvfp4::e2m1_code(x[i], s.multiplier);
    }
    for (int i = 0; i < kNvfp4Block; i += 2) out[i / 2] = static_cast<std::uint8_t>(codes[i] | (codes[i + 1] << 4));
  }
}

void QuantizeNvfp4Blocks(const Nvfp4Plan& p, std::int64_t first, std::int64_t last) {
  switch (p.dtype) {
    case DType::f32: return QuantizeBlocksOf<DType::f32>(p, first, last);
    case DType::bf16: return QuantizeBlocksOf<DType::bf16>(p, first, last);
    default: return QuantizeBlocksOf<DType::f16>(p, first, last);
  }
}

}  // namespace qexact::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qexact::kernels {
HWY_EXPORT(Nvfp4AbsMaxBits);
HWY_EXPORT(QuantizeNvfp4Blocks);

std::uint32_t nvfp4_abs_max_bits(DType dtype, const std::uint8_t* data, std::int64_t first, std::int64_t last) {
  return HWY_DYNAMIC_DISPATCH(Nvfp4AbsMaxBits)(dtype, data, first, last);
}
void quantize_nvfp4_blocks(const Nvfp4Plan& p, std::int64_t first, std::int64_t last) {
  HWY_DYNAMIC_DISPATCH(QuantizeNvfp4Blocks)(p, first, last);
}
}  // namespace qexact::kernels
#endif
