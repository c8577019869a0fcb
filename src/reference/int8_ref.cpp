// The int8 contract steps shared by the block, token and group quantizers (int8_steps.hpp),
// and dequantization, which is the same fp32 multiply for all three.
#include <algorithm>
#include <bit>
#include <cmath>

#include "contracts/family_table.hpp"
#include "formats/float_dtype.hpp"
#include "qexact/formats/fp16.hpp"
#include "qexact/formats/int8.hpp"
#include "reference/int8_steps.hpp"

#include "contracts/family_table.hpp"
#include "reference/int8_ref.hpp"

namespace qexact::ref {
namespace int8 {

float fold_abs_max(float amax, float x) { return std::max(amax, std::fabs(x)); }

float scale_from_amax(const ScaleSpec& c, float amax, DType input) {
  float s = 0.0f;
  switch (c.scale_mode) {
    case ScaleMode::before:
      s = std::max(amax, c.scale_min) / c.qmax;
      break;
    case ScaleMode::after:
      s = std::max(amax / c.qmax, c.scale_min);
      break;
  }
  const DType arith = c.scale_arith == ScaleArith::input ? input : DType::f32;
  s = round_to_dtype(arith, s);
  if (s == 0.0f && c.zero_group == ZeroGroup::eps) s = dtype_eps(arith);
  return s;
}

float stored_scale(const ScaleSpec& c, float s) {
  return c.scale_store == ScaleStore::f16 ? f16_to_f32(f32_to_f16(s)) : s;
}

QuotientOp quotient_for(const ScaleSpec& c, float amax, float s, DType input) {
  switch (c.quotient) {
    case Quotient::divide: {
      const float divisor = stored_scale(c, s);
      if (divisor == 0.0f && c.zero_group != ZeroGroup::nan) return {};
      return {QuotientOp::Op::divide, divisor, c.quotient_arith == QuotientArith::input ? input : DType::f32};
    }
    case Quotient::reciprocal: {
      const float clamped_amax = std::max(amax, c.scale_min);
      if (clamped_amax == 0.0f) return {};
      return {QuotientOp::Op::multiply, c.qmax / clamped_amax};
    }
    case Quotient::inv_scale:
      if (s == 0.0f) return {};
      return {QuotientOp::Op::multiply, 1.0f / s};
  }
  fail(ErrorKind::bad_argument, "unknown quotient");
}

QuotientOp quotient_for_given(const ScaleSpec& c, float amax, float given, DType input) {
  const float own = scale_from_amax(c, amax, input);
  if (std::bit_cast<std::uint32_t>(stored_scale(c, own)) == std::bit_cast<std::uint32_t>(given))
    return quotient_for(c, amax, own, input);
  if (given == 0.0f || !std::isfinite(given)) return {};
  if (c.quotient == Quotient::divide)
    return {QuotientOp::Op::divide, given, c.quotient_arith == QuotientArith::input ? input : DType::f32};
  return {QuotientOp::Op::multiply, 1.0f / given};
}

float quotient_value(const QuotientOp& q, float x) {
  switch (q.op) {
    case QuotientOp::Op::zero_payload: return 0.0f;
    case QuotientOp::Op::divide: return round_to_dtype(q.round_to, x / q.operand);
    case QuotientOp::Op::multiply: return x * q.operand;
  }
  return 0.0f;
}

std::int8_t quantize_element(const ElementSpec& c, const QuotientOp& q, float x) {
  if (q.op == QuotientOp::Op::zero_payload) return 0;
  return int8_encode(quotient_value(q, x), c.int_rounding, c.range);
}

QuotientOp scale_domain(const ScaleSpec& c, float amax, Tensor& scale, std::int64_t index, DType input) {
  const float s = scale_from_amax(c, amax, input);
  const auto i = static_cast<std::size_t>(index);
  if (c.scale_store == ScaleStore::f16)
    scale.data<std::uint16_t>()[i] = f32_to_f16(s);
  else
    scale.data<float>()[i] = s;
  return quotient_for(c, amax, s, input);
}

void check_contract(const Contract& c, Family family) {
  validate(c);
  if (c.family != family)
    fail(ErrorKind::bad_argument,
         std::string("the ") + family_name(family) + " quantizer was given a " + family_name(c.family) + " contract");
}

void reject_nonfinite(const std::vector<float>& values, const std::string& what,
                      const std::function<std::string(std::int64_t)>& where) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    const float v = values[i];
    if (std::isfinite(v)) continue;
    const char* kind = std::isnan(v) ? "NaN" : (v > 0 ? "+inf" : "-inf");
    fail(ErrorKind::bad_input,
         what + " takes finite inputs only: " + kind + " at " + where(static_cast<std::int64_t>(i)));
  }
}

std::string bsnd_index(const Shape& bsnd, std::int64_t flat) {
  const std::int64_t seq = bsnd[1], heads = bsnd[2], dim = bsnd[3];
  const std::int64_t d = flat % dim;
  const std::int64_t n = (flat / dim) % heads;
  const std::int64_t s = (flat / (dim * heads)) % seq;
  const std::int64_t b = flat / (dim * heads * seq);
  return "(b " + std::to_string(b) + ", s " + std::to_string(s) + ", n " + std::to_string(n) + ", d " +
         std::to_string(d) + ")";
}

Tensor new_payload(const Shape& shape) { return Tensor(DType::i8, shape); }

Tensor new_scale(const Contract& c, const Shape& shape) {
  return Tensor(scale_dtype(scale_encoding(c)), shape);
}

std::int64_t scale_index_of(const Contract& c, const Shape& x_shape, std::int64_t flat) {
  return grain_scale_index(family_traits(c.family).grain(c), x_shape, flat);
}

}  // namespace int8

Tensor dequantize_int8(const Contract& c, const TensorView& payload, const TensorView& scale, const Shape& x_shape) {
  validate(c);
  if (c.family != Family::int8_block && c.family != Family::int8_token && c.family != Family::int8_group)
    fail(ErrorKind::bad_argument, std::string("dequantize_int8 was given a ") + family_name(c.family) + " contract");
  const Shape ps = payload_shape(c, x_shape);
  const Shape ss = scale_shape(c, x_shape);
  const DType sd = scale_dtype(scale_encoding(c));
  if (payload.dtype != DType::i8 || payload.shape != ps)
    fail(ErrorKind::bad_argument, std::string("payload must be i8 of shape ") + shape_str(ps) + ", got " +
                                      dtype_name(payload.dtype) + " " + shape_str(payload.shape));
  if (scale.dtype != sd || scale.shape != ss)
    fail(ErrorKind::bad_argument, std::string("scale must be ") + dtype_name(sd) + " of shape " +
                                      shape_str(ss) + ", got " + dtype_name(scale.dtype) + " " +
                                      shape_str(scale.shape));

  const Tensor q = contiguous_copy(payload);
  const std::vector<float> scales = to_f32_vector(scale);
  Tensor out(DType::f32, x_shape);
  for (std::int64_t i = 0; i < out.numel(); ++i) {
    const auto k = static_cast<std::size_t>(i);
    const auto si = static_cast<std::size_t>(int8::scale_index_of(c, x_shape, i));
    out.data<float>()[k] = int8_decode(q.data<std::int8_t>()[k], scales[si]);
  }
  return out;
}

}  // namespace qexact::ref
