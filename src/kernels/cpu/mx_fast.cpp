// Fast MX quantize and dequantize: shape checks and output layout here, the per-group work in
// the SIMD kernels (mx_quantize.cpp, mx_dequantize.cpp).
#include <cstring>

#include "kernels/cpu/fast.hpp"
#include "kernels/cpu/mx_plan.hpp"
#include "kernels/cpu/parallel.hpp"
#include "kernels/cpu/simd_target.hpp"

namespace qexact::kernels {
void quantize_mx_groups(const MxPlan& p, std::int64_t first, std::int64_t last);
void dequantize_mx_rows(const MxPlan& p, const std::uint8_t* payload, const std::uint8_t* scale, float* out,
                        std::int64_t first, std::int64_t last);
}  // namespace qexact::kernels

namespace qexact::fast {

QuantResult quantize_mx(const Contract& c, const TensorView& x, int threads) {
  validate(c);
  kernels::apply_forced_target();
  QuantResult r;
  r.payload = Tensor(DType::u8, payload_shape(c, x.shape));
  r.scale = Tensor(DType::u8, scale_shape(c, x.shape));  // zero-filled: layout padding stays 0
  r.path = "groupwise";
  if (!is_float_dtype(x.dtype))
    fail(ErrorKind::bad_argument, std::string("quantize takes f32, bf16 or f16 input, got ") + dtype_name(x.dtype));
  const kernels::MxPlan plan = kernels::make_mx_plan(c, x, r.payload.data<std::uint8_t>(), r.scale.data<std::uint8_t>());
  kernels::parallel_for(plan.rows * plan.groups, 2048, threads,
                        [&](std::int64_t b, std::int64_t e) { kernels::quantize_mx_groups(plan, b, e); });
  return r;
}

}  // namespace qexact::fast

namespace qexact::fast {

Tensor dequantize_mx(const Contract& c, const TensorView& payload, const TensorView& scale, const Shape& x_shape,
                     int threads) {
  validate(c);
  kernels::apply_forced_target();
  if (payload.dtype != DType::u8 || scale.dtype != DType::u8)
    fail(ErrorKind::bad_argument, "MX dequantize takes u8 payload and u8 E8M0 scales");
  const Tensor p = payload.is_contiguous() ? Tensor() : contiguous_copy(payload);
  const Tensor s = scale.is_contiguous() ? Tensor() : contiguous_copy(scale);
  Tensor out(DType::f32, x_shape);
  const TensorView shape_only = make_view(DType::f32, x_shape, nullptr);
  const kernels::MxPlan plan = kernels::make_mx_plan(c, shape_only, nullptr, nullptr);
  const auto* pp = static_cast<const std::uint8_t*>(payload.is_contiguous() ? payload.data : p.raw());
  const auto* sp = static_cast<const std::uint8_t*>(scale.is_contiguous() ? scale.data : s.raw());
  kernels::parallel_for(plan.rows, 64, threads, [&](std::int64_t b, std::int64_t e) {
    kernels::dequantize_mx_rows(plan, pp, sp, out.data<float>(), b, e);
  });
  return out;
}

}  // namespace qexact::fast
