// Fast fp8.scaled quantize and dequantize (contracts §9.1): checks, the thread split and the
// non-finite rules here; the runs' SIMD work in fp8_quantize.cpp. Tensor granularity takes an
// amax pass over fixed chunks, then a quantize pass; tile and head_block run bands of rows in
// parallel (each band's amaxes reading memory in order, then its codes from the cache); the
// other granularities run their domains in parallel, each one's amax then its codes. Outputs never depend on the thread count or the
// SIMD target: the amax is a max of bits (order-free) and each domain is one thread's.
#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <hwy/cache_control.h>

#include "contracts/family_table.hpp"
#include "contracts/scale_grain.hpp"
#include "kernels/cpu/common/parallel.hpp"
#include "kernels/cpu/common/simd_target.hpp"
#include "kernels/cpu/fp8_scaled/fp8_fast.hpp"
#include "kernels/cpu/fp8_scaled/fp8_plan.hpp"
#include "qexact/formats/bf16.hpp"
#include "qexact/formats/element.hpp"
#include "qexact/formats/fp16.hpp"

namespace qexact::fast {
namespace {

using kernels::Fp8Plan;
using kernels::Fp8Scale;

// A thread gets at least this many values: below it, thread start-up costs more than it saves.
constexpr std::int64_t kMinValuesPerThread = 1 << 15;
// Tensor granularity's unit of work in both passes.
constexpr std::int64_t kChunk = 1 << 16;

std::int64_t grain_for(std::int64_t values_per_unit) {
  return std::max<std::int64_t>(1, kMinValuesPerThread / std::max<std::int64_t>(1, values_per_unit));
}

float value_at(const Fp8Plan& p, std::int64_t i) {
  const std::uint8_t* at = p.data + i * p.elem_size;
  if (p.dtype == DType::f32) return *reinterpret_cast<const float*>(at);
  const std::uint16_t h = *reinterpret_cast<const std::uint16_t*>(at);
  return p.dtype == DType::bf16 ? bf16_to_f32(h) : f16_to_f32(h);
}

void check_fp8(const Contract& c) {
  validate(c);
  if (c.family != Family::fp8_scaled)
    fail(ErrorKind::bad_argument, std::string("the fp8.scaled kernel was given a ") + family_name(c.family) + " contract");
}

// The error for the first non-finite element in C order.
[[noreturn]] void reject_first_nonfinite(const Fp8Plan& p) {
  std::int64_t i = 0;
  while (i < p.numel && std::isfinite(value_at(p, i))) ++i;
  if (i == p.numel)  // only a given tensor amax was non-finite
    fail(ErrorKind::bad_argument, "fp8.scaled: the given tensor amax is not finite, which nonfinite_input=reject refuses");
  const float v = value_at(p, i);
  std::string where;
  if (p.kind == Granularity::head_block) {
    where = "(b " + std::to_string(i / (p.S * p.H * p.D)) + ", s " + std::to_string(i / (p.H * p.D) % p.S) + ", n " +
            std::to_string(i / p.D % p.H) + ", d " + std::to_string(i % p.D) + ")";
  } else {
    where = "(row " + std::to_string(i / p.cols) + ", column " + std::to_string(i % p.cols) + ")";
  }
  fail(ErrorKind::bad_input, std::string("fp8.scaled takes finite inputs only (nonfinite_input=reject): ") +
                                 (std::isnan(v) ? "NaN" : v > 0 ? "+inf" : "-inf") + " at " + where);
}

// The whole tensor's amax bits: a max over fixed chunks in parallel (order-free).
std::uint32_t tensor_amax_bits(const Fp8Plan& p, int threads) {
  const std::int64_t chunks = (p.numel + kChunk - 1) / kChunk;
  std::vector<std::uint32_t> partial(static_cast<std::size_t>(chunks), 0);
  kernels::parallel_for(chunks, 1, threads, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t k = b; k < e; ++k)
      partial[static_cast<std::size_t>(k)] = kernels::fp8_abs_max_bits(p, k * kChunk, std::min(kChunk, p.numel - k * kChunk));
  });
  return partial.empty() ? 0 : *std::max_element(partial.begin(), partial.end());
}

// The tensor's codes under its one scale, chunk by chunk in parallel.
void quantize_tensor_under(const Fp8Plan& p, const Fp8Scale& s, int threads) {
  const std::int64_t chunks = (p.numel + kChunk - 1) / kChunk;
  kernels::parallel_for(chunks, 1, threads, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t k = b; k < e; ++k) kernels::fp8_quantize_run(p, s, k * kChunk, std::min(kChunk, p.numel - k * kChunk));
  });
}

// A given tensor amax (bits of its magnitude) replaces the amax pass.
void quantize_tensor(const Fp8Plan& p, int threads, const std::uint32_t* given_amax) {
  const std::uint32_t amax = given_amax ? *given_amax : tensor_amax_bits(p, threads);
  if (amax >= 0x7F800000u && !p.propagate) reject_first_nonfinite(p);
  const Fp8Scale s = kernels::fp8_scale_of(p, amax);
  p.scale[0] = s.zero ? 0.0f : s.stored;
  quantize_tensor_under(p, s, threads);
}

