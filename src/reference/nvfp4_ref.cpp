// Reference nvfp4 quantizer (contracts §9.2): one block of 16 at a time, in the order the
// contract states its steps: tensor scale, block amax, E4M3 block scale, the reciprocal the
// elements are multiplied by, E2M1 codes. Rounding to E4M3 and E2M1 is by search over the
// formats' value tables (qexact/formats/element.hpp).
//
// nonfinite_input=propagate follows torchao 0.18.0 on x86 (docs/decisions.md, measured): every
// operation is IEEE fp32, and a NaN's bits travel as x86 makes them travel, because they decide
// the codes: a division returns its first NaN operand, torch's `x * reciprocal` its reciprocal's
// NaN, an invalid operation (0/0, inf/inf, 0*inf) the x86 default NaN; the E4M3 NaN code keeps the
// NaN's sign and reads back as (sign | 0x7FF00000); E2M1 has no NaN and torchao's conversion
// makes a code from the NaN's bits (formats/torchao_nan.hpp).
#include <bit>
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "contracts/family_table.hpp"
#include "formats/torchao_nan.hpp"
#include "qexact/error.hpp"
#include "qexact/formats/bf16.hpp"
#include "qexact/formats/element.hpp"
#include "qexact/formats/fp16.hpp"
#include "reference/nvfp4_ref.hpp"

namespace qexact::ref {
namespace {

constexpr float kE2m1Max = 6.0f;
constexpr float kE4m3Max = 448.0f;
constexpr float kE4m3Tiny = 0x1p-6f;  // torch.finfo(float8_e4m3fn).tiny: smallest normal

std::uint32_t bits_of(float f) { return std::bit_cast<std::uint32_t>(f); }
float from_bits(std::uint32_t b) { return std::bit_cast<float>(b); }
float quieted(float a) { return from_bits(bits_of(a) | 0x00400000u); }

// a / b with x86's NaN rules: the first NaN operand, else the default NaN of an invalid division.
float peer_div(float a, float b) {
  if (std::isnan(a)) return quieted(a);
  if (std::isnan(b)) return quieted(b);
  const float r = a / b;
  return std::isnan(r) ? from_bits(kX86DefaultNaN) : r;
}

// torch's `x * reciprocal`: measured, the reciprocal's NaN wins over the element's.
float peer_mul(float x, float m) {
  if (std::isnan(m)) return quieted(m);
  if (std::isnan(x)) return quieted(x);
  const float r = x * m;
  return std::isnan(r) ? from_bits(kX86DefaultNaN) : r;
}

// torch.clamp: a NaN passes through unchanged.
float clamp_keep_nan(float v, float lo, float hi) {
  if (std::isnan(v)) return v;
  return v < lo ? lo : v > hi ? hi : v;
}

std::uint8_t e4m3_code(float v) { return elem_encode(ElemFormat::e4m3, v, Rounding::rne, Overflow::saturate); }

// torch's float8_e4m3fn -> fp32: a NaN code becomes sign | 0x7FF00000.
float e4m3_value(std::uint8_t code) {
  if ((code & 0x7F) == 0x7F) return from_bits((static_cast<std::uint32_t>(code >> 7) << 31) | 0x7FF00000u);
  return elem_decode(ElemFormat::e4m3, code);
}

std::uint8_t e2m1_code(float v) {
  if (std::isnan(v)) return torchao_nan_code(ElemFormat::e2m1, bits_of(v));
  return elem_encode(ElemFormat::e2m1, v, Rounding::rne, Overflow::saturate);
}

std::string element_at(std::int64_t flat, std::int64_t k) {
  return "(row " + std::to_string(flat / k) + ", column " + std::to_string(flat % k) + ")";
}

void reject_nonfinite(const ElementSpec& c, const std::vector<float>& v, std::int64_t k) {
  if (c.nonfinite_input != NonFiniteInput::reject) return;
  for (std::size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i]))
      fail(ErrorKind::bad_input, "nvfp4: non-finite input " + std::to_string(v[i]) + " at " +
                                     element_at(static_cast<std::int64_t>(i), k) +
                                     " (nonfinite_input=reject)");
}

