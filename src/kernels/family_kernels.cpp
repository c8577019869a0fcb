#include "kernels/family_kernels.hpp"

#include "contracts/family_table.hpp"
#include "kernels/cpu/fp8_scaled/fp8_fast.hpp"
#include "kernels/cpu/int8/int8_fast.hpp"
#include "kernels/cpu/mx/mx_fast.hpp"
#include "kernels/cpu/nvfp4/nvfp4_fast.hpp"
#include "qexact/error.hpp"
#include "reference/fp8_scaled_ref.hpp"
#include "reference/int8_ref.hpp"
#include "reference/mx_ref.hpp"
#include "reference/nvfp4_ref.hpp"

namespace qexact {
namespace {

// Adapters from each family's own entry points to the table's signatures.
Tensor mx_ref_dequantize(const Contract& c, const QuantInputs& q, const Shape& x) {
  return ref::dequantize_mx(c, q.payload, q.scale, x);
}
Tensor int8_ref_dequantize(const Contract& c, const QuantInputs& q, const Shape& x) {
  return ref::dequantize_int8(c, q.payload, q.scale, x);
}
std::string mx_fast_quantize(const Contract& c, const TensorView& x, const QuantOutputs& o, int t) {
  return fast::quantize_mx_prechecked(c, x, o.payload, o.scale, t);
}
std::string int8_fast_quantize(const Contract& c, const TensorView& x, const QuantOutputs& o, int t) {
  return fast::quantize_int8_prechecked(c, x, o.payload, o.scale, t);
}
Tensor nvfp4_ref_dequantize(const Contract& c, const QuantInputs& q, const Shape& x) {
  return ref::dequantize_nvfp4(c, q.payload, q.scale, q.tensor_scale, x);
}
std::string nvfp4_fast_quantize(const Contract& c, const TensorView& x, const QuantOutputs& o, int t) {
  return fast::quantize_nvfp4_prechecked(c, x, o.payload, o.scale, o.tensor_scale, t);
}
void nvfp4_fast_dequantize(const Contract& c, const QuantInputs& q, const Shape& x, float* out, int t) {
  fast::dequantize_nvfp4_into(c, q.payload, q.scale, q.tensor_scale, x, out, t);
}
Tensor fp8_ref_dequantize(const Contract& c, const QuantInputs& q, const Shape& x) {
  return ref::dequantize_fp8_scaled(c, q.payload, q.scale, x);
}
std::string fp8_fast_quantize(const Contract& c, const TensorView& x, const QuantOutputs& o, int t) {
  return fast::quantize_fp8_scaled_prechecked(c, x, o.payload, o.scale, t);
}
void fp8_fast_dequantize(const Contract& c, const QuantInputs& q, const Shape& x, float* out, int t) {
  fast::dequantize_fp8_scaled_into(c, q.payload, q.scale, x, out, t);
}
std::string fp8_fast_quantize_with_amax(const Contract& c, const TensorView& x, const QuantOutputs& o, float amax,
                                        int t) {
  return fast::quantize_fp8_scaled_into(c, x, static_cast<std::uint8_t*>(o.payload.data),
                                        static_cast<float*>(o.scale.data), t, &amax);
}
std::string nvfp4_fast_quantize_with_amax(const Contract& c, const TensorView& x, const QuantOutputs& o, float amax,
                                          int t) {
  return fast::quantize_nvfp4_into(c, x, static_cast<std::uint8_t*>(o.payload.data),
                                   static_cast<std::uint8_t*>(o.scale.data), static_cast<float*>(o.tensor_scale.data),
                                   t, &amax);
}
std::string fp8_fast_quantize_with_scales(const Contract& c, const TensorView& x, const TensorView& scale,
                                          const QuantOutputs& o, int t) {
  return fast::quantize_fp8_scaled_with_scales_prechecked(c, x, scale, o.payload, o.scale, t);
}
void mx_fast_dequantize(const Contract& c, const QuantInputs& q, const Shape& x, float* out, int t) {
  fast::dequantize_mx_into(c, q.payload, q.scale, x, out, t);
}
void int8_fast_dequantize(const Contract& c, const QuantInputs& q, const Shape& x, float* out, int t) {
  fast::dequantize_int8_into(c, q.payload, q.scale, x, out, t);
}

const FamilyKernels kRows[] = {
    {Family::mx, ref::quantize_mx, ref::quantize_mx_with_scales, mx_ref_dequantize, mx_fast_quantize,
     mx_fast_dequantize, nullptr, nullptr},
    {Family::int8_block, ref::quantize_int8_block, ref::quantize_int8_with_scales, int8_ref_dequantize,
     int8_fast_quantize, int8_fast_dequantize, nullptr, nullptr},
    {Family::int8_token, ref::quantize_int8_token, ref::quantize_int8_with_scales, int8_ref_dequantize,
     int8_fast_quantize, int8_fast_dequantize, nullptr, nullptr},
    {Family::int8_group, ref::quantize_int8_group, ref::quantize_int8_with_scales, int8_ref_dequantize,
     int8_fast_quantize, int8_fast_dequantize, nullptr, nullptr},
    {Family::nvfp4, ref::quantize_nvfp4, ref::quantize_nvfp4_with_scales, nvfp4_ref_dequantize, nvfp4_fast_quantize,
     nvfp4_fast_dequantize, nvfp4_fast_quantize_with_amax, nullptr},
    {Family::fp8_scaled, ref::quantize_fp8_scaled, ref::quantize_fp8_scaled_with_scales, fp8_ref_dequantize,
     fp8_fast_quantize, fp8_fast_dequantize, fp8_fast_quantize_with_amax, fp8_fast_quantize_with_scales},
};

}  // namespace

const FamilyKernels& family_kernels(const Contract& c, const char* what) {
  require_quantizer(c, what);
  for (const auto& r : kRows)
    if (r.family == c.family) return r;
  fail(ErrorKind::bad_argument, std::string("the ") + family_name(c.family) + " family has no kernels");
}

}  // namespace qexact
