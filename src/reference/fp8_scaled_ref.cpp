// Reference fp8.scaled quantizer (contracts §9.1): one scale domain at a time, in the order the
// contract states its steps: amax, amax floor, scale, power of two, stored form, quotient,
// clamp (or overflow=nan / inf), element code (by search over the E4M3/E5M2 value table,
// formats/element.cpp).
//
// Non-finite input under nonfinite_input=propagate is what torch 2.15 on x86 CPUs does (measured
// with torchao 0.18.0, docs/decisions.md): torch's abs-max of a tensor holding a NaN is a NaN
// whose bits depend on the reduction (the vectorised full reduction of a tensor ORs in an
// all-ones compare mask: 0xFFFFFFFF for fp32, narrowed to 0xFE00 for f16 and to the canonical
// 0x7FC0 for bf16; a row reduction or a single element give the positive quiet NaN); the scale
// divides that NaN through unchanged; and each element's
// quotient follows x86 SSE's NaN rules (the first NaN operand, quieted; else the negative
// "default" NaN for inf * 0, inf / inf and 0 / 0). torch's fp8 cast keeps a NaN's sign.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "contracts/family_table.hpp"
#include "contracts/scale_grain.hpp"
#include "formats/float_dtype.hpp"
#include "qexact/formats/bf16.hpp"
#include "qexact/formats/element.hpp"
#include "qexact/formats/fp16.hpp"
#include "reference/fp8_scaled_ref.hpp"