// The tensor scale t = amax / (448 * 6) (torchao per_tensor_amax_to_scale(torch.max(torch.abs(x)))).
// torch.max of a tensor holding NaN returns a NaN whose bits depend on the dtype (measured): f32
// 0xFFFFFFFF, bf16 the canonical 0x7FC00000 (f16, which torchao does not take, as bf16).
float tensor_scale_of(const std::vector<float>& v, DType dtype) {
  float amax = 0.0f;
  for (float x : v) {
    const float a = std::fabs(x);
    if (std::isnan(a)) {
      amax = from_bits(dtype == DType::f32 ? 0xFFFFFFFFu : 0x7FC00000u);
      break;
    }
    if (a > amax) amax = a;
  }
  return peer_div(amax, kE4m3Max * kE2m1Max);
}

// max |x| of finite inputs (tensor_scale=te and multiplier). tensor_scale=te (TransformerEngine,
// source-read): the stored tensor value is the amax itself; the quantizer uses S_enc = 2688 /
// amax, capped at FLT_MAX, and 1 where the amax is 0 or S_enc underflows to 0.
float abs_max(const std::vector<float>& v) {
  float amax = 0.0f;
  for (float x : v) amax = std::max(amax, std::fabs(x));
  return amax;
}
float te_encode_scale(const TensorScaleSpec& c, float amax) {
  const float s = std::min(static_cast<float>(c.global_e4m3_max) * kE2m1Max / amax, std::numeric_limits<float>::max());
  return amax == 0.0f || s == 0.0f ? 1.0f : s;
}

// scale_arith=input: a step rounded to the input's dtype D (torch computing on a bf16 / f16 amax).
float in_dtype(const ScaleSpec& c, DType dt, float v) {
  if (c.scale_arith != ScaleArith::input) return v;
  if (dt == DType::bf16) return round_bf16(v);
  if (dt == DType::f16) return round_f16(v);
  return v;
}

// tensor_scale=multiplier (compressed-tensors' global scale): 2688 / amax as torch computes a
// scalar over a tensor, 2688 * fp32(1 / amax), the amax floored at 2^-126 (scale_arith=input:
// torch.finfo(D).tiny, each step in D); 1.0 where that overflows. Inputs are finite here
// (multiplier needs nonfinite_input=reject).
float multiplier_tensor_scale(const ScaleSpec& c, DType dt, float amax) {
  const float tiny = c.scale_arith == ScaleArith::input && dt == DType::f16 ? 0x1p-14f : 0x1p-126f;
  const float reciprocal = in_dtype(c, dt, 1.0f / std::max(amax, tiny));
  const float gs = in_dtype(c, dt, kE4m3Max * kE2m1Max * reciprocal);
  return std::isfinite(gs) ? gs : 1.0f;
}

// max |x| over a block; NaN (canonical, as torch.amax gives it) if the block holds one.
float block_amax(const float* x) {
  float m = 0.0f;
  for (int i = 0; i < kNvfp4Block; ++i) {
    const float a = std::fabs(x[i]);
    if (std::isnan(a)) return std::numeric_limits<float>::quiet_NaN();
    if (a > m) m = a;
  }
  return m;
}

