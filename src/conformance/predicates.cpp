#include "conformance/predicates.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>

#include "conformance/lab_family.hpp"
#include "contracts/ceil_div.hpp"
#include "contracts/family_table.hpp"
#include "contracts/scale_grain.hpp"
#include "qexact/error.hpp"
#include "qexact/formats/bf16.hpp"
#include "qexact/formats/element.hpp"
#include "qexact/formats/fp16.hpp"
#include "reference/mx_ref.hpp"

namespace qexact::conformance {
namespace {

// floor(log2 a) of a finite a > 0, exact for normal and subnormal values.
int floor_log2(float a) {
  int e = 0;
  std::frexp(a, &e);
  return e - 1;
}

bool is_pow2(float a) {
  int e = 0;
  return a > 0.0f && std::isfinite(a) && std::frexp(a, &e) == 0.5f;
}

// The input as the contract sees it.
struct Input {
  std::vector<float> raw;  // as stored, C order
  std::vector<float> v;    // as quantized: bf16(x) for MX contracts with prequant_round = bf16
  Groups groups;
  Shape shape;
  DType dtype;
  float tensor_amax = 0.0f;  // max |x| over the finite elements (nvfp4's tensor scale)
};

Input read_input(const Contract& c, const TensorView& x) {
  Input in{to_f32_vector(x), {}, Groups(c, x.shape), x.shape, x.dtype};
  in.v = in.raw;
  if (c.family == Family::mx && c.prequant == Prequant::bf16)
    for (float& f : in.v) f = round_bf16(f);
  for (float f : in.v)
    if (std::isfinite(f)) in.tensor_amax = std::max(in.tensor_amax, std::fabs(f));
  return in;
}

float value(const Input& in, std::int64_t g, std::int64_t i) {
  return in.v[static_cast<std::size_t>(in.groups.member(g, i))];
}

// max |x| over the group's finite elements (0 when there are none).
float group_amax(const Input& in, std::int64_t g) {
  float m = 0.0f;
  for (std::int64_t i = 0; i < in.groups.size(g); ++i) {
    const float a = std::fabs(value(in, g, i));
    if (std::isfinite(a) && a > m) m = a;
  }
  return m;
}

template <class Pred>
std::int64_t count_groups(const Input& in, Pred&& pred) {
  std::int64_t n = 0;
  for (std::int64_t g = 0; g < in.groups.count(); ++g)
    if (in.groups.size(g) > 0 && pred(g)) ++n;
  return n;
}

template <class Pred>
std::int64_t count_elements(const Input& in, Pred&& pred) {
  std::int64_t n = 0;
  for (std::int64_t g = 0; g < in.groups.count(); ++g)
    for (std::int64_t i = 0; i < in.groups.size(g); ++i)
      if (pred(g, i)) ++n;
  return n;
}

// ---- scales: observed from a quantizer's output, or nominal --------------------------------

std::optional<double> mx_scale(const Contract& c, const Input& in, const Observed& obs, std::int64_t g) {
  if (obs.quant) {
    const Tensor& s = obs.quant->scale;
    const std::int64_t k = in.shape.back();
    const std::int64_t per_row = ceil_div(k, c.block);
    const std::int64_t off = ref::mx_scale_offset(c, g / per_row, g % per_row, per_row);
    if (s.dtype() != DType::u8 || off >= s.numel()) return std::nullopt;
    const int byte = s.data<std::uint8_t>()[off];
    if (byte == 0 || byte == 255) return std::nullopt;  // flushed / clamped groups and NaN scales
    return std::ldexp(1.0, byte - 127);
  }
  const float amax = group_amax(in, g);
  if (!(amax > 0.0f)) return std::nullopt;
  return std::ldexp(1.0, std::clamp(floor_log2(amax) - elem_traits(c.element).emax, -127, 127));
}

std::optional<double> int8_scale(const Contract& c, const Input& in, const Observed& obs, std::int64_t g) {
  float s = 0.0f;
  if (obs.quant) {
    const Tensor& t = obs.quant->scale;
    if (g >= t.numel()) return std::nullopt;
    if (t.dtype() == DType::f32) s = t.data<float>()[g];
    else if (t.dtype() == DType::f16) s = f16_to_f32(t.data<std::uint16_t>()[g]);
    else return std::nullopt;
  } else {
    s = int8_nominal_scale(c, group_amax(in, g));
  }
  if (!(s > 0.0f) || !std::isfinite(s)) return std::nullopt;
  return s;
}

// The HiF4 block's E6M2 scale, its bf16 reciprocal and the micro-exponent bits.
struct Hif4Grid {
  float scale = 0.0f;
  float rec = 0.0f;
  int d8[8] = {};
  int d4[16] = {};
};

std::optional<Hif4Grid> hif4_grid(const Input& in, const Observed& obs, std::int64_t g) {
  if (in.groups.size(g) != 64) return std::nullopt;
  Hif4Grid grid;
  if (obs.hif4) {
    const Tensor& s = obs.hif4->scale;
    if (s.dtype() != DType::u8 || (g + 1) * 4 > s.numel()) return std::nullopt;
    const std::uint8_t* b = s.data<std::uint8_t>() + g * 4;
    if (b[0] == 0xFF) return std::nullopt;  // non-finite block
    grid.scale = std::ldexp(static_cast<float>((b[0] & 3) + 4), (b[0] >> 2) - 48 - 2);
    for (int k = 0; k < 8; ++k) grid.d8[k] = (b[1] >> (7 - k)) & 1;
    for (int j = 0; j < 16; ++j) grid.d4[j] = j < 8 ? (b[2] >> (7 - j)) & 1 : (b[3] >> (15 - j)) & 1;
    grid.rec = round_bf16(1.0f / grid.scale);
    return grid;
  }
  float max8[8] = {}, max4[16] = {};
  for (std::int64_t i = 0; i < 64; ++i) {
    const float a = std::fabs(value(in, g, i));
    if (!std::isfinite(a)) return std::nullopt;  // non-finite block: NaN output, no grid
    max8[i / 8] = std::max(max8[i / 8], a);
    max4[i / 4] = std::max(max4[i / 4], a);
  }
  const float block_max = *std::max_element(max8, max8 + 8);
  float sf = round_bf16(block_max * 0.142578125f);
  sf = std::clamp(sf, 0x1p-48f, 49152.0f);
  int e = floor_log2(sf);
  const float t = std::ldexp(sf, 2 - e);  // in [4, 8), exact
  const float fl = std::floor(t);
  const float frac = t - fl;
  int m = static_cast<int>(fl);
  if (frac > 0.5f || (frac == 0.5f && m % 2 == 1)) ++m;
  if (m == 8) {
    m = 4;
    ++e;
  }
  grid.scale = std::ldexp(static_cast<float>(m), e - 2);
  grid.rec = round_bf16(1.0f / grid.scale);
  for (int k = 0; k < 8; ++k) grid.d8[k] = max8[k] * grid.rec >= 4.0f ? 1 : 0;
  for (int j = 0; j < 16; ++j) grid.d4[j] = (max4[j] * grid.rec) * std::ldexp(1.0f, -grid.d8[j / 2]) >= 2.0f ? 1 : 0;
  return grid;
}

// mant of §5: the element on the 0.25 grid of its sub-group, before rounding.
float hif4_mant(const Hif4Grid& grid, float a, std::int64_t i) {
  const int shift = grid.d8[i / 8] + grid.d4[i / 4];
  return round_bf16((a * grid.rec) * std::ldexp(1.0f, -shift));
}

template <class ElementPred>
std::int64_t count_hif4(const Input& in, const Observed& obs, ElementPred&& pred) {
  std::int64_t n = 0;
  for (std::int64_t g = 0; g < in.groups.count(); ++g) {
    const std::optional<Hif4Grid> grid = hif4_grid(in, obs, g);
    if (!grid) continue;
    for (std::int64_t i = 0; i < 64; ++i) n += pred(hif4_mant(*grid, std::fabs(value(in, g, i)), i)) ? 1 : 0;
  }
  return n;
}

bool is_midpoint(const std::vector<float>& table, double y) {
  const auto hi = std::upper_bound(table.begin(), table.end(), y);
  if (hi == table.begin() || hi == table.end()) return false;
  const double lo = *(hi - 1);
  return y > lo && y == (lo + static_cast<double>(*hi)) / 2.0;
}

// |x| == (n + 1/2) * s exactly; (n + 1/2) has few bits and s 24, so the product is exact.
bool is_half_integer_multiple(double a, double s) {
  const double t = a / s;
  if (!(t < 0x1p20)) return false;
  return a == (std::floor(t) + 0.5) * s;
}

// fp8.scaled and nvfp4: what a group's elements meet before rounding onto the element grid,
// x / operand or x * operand, from the observed scale outputs or the nominal scale.
struct ScaledOp {
  bool multiply = false;
  float operand = 1.0f;
  float apply(float x) const { return multiply ? x * operand : x / operand; }
};

std::optional<ScaledOp> fp8_op_for(const Contract& c, float used) {
  if (!(used > 0.0f) || !std::isfinite(used)) return std::nullopt;  // zero groups: payload 0
  switch (c.fp8_quotient) {
    case Fp8Quotient::divide: return ScaledOp{false, used};
    case Fp8Quotient::reciprocal: return ScaledOp{true, 1.0f / used};
    case Fp8Quotient::multiply: return ScaledOp{true, used};
  }
  return std::nullopt;
}

std::optional<ScaledOp> fp8_op(const Contract& c, const Input& in, const Observed& obs, std::int64_t g) {
  if (obs.quant) {
    const Tensor& t = obs.quant->scale;
    if (t.dtype() != DType::f32 || g >= t.numel()) return std::nullopt;
    const float stored = t.data<float>()[g];
    return fp8_op_for(c, c.stored == StoredScale::inverse ? 1.0f / stored : stored);
  }
  return fp8_op_for(c, fp8_nominal_scale(c, group_amax(in, g)));
}

std::optional<ScaledOp> nvfp4_op(const Contract& c, const Input& in, const Observed& obs, std::int64_t g) {
  float s = 0.0f, t = 0.0f;
  if (obs.quant) {
    const Tensor& sc = obs.quant->scale;
    if (sc.dtype() != DType::u8 || g >= sc.numel()) return std::nullopt;
    s = elem_decode(ElemFormat::e4m3, sc.data<std::uint8_t>()[g]);
    const Tensor& ts = obs.quant->tensor_scale;
    if (c.tensor_scale != TensorScale::none) {
      if (ts.dtype() != DType::f32 || ts.numel() != 1) return std::nullopt;
      t = ts.data<float>()[0];
    }
    // te stores the tensor amax; its steps use S_enc = (E * 6) / amax.
    if (c.tensor_scale == TensorScale::te) t = nvfp4_nominal_tensor_scale(c, t);
  } else {
    t = nvfp4_nominal_tensor_scale(c, in.tensor_amax);
    s = nvfp4_nominal_block_scale(c, group_amax(in, g), t);
  }
  if (!(s > 0.0f) || !std::isfinite(s)) return std::nullopt;
  if (c.nvfp4_quotient == Nvfp4Quotient::divide) {
    if (c.tensor_scale == TensorScale::none) return ScaledOp{false, s};
    if (!(t > 0.0f) || !std::isfinite(t)) return std::nullopt;
    return ScaledOp{false, c.tensor_scale == TensorScale::multiplier ? s / t : s * t};
  }
  if (c.tensor_scale == TensorScale::none) return ScaledOp{true, 1.0f / s};
  if (!(t > 0.0f) || !std::isfinite(t)) return std::nullopt;
  if (c.tensor_scale == TensorScale::te)
    return ScaledOp{true, std::min(1.0f / (s * (1.0f / t)), std::numeric_limits<float>::max())};
  return ScaledOp{true, (1.0f / t) / s};
}

// The element format fp8.scaled and nvfp4 round x scaled by a group's scale onto.
ElemFormat scaled_element(const Contract& c) { return c.family == Family::nvfp4 ? ElemFormat::e2m1 : c.element; }

const std::vector<float>& scaled_table(const Contract& c) { return elem_value_table(scaled_element(c)); }

// The scaled family's op for group g, by the family's row of the code table below.
std::optional<ScaledOp> scaled_op(const Contract& c, const Input& in, const Observed& obs, std::int64_t g);

// Elements of groups with an op whose scaled magnitude satisfies pred.
template <class Pred>
std::int64_t count_scaled(const Contract& c, const Input& in, const Observed& obs, Pred&& pred) {
  std::int64_t n = 0;
  for (std::int64_t g = 0; g < in.groups.count(); ++g) {
    const std::optional<ScaledOp> op = scaled_op(c, in, obs, g);
    if (!op) continue;
    for (std::int64_t i = 0; i < in.groups.size(g); ++i) {
      const float x = value(in, g, i);
      if (std::isfinite(x)) n += pred(std::fabs(op->apply(x))) ? 1 : 0;
    }
  }
  return n;
}

// ---- each family's codes, as exact_ties and saturation count them ----------------------

// x scaled as the contract scales it, on the element grid (fp8.scaled, nvfp4).
std::int64_t scaled_ties(const Contract& c, const Input& in, const Observed& obs) {
  const std::vector<float>& table = scaled_table(c);
  return count_scaled(c, in, obs, [&](float a) { return is_midpoint(table, a); });
}
std::int64_t scaled_saturated(const Contract& c, const Input& in, const Observed& obs) {
  const float top = top_code(c);
  return count_scaled(c, in, obs, [top](float a) { return a > top; });
}

// Elements of the groups that have a scale (scale_of: mx_scale or int8_scale) whose |x| and
// scale satisfy pred.
using ScaleOf = std::optional<double> (*)(const Contract&, const Input&, const Observed&, std::int64_t);

template <class Pred>
std::int64_t count_by_scale(const Contract& c, const Input& in, const Observed& obs, ScaleOf scale_of, Pred&& pred) {
  std::int64_t n = 0;
  for (std::int64_t g = 0; g < in.groups.count(); ++g) {
    const std::optional<double> s = scale_of(c, in, obs, g);
    if (!s) continue;
    for (std::int64_t i = 0; i < in.groups.size(g); ++i)
      n += pred(std::fabs(static_cast<double>(value(in, g, i))), *s) ? 1 : 0;
  }
  return n;
}

std::int64_t mx_ties(const Contract& c, const Input& in, const Observed& obs) {
  const std::vector<float>& table = elem_value_table(c.element);
  return count_by_scale(c, in, obs, mx_scale,
                        [&](double a, double s) { return std::isfinite(a) && is_midpoint(table, a / s); });
}
// The band the floor scale saturates: |x| / 2^(floor(log2 amax) - emax) > element max.
std::int64_t mx_saturated(const Contract& c, const Input& in, const Observed&) {
  const ElemTraits& t = elem_traits(c.element);
  std::int64_t n = 0;
  for (std::int64_t g = 0; g < in.groups.count(); ++g) {
    const float amax = group_amax(in, g);
    if (!(amax > 0.0f)) continue;
    const int shift = floor_log2(amax) - t.emax;
    for (std::int64_t i = 0; i < in.groups.size(g); ++i) {
      const double a = std::fabs(value(in, g, i));
      n += std::isfinite(a) && std::ldexp(a, -shift) > t.max ? 1 : 0;
    }
  }
  return n;
}

std::int64_t hif4_ties(const Contract&, const Input& in, const Observed& obs) {
  return count_hif4(in, obs, [](float mant) {
    const float q = mant * 4.0f;
    return q - std::floor(q) == 0.5f && std::floor(q) <= 6.0f;
  });
}
std::int64_t hif4_saturated(const Contract&, const Input& in, const Observed& obs) {
  return count_hif4(in, obs, [](float mant) { return std::floor(mant * 4.0f + 0.5f) > 7.0f; });
}

std::int64_t int8_ties(const Contract& c, const Input& in, const Observed& obs) {
  return count_by_scale(c, in, obs, int8_scale, [](double a, double s) { return is_half_integer_multiple(a, s); });
}
std::int64_t int8_saturated(const Contract& c, const Input& in, const Observed& obs) {
  return count_by_scale(c, in, obs, int8_scale, [](double a, double s) { return std::isfinite(a) && a > 127.0 * s; });
}

std::int64_t no_codes(const Contract&, const Input&, const Observed&) { return 0; }  // pool: no scale groups

// One row per family: how its exact ties and saturated elements are counted, and for the
// families that scale x before rounding it onto an element grid (fp8.scaled, nvfp4) the op a
// group's elements meet.
struct CodeRow {
  Family family;
  std::int64_t (*ties)(const Contract& c, const Input& in, const Observed& obs);
  std::int64_t (*saturated)(const Contract& c, const Input& in, const Observed& obs);
  std::optional<ScaledOp> (*scaled_op)(const Contract& c, const Input& in, const Observed& obs, std::int64_t g);
};

const CodeRow kCodeRows[] = {
    {Family::mx, mx_ties, mx_saturated, nullptr},
    {Family::int8_block, int8_ties, int8_saturated, nullptr},
    {Family::int8_token, int8_ties, int8_saturated, nullptr},
    {Family::int8_group, int8_ties, int8_saturated, nullptr},
    {Family::hif4, hif4_ties, hif4_saturated, nullptr},
    {Family::pool, no_codes, no_codes, nullptr},
    {Family::fp8_scaled, scaled_ties, scaled_saturated, fp8_op},
    {Family::nvfp4, scaled_ties, scaled_saturated, nvfp4_op},
};

const CodeRow& code_row(Family f) {
  for (const CodeRow& r : kCodeRows)
    if (r.family == f) return r;
  fail(ErrorKind::bad_argument,
       "family " + std::to_string(static_cast<int>(f)) + " has no row in the predicates' code table");
}

std::optional<ScaledOp> scaled_op(const Contract& c, const Input& in, const Observed& obs, std::int64_t g) {
  return code_row(c.family).scaled_op(c, in, obs, g);
}

bool is_scaled_family(const Contract& c) { return code_row(c.family).scaled_op != nullptr; }

Predicate make(const std::string& name, const std::string& description,
               std::function<std::int64_t(const Contract&, const Input&, const Observed&)> f) {
  return Predicate{name, description, 1,
                   [f = std::move(f)](const Contract& c, const TensorView& x, const Observed& obs) {
                     return f(c, read_input(c, x), obs);
                   }};
}

}  // namespace

// ---- Groups ----------------------------------------------------------------------------

Groups::Groups(const Contract& c, const Shape& shape) : shape_(shape) {
  // The family row's grain says which elements share a scale (pool: none, not a quantizer).
  const auto grain_of = family_traits(c.family).grain;
  if (!grain_of || shape.empty()) return;
  const ScaleGrain grain = grain_of(c);
  if (grain.kind == Granularity::group || grain.kind == Granularity::row) {
    // Runs along the last axis: computed, not listed.
    const std::int64_t k = shape.back();
    len_ = grain.kind == Granularity::row ? k : grain.cols;
    if (k <= 0 || len_ <= 0) return;
    per_row_ = ceil_div(k, len_);
    count_ = shape_numel(shape) / k * per_row_;
    return;
  }
  // tensor, tile:MxN, head_block:T: members listed per domain, in C order.
  Shape scale;
  try {
    scale = grain_scale_shape(grain, shape, family_name(c.family));
  } catch (const Error&) {
    return;  // a shape the granularity refuses has no groups
  }
  count_ = shape_numel(scale);
  const std::int64_t n = shape_numel(shape);
  offsets_.assign(static_cast<std::size_t>(count_ + 1), 0);
  std::vector<std::int64_t> of(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    of[static_cast<std::size_t>(i)] = grain_scale_index(grain, shape, i);
    ++offsets_[static_cast<std::size_t>(of[static_cast<std::size_t>(i)] + 1)];
  }
  for (std::size_t g = 0; g + 1 < offsets_.size(); ++g) offsets_[g + 1] += offsets_[g];
  std::vector<std::int64_t> next(offsets_.begin(), offsets_.end() - 1);
  members_.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    members_[static_cast<std::size_t>(next[static_cast<std::size_t>(of[static_cast<std::size_t>(i)])]++)] = i;
}

std::int64_t Groups::size(std::int64_t g) const {
  if (!offsets_.empty()) return offsets_[static_cast<std::size_t>(g + 1)] - offsets_[static_cast<std::size_t>(g)];
  const std::int64_t j = g % per_row_;
  return std::min(len_, shape_.back() - j * len_);
}

std::int64_t Groups::member(std::int64_t g, std::int64_t i) const {
  if (!offsets_.empty()) return members_[static_cast<std::size_t>(offsets_[static_cast<std::size_t>(g)] + i)];
  return (g / per_row_) * shape_.back() + (g % per_row_) * len_ + i;
}

int working_fraction_bits(const Contract& c, DType input) {
  if ((c.family == Family::mx && c.prequant == Prequant::bf16) || input == DType::bf16) return 7;
  return input == DType::f16 ? 10 : 23;
}

float top_code(const Contract& c) { return lab_family(c.family).top_code(c); }

float fp8_nominal_scale(const Contract& c, float amax) {
  if (amax == 0.0f && c.zero_group == ZeroGroup::zero) return 0.0f;
  if (!(amax > 0.0f) && c.zero_group == ZeroGroup::one_unless_positive) return 1.0f;
  const double max_elem = elem_traits(c.element).max;
  double a = std::max(static_cast<double>(amax), c.amax_floor);
  if (c.zero_group == ZeroGroup::amax_one) a = amax <= c.amax_floor ? 1.0 : amax;
  if (a == 0.0 && c.zero_group == ZeroGroup::one) return 1.0f;
  const float af = static_cast<float>(a);
  float s = 0.0f;
  // scale_arith=input rounds this to the input's dtype: nominal scales ignore that rounding.
  if (c.scale_kind == ScaleKind::descale) {
    switch (c.scale_arith) {
      case ScaleArith::fp32:
      case ScaleArith::fp32_satfinite:
      case ScaleArith::input:
      case ScaleArith::reciprocal_multiplier: s = af / static_cast<float>(max_elem); break;
      case ScaleArith::reciprocal: s = af * (1.0f / static_cast<float>(max_elem)); break;
      case ScaleArith::fp64: s = static_cast<float>(a / max_elem); break;
    }
  } else if (c.scale_arith == ScaleArith::reciprocal_multiplier) {
    s = static_cast<float>(max_elem) * (1.0f / af);
  } else {
    s = c.scale_arith == ScaleArith::fp64 ? static_cast<float>(max_elem / a) : static_cast<float>(max_elem) / af;
  }
  if (s == 0.0f && c.zero_group == ZeroGroup::eps) s = 0x1p-23f;
  if (c.scale_arith == ScaleArith::fp32_satfinite && std::isinf(s)) s = std::numeric_limits<float>::max();
  // down_log2f is taken as down: nominal scales only size the cases (a few-ulp difference below
  // 2^k does not move a target), and libm's log2f is not the same everywhere.
  if (s > 0.0f && std::isfinite(s) && c.scale_pow2 != ScalePow2::none) {
    const int e = floor_log2(s);
    s = std::ldexp(1.0f, is_pow2(s) || c.scale_pow2 != ScalePow2::up ? e : e + 1);
  }
  return s;
}

float nvfp4_nominal_tensor_scale(const Contract& c, float tensor_amax) {
  switch (c.tensor_scale) {
    case TensorScale::amax: return tensor_amax / (448.0f * 6.0f);
    case TensorScale::te: {
      const float s = std::min(static_cast<float>(c.global_e4m3_max) * 6.0f / tensor_amax, std::numeric_limits<float>::max());
      return tensor_amax == 0.0f || s == 0.0f ? 1.0f : s;
    }
    case TensorScale::multiplier: {
      const float gs = 448.0f * 6.0f * (1.0f / std::max(tensor_amax, 0x1p-126f));
      return std::isfinite(gs) ? gs : 1.0f;
    }
    case TensorScale::none: break;
  }
  return 0.0f;
}

float nvfp4_nominal_block_scale(const Contract& c, float amax, float tensor_scale) {
  if (c.tensor_scale == TensorScale::te)  // saturated, no lower clamp
    return elem_decode(ElemFormat::e4m3,
                       elem_encode(ElemFormat::e4m3, nvfp4_unrounded_block_scale(c, amax, tensor_scale), Rounding::rne,
                                   Overflow::saturate));
  float s = nvfp4_unrounded_block_scale(c, amax, tensor_scale);
  if (c.zero_block == ZeroBlock::one && s == 0.0f) s = 1.0f;
  if (!(s == s)) return s;  // NaN (an all-zero tensor's 0 / 0)
  s = std::clamp(s, c.block_min, 448.0f);
  std::uint8_t code = elem_encode(ElemFormat::e4m3, s, Rounding::rne, Overflow::saturate);
  if (c.zero_block == ZeroBlock::eps && code == 0) code = 0x20;
  return elem_decode(ElemFormat::e4m3, code);
}

float nvfp4_unrounded_block_scale(const Contract& c, float amax, float tensor_scale) {
  switch (c.tensor_scale) {
    case TensorScale::none: return amax / 6.0f;
    case TensorScale::amax:
      return c.block_arith == BlockArith::fused ? amax / (6.0f * tensor_scale) : amax / 6.0f / tensor_scale;
    case TensorScale::te: return amax * (tensor_scale * (1.0f / 6.0f));
    case TensorScale::multiplier: return tensor_scale * (amax / 6.0f);
  }
  return amax / 6.0f;
}

float int8_nominal_scale(const Contract& c, float amax) {
  // (scale_arith=input's rounding to the input's dtype is left out: the cases that use this
  // anchor their scales on powers of two, which every dtype holds.)
  float s = c.scale_mode == ScaleMode::before ? std::max(amax, c.scale_min) / c.qmax
                                              : std::max(amax / c.qmax, c.scale_min);
  if (scale_encoding(c) == ScaleEncoding::f16) s = round_f16(s);
  return s;
}

// ---- predicates --------------------------------------------------------------------------

Predicate all_equal() {
  return make("all_equal", "groups whose elements all equal the tensor's first element",
              [](const Contract&, const Input& in, const Observed&) -> std::int64_t {
                if (in.v.empty()) return 0;
                const float first = in.v[0];
                return count_groups(in, [&](std::int64_t g) {
                  for (std::int64_t i = 0; i < in.groups.size(g); ++i)
                    if (!(value(in, g, i) == first)) return false;
                  return true;
                });
              });
}

Predicate exact_ties() {
  return make(
      "exact_ties",
      "elements whose x / decoded scale lies exactly on the midpoint of two adjacent representable values "
      "(int8: n + 1/2; HiF4: mant on the midpoints of its 0.25 grid; fp8.scaled, nvfp4: x scaled as the contract "
      "scales it)",
      [](const Contract& c, const Input& in, const Observed& obs) -> std::int64_t {
        return code_row(c.family).ties(c, in, obs);
      });
}

Predicate amax_pow2() {
  return make("amax_pow2", "groups whose amax is exactly 2^k",
              [](const Contract&, const Input& in, const Observed&) {
                return count_groups(in, [&](std::int64_t g) { return is_pow2(group_amax(in, g)); });
              });
}

Predicate amax_above_pow2() {
  return make("amax_above_pow2",
              "groups whose amax is the next value above 2^k in the working precision (bf16 when the contract or "
              "input is bf16, else the input's)",
              [](const Contract& c, const Input& in, const Observed&) {
                const int p = working_fraction_bits(c, in.dtype);
                return count_groups(in, [&](std::int64_t g) {
                  const float a = group_amax(in, g);
                  if (!(a >= 0x1p-126f)) return false;
                  return a == std::ldexp(1.0f + std::ldexp(1.0f, -p), floor_log2(a));
                });
              });
}

Predicate all_zero_groups() {
  return make("all_zero", "groups whose elements are all zero",
              [](const Contract&, const Input& in, const Observed&) {
                return count_groups(in, [&](std::int64_t g) {
                  for (std::int64_t i = 0; i < in.groups.size(g); ++i)
                    if (value(in, g, i) != 0.0f) return false;
                  return true;
                });
              });
}

Predicate all_negative_groups() {
  return make("all_negative", "groups whose elements are all < 0",
              [](const Contract&, const Input& in, const Observed&) {
                return count_groups(in, [&](std::int64_t g) {
                  for (std::int64_t i = 0; i < in.groups.size(g); ++i)
                    if (!(value(in, g, i) < 0.0f)) return false;
                  return true;
                });
              });
}

Predicate big_small_mix() {
  return make("big_small_mix", "groups whose max |x| is at least 2^16 times their smallest non-zero |x|",
              [](const Contract&, const Input& in, const Observed&) {
                return count_groups(in, [&](std::int64_t g) {
                  float lo = INFINITY;
                  for (std::int64_t i = 0; i < in.groups.size(g); ++i) {
                    const float a = std::fabs(value(in, g, i));
                    if (a > 0.0f && a < lo) lo = a;
                  }
                  return std::isfinite(lo) && static_cast<double>(group_amax(in, g)) >= 0x1p16 * lo;
                });
              });
}

Predicate bf16_subnormals() {
  return make("bf16_subnormal", "elements that are non-zero bf16 subnormals (0 < |x| < 2^-126, bf16-exact)",
              [](const Contract&, const Input& in, const Observed&) {
                return static_cast<std::int64_t>(std::count_if(in.raw.begin(), in.raw.end(), [](float x) {
                  const float a = std::fabs(x);
                  return a > 0.0f && a < 0x1p-126f && round_bf16(x) == x;
                }));
              });
}

Predicate elements_equal(const std::string& name, float magnitude) {
  char desc[96];
  std::snprintf(desc, sizeof desc, "elements with |x| == %g as stored in the input's dtype", magnitude);
  return make(name, desc, [magnitude](const Contract& c, const Input& in, const Observed&) -> std::int64_t {
    float m = in.dtype == DType::bf16 ? round_bf16(magnitude) : in.dtype == DType::f16 ? round_f16(magnitude) : magnitude;
    if (c.family == Family::mx && c.prequant == Prequant::bf16) m = round_bf16(m);
    if (m == 0.0f) return 0;
    return std::count_if(in.v.begin(), in.v.end(), [m](float x) { return std::fabs(x) == m; });
  });
}

Predicate group_amax_equals(const std::string& name, float amax) {
  char desc[96];
  std::snprintf(desc, sizeof desc, "groups whose amax is exactly %a", static_cast<double>(amax));
  return make(name, desc, [amax](const Contract&, const Input& in, const Observed&) {
    return count_groups(in, [&](std::int64_t g) { return group_amax(in, g) == amax; });
  });
}

const char* non_finite_name(NonFinite k) {
  switch (k) {
    case NonFinite::pos_inf: return "pos_inf";
    case NonFinite::neg_inf: return "neg_inf";
    case NonFinite::nan: return "nan";
  }
  return "?";
}

const char* position_name(Position p) {
  switch (p) {
    case Position::first: return "first";
    case Position::middle: return "middle";
    case Position::last: return "last";
  }
  return "?";
}

Predicate non_finite_at(NonFinite kind, Position pos) {
  const std::string what = kind == NonFinite::pos_inf ? "+inf" : kind == NonFinite::neg_inf ? "-inf" : "NaN";
  const std::string where = pos == Position::first ? "first (index 0)"
                            : pos == Position::middle ? "middle (index n/2)"
                                                      : "last (index n-1)";
  return make(std::string(non_finite_name(kind)) + "_" + position_name(pos),
              "groups with " + what + " at their " + where + " position",
              [kind, pos](const Contract&, const Input& in, const Observed&) {
                return count_groups(in, [&](std::int64_t g) {
                  const std::int64_t n = in.groups.size(g);
                  const std::int64_t i = pos == Position::first ? 0 : pos == Position::middle ? n / 2 : n - 1;
                  const float x = in.raw[static_cast<std::size_t>(in.groups.member(g, i))];
                  switch (kind) {
                    case NonFinite::pos_inf: return std::isinf(x) && x > 0.0f;
                    case NonFinite::neg_inf: return std::isinf(x) && x < 0.0f;
                    case NonFinite::nan: return std::isnan(x);
                  }
                  return false;
                });
              });
}

Predicate saturation() {
  return make(
      "saturation",
      "elements past the largest code: MX |x| / 2^(floor(log2 amax) - emax) > element max (the band the floor "
      "scale saturates); int8 |x| / scale > 127; HiF4 codes clamped to 7; fp8.scaled and nvfp4 |x| scaled by "
      "the group's scale > the element max (448, 57344; 6)",
      [](const Contract& c, const Input& in, const Observed& obs) -> std::int64_t {
        return code_row(c.family).saturated(c, in, obs);
      });
}

Predicate tail() {
  return make("tail",
              "partial groups: MX, int8.group, HiF4, nvfp4 rows with K % group != 0; int8.block (b, head) with "
              "S % token_block != 0; fp8.scaled group, tile and head_block domains cut short by the tensor's "
              "edge; int8.token and fp8.scaled tensor / row rows with K % 16 != 0 (a partial SIMD vector)",
              [](const Contract& c, const Input& in, const Observed&) -> std::int64_t {
                const Shape& s = in.shape;
                if (s.empty()) return 0;
                if (c.family == Family::int8_block)
                  return s.size() == 4 && s[1] % c.token_block != 0 ? s[0] * s[2] : 0;
                const Granularity grain = c.granularity.kind;
                if (c.family == Family::fp8_scaled && grain != Granularity::tensor && grain != Granularity::row) {
                  // Domains the tensor's edge cuts short: fewer elements than the largest one.
                  std::int64_t whole = 0;
                  for (std::int64_t g = 0; g < in.groups.count(); ++g) whole = std::max(whole, in.groups.size(g));
                  return count_groups(in, [&](std::int64_t g) { return in.groups.size(g) < whole; });
                }
                const std::int64_t k = s.back();
                if (k <= 0) return 0;
                const std::int64_t rows = shape_numel(s) / k;
                // Groups along the last axis (the family row's grain); rows: a 16-wide SIMD vector.
                const auto grain_of = family_traits(c.family).grain;
                const std::optional<ScaleGrain> g = grain_of ? std::optional(grain_of(c)) : std::nullopt;
                const std::int64_t len = g && g->kind == Granularity::group ? g->cols : 16;
                return k % len != 0 ? rows : 0;
              });
}

Predicate max_outside_first_vector() {
  return make("max_outside_first16",
              "groups whose (first) max |x| lies outside their first 16 elements (first n/2 for groups of <= 16)",
              [](const Contract&, const Input& in, const Observed&) {
                return count_groups(in, [&](std::int64_t g) {
                  const std::int64_t n = in.groups.size(g);
                  const std::int64_t threshold = n > 16 ? 16 : n / 2;
                  std::int64_t arg = 0;
                  float best = 0.0f;
                  for (std::int64_t i = 0; i < n; ++i) {
                    const float a = std::fabs(value(in, g, i));
                    if (std::isfinite(a) && a > best) {
                      best = a;
                      arg = i;
                    }
                  }
                  return best > 0.0f && arg >= threshold;
                });
              });
}

Predicate scale_marker() {
  return make(
      "scale_marker",
      "MX groups whose amax 2^(emax + k) has a k no other group has, and (with a result) whose scale byte "
      "127 + k sits at the group's flat offset in the contract's scale layout",
      [](const Contract& c, const Input& in, const Observed& obs) -> std::int64_t {
        if (c.family != Family::mx || in.groups.count() == 0) return 0;
        const int emax = elem_traits(c.element).emax;
        std::map<int, int> uses;
        for (std::int64_t g = 0; g < in.groups.count(); ++g) {
          const float a = group_amax(in, g);
          if (is_pow2(a)) ++uses[floor_log2(a) - emax];
        }
        const std::int64_t per_row = ceil_div(in.shape.back(), c.block);
        return count_groups(in, [&](std::int64_t g) {
          const float a = group_amax(in, g);
          if (!is_pow2(a)) return false;
          const int k = floor_log2(a) - emax;
          if (uses[k] != 1) return false;
          if (!obs.quant) return true;
          const Tensor& s = obs.quant->scale;
          const std::int64_t off = ref::mx_scale_offset(c, g / per_row, g % per_row, per_row);
          return s.dtype() == DType::u8 && off < s.numel() && s.data<std::uint8_t>()[off] == 127 + k;
        });
      });
}

Predicate amax_sweep() {
  return make("amax_sweep", "groups whose amax is top * 2^k (top: the element max, 127 for int8, 7 for HiF4)",
              [](const Contract& c, const Input& in, const Observed&) {
                int e = 0;
                const float top_mant = std::frexp(top_code(c), &e);
                return count_groups(in, [&](std::int64_t g) {
                  const float a = group_amax(in, g);
                  return a > 0.0f && std::frexp(a, &e) == top_mant;
                });
              });
}

Predicate negative_zero() {
  return make("negative_zero", "elements that are -0.0",
              [](const Contract&, const Input& in, const Observed&) {
                return static_cast<std::int64_t>(
                    std::count_if(in.v.begin(), in.v.end(), [](float x) { return x == 0.0f && std::signbit(x); }));
              });
}

Predicate bf16_binade_cross() {
  return make("bf16_binade_cross", "groups whose fp32 amax and bf16(amax) lie in different binades",
              [](const Contract&, const Input& in, const Observed&) {
                return count_groups(in, [&](std::int64_t g) {
                  float a = 0.0f;
                  for (std::int64_t i = 0; i < in.groups.size(g); ++i) {
                    const float x = std::fabs(in.raw[static_cast<std::size_t>(in.groups.member(g, i))]);
                    if (std::isfinite(x) && x > a) a = x;
                  }
                  return a >= 0x1p-126f && floor_log2(a) != floor_log2(round_bf16(a));
                });
              });
}

Predicate empty_rows() {
  return make("empty_rows", "the tensor has no rows (R == 0)",
              [](const Contract&, const Input& in, const Observed&) -> std::int64_t {
                return !in.shape.empty() && in.shape[0] == 0 ? 1 : 0;
              });
}

// nvfp4: a block's E4M3 scale before rounding (and before the clamp), nominal.
namespace {
float nvfp4_unrounded_scale(const Contract& c, const Input& in, std::int64_t g) {
  return nvfp4_unrounded_block_scale(c, group_amax(in, g), nvfp4_nominal_tensor_scale(c, in.tensor_amax));
}
}  // namespace

Predicate scaled_subnormals() {
  return make("scaled_subnormals",
              "elements whose value scaled by the group's scale is a non-zero value below the element format's "
              "smallest normal (fp8.scaled, nvfp4)",
              [](const Contract& c, const Input& in, const Observed& obs) -> std::int64_t {
                if (!is_scaled_family(c)) return 0;
                const ElemTraits& t = elem_traits(scaled_element(c));
                const float min_normal = std::ldexp(1.0f, 1 - t.bias);
                return count_scaled(c, in, obs, [min_normal](float a) { return a > 0.0f && a < min_normal; });
              });
}

Predicate block_scale_ties() {
  return make("block_scale_ties", "nvfp4 blocks whose unrounded scale fp32(amax / 6) [/ t] is the midpoint of two E4M3 values",
              [](const Contract& c, const Input& in, const Observed&) -> std::int64_t {
                if (c.family != Family::nvfp4) return 0;
                const std::vector<float>& table = elem_value_table(ElemFormat::e4m3);
                return count_groups(in, [&](std::int64_t g) { return is_midpoint(table, nvfp4_unrounded_scale(c, in, g)); });
              });
}

Predicate block_scale_clamped() {
  return make("block_scale_clamped", "nvfp4 blocks whose unrounded scale fp32(amax / 6) [/ t] is below 2^-6 (clamped up to it)",
              [](const Contract& c, const Input& in, const Observed&) -> std::int64_t {
                if (c.family != Family::nvfp4) return 0;
                return count_groups(in, [&](std::int64_t g) { return nvfp4_unrounded_scale(c, in, g) < 0x1p-6f; });
              });
}

Predicate tensor_amax_between(const std::string& name, float lo, float hi) {
  char desc[128];
  std::snprintf(desc, sizeof desc, "the tensor's max |x| over finite elements lies in [%g, %g]", static_cast<double>(lo),
                static_cast<double>(hi));
  return make(name, desc, [lo, hi](const Contract&, const Input& in, const Observed&) -> std::int64_t {
    return in.tensor_amax >= lo && in.tensor_amax <= hi ? 1 : 0;
  });
}

}  // namespace qexact::conformance