namespace qexact::ref {
namespace {

std::uint32_t bits_of(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

float from_bits(std::uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

float quieted(float nan) { return from_bits(bits_of(nan) | 0x00400000u); }

constexpr std::uint32_t kPositiveQuietNaN = 0x7FC00000u;
constexpr std::uint32_t kX86DefaultNaNBits = 0xFFC00000u;  // inf * 0, inf / inf, 0 / 0 on x86
constexpr std::uint32_t kAllOnesNaN = 0xFFFFFFFFu;         // a vectorised max's compare mask

// The result of the IEEE operation a (op) b = r with x86 SSE's NaN rules.
float x86_result(float a, float b, float r) {
  if (std::isnan(a)) return quieted(a);
  if (std::isnan(b)) return quieted(b);
  if (std::isnan(r)) return from_bits(kX86DefaultNaNBits);
  return r;
}

// Where flat element i sits, for errors: (b, s, n, d) for head_block, (row, column) otherwise.
std::string element_at(const Contract& c, const Shape& x, std::int64_t i) {
  if (c.granularity.kind == Granularity::head_block) {
    const std::int64_t S = x[1], N = x[2], D = x[3];
    return "(b " + std::to_string(i / (D * N * S)) + ", s " + std::to_string((i / (D * N)) % S) + ", n " +
           std::to_string((i / D) % N) + ", d " + std::to_string(i % D) + ")";
  }
  const std::int64_t cols = x.back();
  return "(row " + std::to_string(i / cols) + ", column " + std::to_string(i % cols) + ")";
}

void reject_nonfinite(const Contract& c, const Shape& x, const std::vector<float>& v) {
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (std::isfinite(v[i])) continue;
    const char* kind = std::isnan(v[i]) ? "NaN" : (v[i] > 0 ? "+inf" : "-inf");
    fail(ErrorKind::bad_input, std::string("fp8.scaled takes finite inputs only (nonfinite_input=reject): ") + kind +
                                   " at " + element_at(c, x, static_cast<std::int64_t>(i)));
  }
}

// Step 1: the domain's amax, max |x| with NaN propagating as torch's reduction gives it.
float domain_amax(const std::vector<float>& members, const Contract& c, DType dt, std::int64_t numel) {
  float amax = 0.0f;
  bool nan = false;
  for (float v : members) {
    const float a = std::fabs(v);
    if (std::isnan(a)) nan = true;
    else if (a > amax) amax = a;
  }
  if (!nan) return amax;
  if (c.granularity.kind != Granularity::tensor || numel == 1) return from_bits(kPositiveQuietNaN);
  // torch's full reduction ORs an all-ones compare mask into the NaN; f16 narrows that to the
  // negative quiet NaN, bf16 to the positive one.
  return from_bits(dt == DType::f32 ? kAllOnesNaN : dt == DType::f16 ? kX86DefaultNaNBits : kPositiveQuietNaN);
}

// Step 4: the power of two.
float to_pow2(ScalePow2 rule, float s) {
  if (rule == ScalePow2::none || !std::isfinite(s) || s == 0.0f) return s;
  int e = 0;
  const float m = std::frexp(s, &e);  // s = m * 2^e, m in [0.5, 1)
  switch (rule) {
    case ScalePow2::down: return std::ldexp(1.0f, e - 1);
    case ScalePow2::up: return m == 0.5f ? s : std::ldexp(1.0f, e);
    case ScalePow2::down_log2f: {
      // log2 in double rounded once to fp32: the correctly rounded fp32 log2 torch's kernel gives.
      const float l = static_cast<float>(std::log2(static_cast<double>(s)));
      return std::ldexp(1.0f, static_cast<int>(std::floor(l)));
    }
    case ScalePow2::none: break;
  }
  return s;
}

// A value rounded to the input's dtype, as torch rounds each operation on a bf16 / f16 tensor:
// RNE; a NaN becomes bf16's canonical positive NaN (c10::BFloat16), or keeps its sign in f16.
float in_dtype(DType dt, float v) {
  return dt == DType::bf16 && std::isnan(v) ? from_bits(kPositiveQuietNaN) : round_to_dtype(dt, v);
}

struct DomainScale {
  bool zero = false;  // zero_group=zero and amax == 0: scale 0, payload 0
  float scale = 0.0f; // the scale the quotient uses (descale or multiplier)
};

// Steps 2 to 4: amax floor, scale, power of two, a zero scale's replacement.
DomainScale scale_of(const Contract& c, float amax, DType dt) {
  if (c.zero_group == ZeroGroup::zero && amax == 0.0f) return {true, 0.0f};
  if (c.zero_group == ZeroGroup::one_unless_positive && !(amax > 0.0f)) return {false, 1.0f};
  if (std::isnan(amax)) return {false, amax};  // max / NaN and NaN / max are that NaN (torch.clamp lets it through)
  const float max = elem_traits(c.element).max;
  const bool multiplier = c.scale_kind == ScaleKind::multiplier;
  float s;
  if (c.scale_arith == ScaleArith::fp64) {
    const double a = std::max(static_cast<double>(amax), c.amax_floor);
    if (c.zero_group == ZeroGroup::one && a == 0.0) s = 1.0f;
    else s = static_cast<float>(multiplier ? static_cast<double>(max) / a : a / static_cast<double>(max));
  } else {
    // amax_one: an amax at or below the floor is taken to be 1 (the floor is a threshold only).
    const float a = c.zero_group != ZeroGroup::amax_one ? std::max(amax, static_cast<float>(c.amax_floor))
                    : amax <= static_cast<float>(c.amax_floor) ? 1.0f
                                                               : amax;
    if (c.zero_group == ZeroGroup::one && a == 0.0f) {
      s = 1.0f;
    } else if (multiplier) {
      s = c.scale_arith == ScaleArith::reciprocal_multiplier ? max * (1.0f / a) : max / a;
      if (c.scale_arith == ScaleArith::fp32_satfinite && std::isinf(s)) s = FLT_MAX;
    } else {
      s = c.scale_arith == ScaleArith::reciprocal ? a * (1.0f / max) : a / max;
    }
    if (c.scale_arith == ScaleArith::input) s = in_dtype(dt, s);
  }
  s = to_pow2(c.scale_pow2, s);
  if (c.zero_group == ZeroGroup::eps && s == 0.0f) s = dtype_eps(c.scale_arith == ScaleArith::input ? dt : DType::f32);
  return {false, s};
}

// Step 5: what scale.npy holds.
float stored_form(const ScaleSpec& c, float s) {
  if (c.stored == StoredScale::computed) return s;
  return x86_result(1.0f, s, 1.0f / s);
}

// Steps 6 to 8 for one element.
std::uint8_t element_code(const Contract& c, float s, float x, DType dt) {
  float q = 0.0f;
  switch (c.fp8_quotient) {
    case Fp8Quotient::divide: q = x86_result(x, s, x / s); break;
    case Fp8Quotient::reciprocal: {
      const float r = x86_result(1.0f, s, 1.0f / s);
      q = x86_result(x, r, x * r);
      break;
    }
    case Fp8Quotient::multiply: q = x86_result(x, s, x * s); break;
  }
  if (c.quotient_arith == QuotientArith::input) q = in_dtype(dt, q);
  // torch.clamp lets NaN through; overflow=nan / inf: no clamp, the encoder's overflow rule.
  const float max = elem_traits(c.element).max;
  if (c.overflow == Overflow::saturate && !std::isnan(q)) q = std::min(std::max(q, -max), max);
  const std::uint8_t code = elem_encode(c.element, q, Rounding::rne, c.overflow);
  // signed_zero=false: a zero code is +0 whatever the sign it came with; underflow: a quotient
  // that is exactly zero is +0 (compressed-tensors adds its zero point, q + 0.0), one that rounds
  // to zero in the element keeps its sign.
  if (c.signed_zero == SignedZero::drop && code == 0x80) return 0;
  if (c.signed_zero == SignedZero::underflow && q == 0.0f) return 0;
  return code;
}

bool stores_descale(const ScaleSpec& c) {
  return (c.scale_kind == ScaleKind::descale) == (c.stored == StoredScale::computed);
}

void check_fp8(const Contract& c, const char* what) {
  validate(c);
  if (c.family != Family::fp8_scaled)
    fail(ErrorKind::bad_argument, std::string(what) + " was given a " + family_name(c.family) + " contract");
}

// Both entry points: the contract's own scales, or `given` (f32 in the scale shape, as stored).
QuantResult quantize_impl(const Contract& c, const TensorView& x, const TensorView* given) {
  check_fp8(c, "the fp8.scaled quantizer");
  if (!is_float_dtype(x.dtype))
    fail(ErrorKind::bad_argument, std::string("fp8.scaled takes f32, bf16 or f16 input, got ") + dtype_name(x.dtype));
  const Shape ss = grain_scale_shape(c.granularity, x.shape, "fp8.scaled");
  const std::vector<float> v = to_f32_vector(x);
  if (c.nonfinite_input == NonFiniteInput::reject) reject_nonfinite(c, x.shape, v);
  const auto numel = static_cast<std::int64_t>(v.size());
  const auto domains = static_cast<std::size_t>(shape_numel(ss));

  // Each element's scale domain, looked up once for step 1 and again for step 6.
  std::vector<std::size_t> domain_of(static_cast<std::size_t>(numel));
  std::vector<std::vector<float>> members(domains);
  for (std::int64_t i = 0; i < numel; ++i) {
    const auto k = static_cast<std::size_t>(i);
    domain_of[k] = static_cast<std::size_t>(grain_scale_index(c.granularity, x.shape, i));
    members[domain_of[k]].push_back(v[k]);
  }

  QuantResult r;
  r.payload = Tensor(DType::u8, x.shape);
  r.scale = Tensor(DType::f32, ss);
  r.path = "groupwise";
  std::vector<DomainScale> scales(domains);
  std::vector<float> given_values;
  if (given) {
    if (given->dtype != DType::f32 || given->shape != ss)
      fail(ErrorKind::bad_argument, "the given fp8.scaled scales must be f32 of shape " + shape_str(ss) + ", got " +
                                        dtype_name(given->dtype) + " " + shape_str(given->shape));
    given_values = to_f32_vector(*given);
  }
  for (std::size_t d = 0; d < domains; ++d) {
    const DomainScale own = scale_of(c, domain_amax(members[d], c, x.dtype, numel), x.dtype);
    const float own_stored = own.zero ? 0.0f : stored_form(c, own.scale);
    scales[d] = own;
    r.scale.data<float>()[d] = own_stored;
    if (!given) continue;
    // A given scale equal (bit for bit) to the contract's own uses the contract's own scale; a
    // different one is turned back from its stored form (stored=inverse: fp32(1 / it)), and a
    // given 0 under zero_group=zero is the contract's zero domain.
    const float g = given_values[d];
    r.scale.data<float>()[d] = g;
    if (bits_of(g) == bits_of(own_stored)) continue;
    const bool zero = c.zero_group == ZeroGroup::zero && g == 0.0f;
    scales[d] = {zero, zero ? 0.0f : stored_form(c, g)};
  }
  std::uint8_t* payload = r.payload.data<std::uint8_t>();
  for (std::int64_t i = 0; i < numel; ++i) {
    const DomainScale& s = scales[domain_of[static_cast<std::size_t>(i)]];
    payload[i] = s.zero ? 0 : element_code(c, s.scale, v[static_cast<std::size_t>(i)], x.dtype);
  }
  return r;
}

}  // namespace

QuantResult quantize_fp8_scaled(const Contract& c, const TensorView& x) { return quantize_impl(c, x, nullptr); }

QuantResult quantize_fp8_scaled_with_scales(const Contract& c, const TensorView& x, const TensorView& scale) {
  return quantize_impl(c, x, &scale);
}

// Stored descale: x = q * s. Stored multiplier: x = q / s, as torchao's to_original_precision
// divides; under zero_group=zero a stored 0 is a zero domain and gives 0.
Tensor dequantize_fp8_scaled(const Contract& c, const TensorView& payload, const TensorView& scale,
                             const Shape& x_shape) {
  check_fp8(c, "the fp8.scaled dequantizer");
  require_quantized(c, payload, scale, TensorView{}, x_shape);
  const Tensor p = contiguous_copy(payload);
  const std::vector<float> s = to_f32_vector(scale);
  const bool descale = stores_descale(c);
  Tensor out(DType::f32, x_shape);
  float* o = out.data<float>();
  const std::int64_t n = shape_numel(x_shape);
  for (std::int64_t i = 0; i < n; ++i) {
    const float si = s[static_cast<std::size_t>(grain_scale_index(c.granularity, x_shape, i))];
    const float q = elem_decode(c.element, p.data<std::uint8_t>()[i]);
    float v;
    if (descale) v = q * si;
    else v = si == 0.0f && c.zero_group == ZeroGroup::zero ? 0.0f : q / si;
    // Every NaN comes out as the canonical quiet NaN: its sign and payload carry nothing.
    o[i] = std::isnan(v) ? std::numeric_limits<float>::quiet_NaN() : v;
  }
  return out;
}

}  // namespace qexact::ref
