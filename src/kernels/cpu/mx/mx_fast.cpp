// Fast MX quantize and dequantize: shape checks and output layout here, the per-group work in
// the SIMD kernels (mx_quantize.cpp, mx_dequantize.cpp).
#include <cstring>

#include "kernels/cpu/common/parallel.hpp"
#include "kernels/cpu/common/simd_target.hpp"
#include "kernels/cpu/mx/mx_fast.hpp"
#include "kernels/cpu/mx/mx_plan.hpp"

namespace qexact::kernels {
void quantize_mx_groups(const MxPlan& p, std::int64_t first, std::int64_t last);
void dequantize_mx_rows(const MxPlan& p, const std::uint8_t* payload, const std::uint8_t* scale, float* out,
                        std::int64_t first, std::int64_t last);
}  // namespace qexact::kernels

namespace qexact::fast {

std::string quantize_mx_into(const Contract& c, const TensorView& x, std::uint8_t* payload, std::uint8_t* scale,
                             int threads) {
  validate(c);
  if (!is_float_dtype(x.dtype))
    fail(ErrorKind::bad_argument, std::string("quantize takes f32, bf16 or f16 input, got ") + dtype_name(x.dtype));
  const std::vector<OutputSpec> specs = output_specs(c, x.shape);
  return quantize_mx_prechecked(c, x, make_mutable_view(specs[0].dtype, specs[0].shape, payload),
                                make_mutable_view(specs[1].dtype, specs[1].shape, scale), threads);
}

std::string quantize_mx_prechecked(const Contract& c, const TensorView& x, const MutableTensorView& payload,
                                   const MutableTensorView& scale, int threads) {
  kernels::apply_forced_target();
  auto* scale_bytes_at = static_cast<std::uint8_t*>(scale.data);
  const kernels::MxPlan plan =
      kernels::make_mx_plan(c, x, static_cast<std::uint8_t*>(payload.data), scale_bytes_at);
  // The kernels write one byte per (row, group); the layouts' padding (pairs with an odd group
  // count, padded and swizzled past the rows or groups) is zero. The scales are 1/32 of the
  // payload, so one pass over them all costs little.
  const std::int64_t scale_bytes = shape_numel(scale.shape);
  if (scale_bytes != plan.rows * plan.groups) std::memset(scale_bytes_at, 0, static_cast<std::size_t>(scale_bytes));
  kernels::parallel_for(plan.rows * plan.groups, 2048, threads,
                        [&](std::int64_t b, std::int64_t e) { kernels::quantize_mx_groups(plan, b, e); });
  return "groupwise";
}

QuantResult quantize_mx(const Contract& c, const TensorView& x, int threads) {
  validate(c);
  QuantResult r;
  r.payload = Tensor::uninitialized(DType::u8, payload_shape(c, x.shape));
  r.scale = Tensor::uninitialized(DType::u8, scale_shape(c, x.shape));
  r.path = quantize_mx_into(c, x, r.payload.data<std::uint8_t>(), r.scale.data<std::uint8_t>(), threads);
  return r;
}

void dequantize_mx_into(const Contract& c, const TensorView& payload, const TensorView& scale, const Shape& x_shape,
                        float* out, int threads) {
  validate(c);
  kernels::apply_forced_target();
  if (payload.dtype != DType::u8 || scale.dtype != DType::u8)
    fail(ErrorKind::bad_argument, "MX dequantize takes u8 payload and u8 E8M0 scales");
  const Tensor p = payload.is_contiguous() ? Tensor() : contiguous_copy(payload);
  const Tensor s = scale.is_contiguous() ? Tensor() : contiguous_copy(scale);
  const TensorView shape_only = make_view(DType::f32, x_shape, nullptr);
  const kernels::MxPlan plan = kernels::make_mx_plan(c, shape_only, nullptr, nullptr);
  const auto* pp = static_cast<const std::uint8_t*>(payload.is_contiguous() ? payload.data : p.raw());
  const auto* sp = static_cast<const std::uint8_t*>(scale.is_contiguous() ? scale.data : s.raw());
  kernels::parallel_for(plan.rows, 64, threads, [&](std::int64_t b, std::int64_t e) {
    kernels::dequantize_mx_rows(plan, pp, sp, out, b, e);
  });
}

Tensor dequantize_mx(const Contract& c, const TensorView& payload, const TensorView& scale, const Shape& x_shape,
                     int threads) {
  Tensor out = Tensor::uninitialized(DType::f32, x_shape);
  dequantize_mx_into(c, payload, scale, x_shape, out.data<float>(), threads);
  return out;
}

}  // namespace qexact::fast