// The scale a domain of amax `amax` takes from its given stored scale: the contract's own where
// the two are equal bit for bit (its operand is then the contract's, not one read back from the
// stored form), else the given one read back.
Fp8Scale given_scale_of(const Fp8Plan& p, float given, std::uint32_t amax) {
  const Fp8Scale own = kernels::fp8_scale_of(p, amax);
  const float own_stored = own.zero ? 0.0f : own.stored;
  if (std::bit_cast<std::uint32_t>(given) == std::bit_cast<std::uint32_t>(own_stored)) return own;
  return kernels::fp8_scale_from_stored(p, given, amax);
}

// Quantize with given scales: each domain's amax (for the contract's own scale and the
// non-finite rules), then its codes under the given scale.
void quantize_given(const Fp8Plan& p, const float* given, int threads) {
  if (p.domains > 0) std::memcpy(p.scale, given, static_cast<std::size_t>(p.domains) * sizeof(float));
  if (p.kind == Granularity::tensor) {
    if (p.domains == 0) return;
    const std::uint32_t amax = tensor_amax_bits(p, threads);
    if (amax >= 0x7F800000u && !p.propagate) reject_first_nonfinite(p);
    quantize_tensor_under(p, given_scale_of(p, given[0], amax), threads);
    return;
  }
  std::atomic<bool> nonfinite{false};
  const std::int64_t per_domain = p.domains == 0 ? 1 : std::max<std::int64_t>(1, p.numel / p.domains);
  kernels::parallel_for(p.domains, grain_for(per_domain), threads, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t d = b; d < e && !nonfinite.load(std::memory_order_relaxed); ++d) {
      std::uint32_t amax = 0;
      kernels::fp8_for_each_segment(p, d, [&](std::int64_t off, std::int64_t n) {
        amax = std::max(amax, kernels::fp8_abs_max_bits(p, off, n));
      });
      if (amax >= 0x7F800000u && !p.propagate) {
        nonfinite.store(true);
        return;
      }
      const Fp8Scale s = given_scale_of(p, given[d], amax);
      kernels::fp8_for_each_segment(p, d, [&](std::int64_t off, std::int64_t n) { kernels::fp8_quantize_run(p, s, off, n); });
    }
  });
  if (nonfinite.load()) reject_first_nonfinite(p);
}

void quantize_domains(const Fp8Plan& p, int threads) {
  std::atomic<bool> nonfinite{false};
  // Bands read memory in order, but a tensor of a few bands would leave threads idle: it
  // takes its domains one by one instead (the same bytes either way).
  const std::int64_t bands = p.kind == Granularity::tile || p.kind == Granularity::head_block ? kernels::fp8_band_count(p) : 0;
  if (bands >= 4 * std::max(1, threads)) {
    const std::int64_t per_band = bands == 0 ? 1 : std::max<std::int64_t>(1, p.numel / bands);
    kernels::parallel_for(bands, grain_for(per_band), threads, [&](std::int64_t b, std::int64_t e) {
      if (!kernels::fp8_quantize_bands(p, b, e)) nonfinite.store(true);
    });
  } else {
    const std::int64_t per_domain = p.domains == 0 ? 1 : std::max<std::int64_t>(1, p.numel / p.domains);
    kernels::parallel_for(p.domains, grain_for(per_domain), threads, [&](std::int64_t b, std::int64_t e) {
      if (!kernels::fp8_quantize_domains(p, b, e)) nonfinite.store(true);
    });
  }
  if (nonfinite.load()) reject_first_nonfinite(p);
}

void check_float_input(const TensorView& x) {
  if (!is_float_dtype(x.dtype))
    fail(ErrorKind::bad_argument, std::string("fp8.scaled takes f32, bf16 or f16 input, got ") + dtype_name(x.dtype));
}

// The quantizer after its checks (theirs or quantize.cpp's); `ss` is the scale's checked shape.
std::string run_fp8_scaled(const Contract& c, const TensorView& x, std::uint8_t* payload, float* scale,
                           const Shape& ss, int threads, const float* tensor_amax) {
  kernels::apply_forced_target();
  // The runs are read as consecutive elements: a strided view is copied once.
  Tensor copy;
  const TensorView in = x.is_contiguous() ? x : (copy = contiguous_copy(x)).view();
  Fp8Plan p = kernels::make_fp8_plan(c, in, ss, payload, scale);
  if (tensor_amax && p.kind != Granularity::tensor)
    fail(ErrorKind::bad_argument, "fp8.scaled: a tensor amax was given, but granularity " + scale_grain_name(c.granularity) +
                                      " has no tensor amax");
  if (p.kind != Granularity::tensor) {
    quantize_domains(p, threads);
  } else if (tensor_amax) {
    // The amax of a whole tensor x is part of: its NaN is the one of a many-element reduction.
    p.nan_amax = kernels::fp8_tensor_nan_amax(p.dtype, true);
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(*tensor_amax) & 0x7FFFFFFFu;
    quantize_tensor(p, threads, &bits);
  } else {
    quantize_tensor(p, threads, nullptr);
  }
  return "groupwise";
}

}  // namespace

std::string quantize_fp8_scaled_into(const Contract& c, const TensorView& x, std::uint8_t* payload, float* scale,
                                     int threads, const float* tensor_amax) {
  check_fp8(c);
  check_float_input(x);
  const Shape ss = grain_scale_shape(c.granularity, x.shape, "fp8.scaled");
  return run_fp8_scaled(c, x, payload, scale, ss, threads, tensor_amax);
}

std::string quantize_fp8_scaled_prechecked(const Contract& c, const TensorView& x, const MutableTensorView& payload,
                                           const MutableTensorView& scale, int threads) {
  return run_fp8_scaled(c, x, static_cast<std::uint8_t*>(payload.data), static_cast<float*>(scale.data), scale.shape,
                        threads, nullptr);
}

std::string quantize_fp8_scaled_with_scales_prechecked(const Contract& c, const TensorView& x, const TensorView& given,
                                                       const MutableTensorView& payload,
                                                       const MutableTensorView& scale, int threads) {
  kernels::apply_forced_target();
  Tensor copy, given_copy;
  const TensorView in = x.is_contiguous() ? x : (copy = contiguous_copy(x)).view();
  const TensorView g = given.is_contiguous() ? given : (given_copy = contiguous_copy(given)).view();
  const Fp8Plan p = kernels::make_fp8_plan(c, in, scale.shape, static_cast<std::uint8_t*>(payload.data),
                                           static_cast<float*>(scale.data));
  quantize_given(p, static_cast<const float*>(g.data), threads);
  return "groupwise";
}

void dequantize_fp8_scaled_into(const Contract& c, const TensorView& payload, const TensorView& scale,
                                const Shape& x_shape, float* out, int threads) {
  kernels::apply_forced_target();
  check_fp8(c);
  require_quantized(c, payload, scale, TensorView{}, x_shape);
  Tensor pc, sc;
  const TensorView pv = payload.is_contiguous() ? payload : (pc = contiguous_copy(payload)).view();
  const TensorView sv = scale.is_contiguous() ? scale : (sc = contiguous_copy(scale)).view();
  // The plan's domains walk the payload as they walked the input (one byte per element).
  const TensorView layout{DType::u8, x_shape, contiguous_strides(x_shape), pv.data};
  const Fp8Plan p = kernels::make_fp8_plan(c, layout, scale.shape, nullptr, nullptr);
  const auto* codes = static_cast<const std::uint8_t*>(pv.data);
  const auto* scales = static_cast<const float*>(sv.data);
  // Stored descale: q * s; stored multiplier: q / s (a zero domain's 0 gives 0).
  const bool times = (c.scale_kind == ScaleKind::descale) == (c.stored == StoredScale::computed);
  const bool zero_domains = c.zero_group == ZeroGroup::zero;
  const auto run = [&](float s, std::int64_t off, std::int64_t n) {
    if (!times && zero_domains && s == 0.0f) std::fill(out + off, out + off + n, 0.0f);
    else kernels::fp8_dequantize_run(p.mbits, codes + off, n, s, times, out + off);
  };
  if (p.kind == Granularity::tensor) {
    const std::int64_t chunks = (p.numel + kChunk - 1) / kChunk;
    kernels::parallel_for(chunks, 1, threads, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t k = b; k < e; ++k) run(scales[0], k * kChunk, std::min(kChunk, p.numel - k * kChunk));
      hwy::FlushStream();
    });
    return;
  }
  const std::int64_t per_domain = p.domains == 0 ? 1 : std::max<std::int64_t>(1, p.numel / p.domains);
  kernels::parallel_for(p.domains, grain_for(per_domain), threads, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t d = b; d < e; ++d)
      kernels::fp8_for_each_segment(p, d, [&](std::int64_t off, std::int64_t n) { run(scales[d], off, n); });
    hwy::FlushStream();
  });
}

QuantResult quantize_fp8_scaled(const Contract& c, const TensorView& x, int threads) {
  check_fp8(c);
  const Shape ss = grain_scale_shape(c.granularity, x.shape, "fp8.scaled");
  check_float_input(x);
  QuantResult r;
  r.payload = Tensor::uninitialized(DType::u8, x.shape);
  r.scale = Tensor::uninitialized(DType::f32, ss);
  r.path = run_fp8_scaled(c, x, r.payload.data<std::uint8_t>(), r.scale.data<float>(), ss, threads, nullptr);
  return r;
}

Tensor dequantize_fp8_scaled(const Contract& c, const TensorView& payload, const TensorView& scale,
                             const Shape& x_shape, int threads) {
  Tensor out = Tensor::uninitialized(DType::f32, x_shape);
  dequantize_fp8_scaled_into(c, payload, scale, x_shape, out.data<float>(), threads);
  return out;
}

}  // namespace qexact::fast