// The amax each block's scale is computed from: its own (block_rows=1), or its 16x16 tile's, the
// block and the blocks above and below it in the same 16 rows (a last tile of fewer rows: those).
std::vector<float> scale_amaxes(const Contract& c, const std::vector<float>& v, std::int64_t k) {
  const std::int64_t blocks = static_cast<std::int64_t>(v.size()) / kNvfp4Block, per_row = k / kNvfp4Block;
  std::vector<float> own(static_cast<std::size_t>(blocks));
  for (std::int64_t b = 0; b < blocks; ++b) own[static_cast<std::size_t>(b)] = block_amax(v.data() + b * kNvfp4Block);
  if (c.block_rows == 1 || blocks == 0) return own;
  const std::int64_t rows = blocks / per_row;
  std::vector<float> tile(own.size());
  for (std::int64_t r0 = 0; r0 < rows; r0 += c.block_rows)
    for (std::int64_t j = 0; j < per_row; ++j) {
      float m = 0.0f;
      for (std::int64_t r = r0; r < std::min(rows, r0 + c.block_rows); ++r) {
        const float a = own[static_cast<std::size_t>(r * per_row + j)];
        m = std::isnan(a) || std::isnan(m) ? std::numeric_limits<float>::quiet_NaN() : std::max(m, a);
      }
      for (std::int64_t r = r0; r < std::min(rows, r0 + c.block_rows); ++r) tile[static_cast<std::size_t>(r * per_row + j)] = m;
    }
  return tile;
}

// The E4M3 code of a block's scale: e4m3(clamp(amax / 6, block_min, 448)), or with a tensor
// scale e4m3(clamp((amax / 6) / t, ...)) (block_arith=fused: amax / fp32(6 * t)), with
// tensor_scale=multiplier e4m3(clamp(fp32(gs * D(amax / 6)), ...)); zero_block=one makes a zero s
// 1.0 before the clamp, zero_block=eps a zero code E4M3's eps; te: e4m3(amax * (S_enc *
// fp32(1/6))), saturated, no lower clamp. `t` is S_enc for te, gs for multiplier.
std::uint8_t block_scale_code(const Contract& c, DType dt, float amax, float t) {
  if (c.tensor_scale == TensorScale::te) return e4m3_code(amax * (t * (1.0f / kE2m1Max)));
  float s = 0.0f;
  if (c.tensor_scale == TensorScale::amax && c.block_arith == BlockArith::fused)
    s = peer_div(amax, kE2m1Max * t);
  else if (c.tensor_scale == TensorScale::multiplier)
    s = t * in_dtype(c, dt, peer_div(amax, kE2m1Max));
  else {
    s = peer_div(amax, kE2m1Max);
    if (c.tensor_scale == TensorScale::amax) s = peer_div(s, t);
  }
  if (c.zero_block == ZeroBlock::one && s == 0.0f) s = 1.0f;
  std::uint8_t code = e4m3_code(clamp_keep_nan(s, c.block_min, kE4m3Max));
  if (c.zero_block == ZeroBlock::eps && code == 0x00) code = 0x20;  // 0.125 = 2^-3, E4M3's epsilon
  return code;
}

// quotient=divide: the block's whole descale d (s * t, s / gs, or s).
float block_descale(const TensorScaleSpec& c, std::uint8_t code, float t) {
  const float s = e4m3_value(code);
  if (c.tensor_scale == TensorScale::amax) return s * t;
  if (c.tensor_scale == TensorScale::multiplier) return peer_div(s, t);
  return s;
}

// What the block's elements are multiplied by: 1 / s, or (1 / t) / s; te: 1 / (s * (1 / S_enc))
// capped at FLT_MAX (a zero scale multiplies by FLT_MAX).
float block_multiplier(const TensorScaleSpec& c, std::uint8_t code, float t) {
  const float s = e4m3_value(code);
  if (c.tensor_scale == TensorScale::te)
    return std::min(1.0f / (s * (1.0f / t)), std::numeric_limits<float>::max());
  const float one = c.tensor_scale == TensorScale::amax ? peer_div(1.0f, t) : 1.0f;
  return peer_div(one, s);
}

// A zero code's sign by signed_zero, given the quotient q it came from: true keeps q's sign bit
// (-0.0 included), false drops it, underflow sets it iff q < 0.
std::uint8_t with_zero_sign(const ElementSpec& c, std::uint8_t code, float q) {
  if ((code & 0x7) != 0 || c.signed_zero == SignedZero::keep) return code;
  return c.signed_zero == SignedZero::underflow && q < 0.0f ? 0x8 : 0x0;
}

std::uint8_t element_code(const Contract& c, float x, float m) {
  if (c.nvfp4_quotient == Nvfp4Quotient::divide) {
    const float q = peer_div(x, m);  // m is the descale d here
    if (std::isnan(q)) return 0x7;
    return with_zero_sign(c, elem_encode(ElemFormat::e2m1, q, Rounding::rne, Overflow::saturate), q);
  }
  const float q = clamp_keep_nan(peer_mul(x, m), -kE2m1Max, kE2m1Max);
  return std::isnan(q) ? e2m1_code(q) : with_zero_sign(c, e2m1_code(q), q);
}

// four_over_six (tensor_scale=te): the block scale code of both candidates, each block's elements
// under it, the error of each by TE's reference steps, and the candidate of the smaller error
// (a tie keeps map-to-6). `s_enc` is S_enc, `amax` the tensor amax.
std::uint8_t four_over_six_code(const Contract& c, const float* x, float block_max, float s_enc, float amax) {
  const float decode = 1.0f / s_enc;
  const float base = (block_max / kE2m1Max) * s_enc;
  const std::uint8_t candidates[2] = {e4m3_code(clamp_keep_nan(base * 1.5f, -kE4m3Max, kE4m3Max)),
                                      e4m3_code(clamp_keep_nan(base, -kE4m3Max, kE4m3Max))};
  const float denom = kE2m1Max * static_cast<float>(c.global_e4m3_max);
  float err[2] = {0.0f, 0.0f};
  for (int k = 0; k < 2; ++k) {
    const float sf = e4m3_value(candidates[k]);
    const float m = std::min(1.0f / (sf * decode), std::numeric_limits<float>::max());
    for (int i = 0; i < kNvfp4Block; ++i) {
      const float value = ((elem_decode(ElemFormat::e2m1, element_code(c, x[i], m)) * sf) * amax) / denom;
      const float diff = value - x[i];
      err[k] += c.four_over_six == FourOverSix::mse ? diff * diff : std::fabs(diff);
    }
  }
  return err[0] < err[1] ? candidates[0] : candidates[1];
}

// m: the multiplier (quotient=reciprocal) or the descale (quotient=divide) of the block.
void quantize_block(const Contract& c, const float* x, float m, std::uint8_t* payload) {
  for (int i = 0; i < kNvfp4Block; i += 2) {
    const std::uint8_t lo = element_code(c, x[i], m);
    const std::uint8_t hi = element_code(c, x[i + 1], m);
    payload[i / 2] = static_cast<std::uint8_t>(lo | (hi << 4));
  }
}

// ---- quotient=prescaled: JAX's quantize as XLA:CPU runs it ------------------------------------
// Every division by a broadcast divisor is x * fp32(1 / d); with ftz each operand and result
// below 2^-126 is a zero of its sign. x86's NaN rules as in peer_mul, with the element first.

float ftz_if(const Contract& c, float v) { return c.ftz && std::fabs(v) < 0x1p-126f ? std::copysign(0.0f, v) : v; }

float xla_mul(const Contract& c, float a, float b) {
  a = ftz_if(c, a);
  b = ftz_if(c, b);
  float r;
  if (std::isnan(a)) r = quieted(a);
  else if (std::isnan(b)) r = quieted(b);
  else {
    r = a * b;
    if (std::isnan(r)) r = from_bits(kX86DefaultNaN);  // 0 * inf
  }
  return ftz_if(c, r);
}

float xla_reciprocal(const Contract& c, float d) { return ftz_if(c, 1.0f / ftz_if(c, d)); }

// The tensor scale t = amax / 2688 (tensor_scale=amax; scale_arith=reciprocal: amax * fp32(1 /
// 2688), as XLA rewrites a division by a constant), or 1.
float prescaled_tensor_scale(const Contract& c, const std::vector<float>& v) {
  if (c.tensor_scale == TensorScale::none) return 1.0f;
  float amax = 0.0f;
  for (float x : v) {
    const float a = std::fabs(ftz_if(c, x));
    if (std::isnan(a)) return std::numeric_limits<float>::quiet_NaN();
    amax = std::max(amax, a);
  }
  const float d = kE4m3Max * kE2m1Max;
  if (c.scale_arith == ScaleArith::reciprocal) return xla_mul(c, amax, 1.0f / d);
  return ftz_if(c, amax / d);
}

void quantize_nvfp4_prescaled(const Contract& c, const std::vector<float>& v, bool given, QuantResult& r) {
  const float t = prescaled_tensor_scale(c, v);
  if (c.tensor_scale != TensorScale::none) *r.tensor_scale.data<float>() = t;
  const float t_reciprocal = xla_reciprocal(c, t);
  std::uint8_t* payload = r.payload.data<std::uint8_t>();
  std::uint8_t* scale = r.scale.data<std::uint8_t>();
  const std::int64_t blocks = static_cast<std::int64_t>(v.size()) / kNvfp4Block;
  float xs[kNvfp4Block];
  for (std::int64_t b = 0; b < blocks; ++b) {
    float amax = 0.0f;
    for (int i = 0; i < kNvfp4Block; ++i) {
      xs[i] = xla_mul(c, v[static_cast<std::size_t>(b * kNvfp4Block + i)], t_reciprocal);
      const float a = std::fabs(xs[i]);
      amax = std::isnan(a) || std::isnan(amax) ? std::numeric_limits<float>::quiet_NaN() : std::max(amax, a);
    }
    if (!given) {
      const float s = clamp_keep_nan(xla_mul(c, amax, 1.0f / kE2m1Max), c.block_min, kE4m3Max);
      scale[b] = std::isnan(s) ? static_cast<std::uint8_t>((std::signbit(s) ? 0x80 : 0x00) | 0x7F) : e4m3_code(s);
    }
    const float m = xla_reciprocal(c, e4m3_value(scale[b]));
    for (int i = 0; i < kNvfp4Block; i += 2) {
      std::uint8_t codes[2];
      for (int j = 0; j < 2; ++j) {
        const float q = clamp_keep_nan(xla_mul(c, xs[i + j], m), -kE2m1Max, kE2m1Max);
        codes[j] = std::isnan(q) ? std::uint8_t{0x8}  // XLA's convert of a NaN to E2M1
                                 : with_zero_sign(c, elem_encode(ElemFormat::e2m1, q, Rounding::rne, Overflow::saturate), q);
      }
      payload[b * (kNvfp4Block / 2) + i / 2] = static_cast<std::uint8_t>(codes[0] | (codes[1] << 4));
    }
  }
}

// Both entry points: the contract's own block scales, or `given` (u8 E4M3 codes in the scale shape).
QuantResult quantize_nvfp4_impl(const Contract& c, const TensorView& x, const TensorView* given) {
  validate(c);
  if (c.family != Family::nvfp4) fail(ErrorKind::bad_argument, "quantize_nvfp4 takes an nvfp4 contract");
  if (!is_float_dtype(x.dtype))
    fail(ErrorKind::bad_argument, std::string("nvfp4 quantize takes f32, bf16 or f16 input, got ") + dtype_name(x.dtype));
  const std::vector<OutputSpec> specs = output_specs(c, x.shape);  // rank >= 1, K % 16 == 0
  const std::vector<float> v = to_f32_vector(x);
  const std::int64_t k = x.shape.back();
  reject_nonfinite(c, v, k);

  QuantResult r;
  r.payload = Tensor(DType::u8, specs[0].shape);
  r.scale = Tensor(DType::u8, specs[1].shape);
  r.path = "blockwise";
  if (given) {
    if (given->dtype != DType::u8 || given->shape != specs[1].shape)
      fail(ErrorKind::bad_argument, "the given nvfp4 scales must be u8 E4M3 codes of shape " + shape_str(specs[1].shape) +
                                        ", got " + dtype_name(given->dtype) + " " + shape_str(given->shape));
    r.scale = contiguous_copy(*given);
  }
  if (c.nvfp4_quotient == Nvfp4Quotient::prescaled) {
    if (c.tensor_scale != TensorScale::none) r.tensor_scale = Tensor(DType::f32, specs[2].shape);
    quantize_nvfp4_prescaled(c, v, given != nullptr, r);
    return r;
  }
  float t = 1.0f;
  if (c.tensor_scale != TensorScale::none) {
    const float stored = c.tensor_scale == TensorScale::te           ? abs_max(v)
                         : c.tensor_scale == TensorScale::multiplier ? multiplier_tensor_scale(c, x.dtype, abs_max(v))
                                                                     : tensor_scale_of(v, x.dtype);
    t = c.tensor_scale == TensorScale::te ? te_encode_scale(c, stored) : stored;
    r.tensor_scale = Tensor(DType::f32, specs[2].shape);
    *r.tensor_scale.data<float>() = stored;
  }
  std::uint8_t* payload = r.payload.data<std::uint8_t>();
  std::uint8_t* scale = r.scale.data<std::uint8_t>();
  const std::int64_t blocks = static_cast<std::int64_t>(v.size()) / kNvfp4Block;
  const std::vector<float> amaxes = scale_amaxes(c, v, k);
  for (std::int64_t b = 0; b < blocks; ++b) {
    const float* xb = v.data() + b * kNvfp4Block;
    const float a = amaxes[static_cast<std::size_t>(b)];
    if (!given)
      scale[b] = c.four_over_six != FourOverSix::off ? four_over_six_code(c, xb, a, t, *r.tensor_scale.data<float>())
                                                     : block_scale_code(c, x.dtype, a, t);
    const float m = c.nvfp4_quotient == Nvfp4Quotient::divide ? block_descale(c, scale[b], t)
                                                              : block_multiplier(c, scale[b], t);
    quantize_block(c, xb, m, payload + b * (kNvfp4Block / 2));
  }
  return r;
}

}  // namespace

QuantResult quantize_nvfp4(const Contract& c, const TensorView& x) { return quantize_nvfp4_impl(c, x, nullptr); }

QuantResult quantize_nvfp4_with_scales(const Contract& c, const TensorView& x, const TensorView& scale) {
  return quantize_nvfp4_impl(c, x, &scale);
}

// torchao NVFP4Tensor.dequantize: e2m1 * (t * s) with the product t * s rounded to fp32 first
// (get_hp_scales, and ModelOpt's s * t), or e2m1 * s single level; multiplier: e2m1 * fp32(s / gs);
// te (dequantize_nvfp4.cuh): e2m1 * ((s * amax) * fp32(1 / 2688)). Every NaN comes out canonical, as dequantize_mx.
Tensor dequantize_nvfp4(const Contract& c, const TensorView& payload, const TensorView& scale,
                        const TensorView& tensor_scale, const Shape& x_shape) {
  validate(c);
  require_quantized(c, payload, scale, tensor_scale, x_shape);
  float t = 1.0f;
  if (c.tensor_scale != TensorScale::none) t = to_f32_vector(tensor_scale)[0];
  const Tensor p = contiguous_copy(payload);
  const Tensor s = contiguous_copy(scale);
  Tensor out(DType::f32, x_shape);
  float* o = out.data<float>();
  const std::int64_t n = shape_numel(x_shape);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint8_t byte = p.data<std::uint8_t>()[i / 2];
    const std::uint8_t code = static_cast<std::uint8_t>(i % 2 == 0 ? byte & 0x0F : byte >> 4);
    float m = e4m3_value(s.data<std::uint8_t>()[i / kNvfp4Block]);
    if (c.tensor_scale == TensorScale::amax) m = t * m;
    if (c.tensor_scale == TensorScale::multiplier) m = m / t;  // compressed-tensors: s / gs
    if (c.tensor_scale == TensorScale::te) m = (m * t) * (1.0f / (static_cast<float>(c.global_e4m3_max) * kE2m1Max));
    const float v = elem_decode(ElemFormat::e2m1, code) * m;
    o[i] = std::isnan(v) ? std::numeric_limits<float>::quiet_NaN() : v;
  }
  return out;
}

}  // namespace qexact::ref
