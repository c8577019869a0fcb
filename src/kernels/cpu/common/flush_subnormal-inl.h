// DAZ / FTZ on fp32 bits in vectors (a Highway per-target header: foreach_target includes it once
// per target): MX's ftz=true reads subnormal inputs as zeros, XLA:CPU's NVFP4 steps flush their
// operands and results. A subnormal lane becomes the zero of its sign, as x86's MXCSR does.
#if defined(QEXACT_KERNELS_CPU_COMMON_FLUSH_SUBNORMAL_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef QEXACT_KERNELS_CPU_COMMON_FLUSH_SUBNORMAL_INL_H_
#undef QEXACT_KERNELS_CPU_COMMON_FLUSH_SUBNORMAL_INL_H_
#else
#define QEXACT_KERNELS_CPU_COMMON_FLUSH_SUBNORMAL_INL_H_
#endif

#include <cstdint>

#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace qexact::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The bits (32-bit lanes) of fp32 values with each subnormal replaced by the zero of its sign.
template <class DI>
HWY_INLINE hn::Vec<DI> FlushSubnormalBits(DI di, hn::Vec<DI> bits) {
  const auto tiny = hn::Lt(hn::And(bits, hn::Set(di, 0x7FFFFFFF)), hn::Set(di, 0x00800000));
  return hn::IfThenElse(tiny, hn::And(bits, hn::Set(di, static_cast<std::int32_t>(0x80000000u))), bits);
}

}  // namespace qexact::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif
