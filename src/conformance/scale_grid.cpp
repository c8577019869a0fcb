#include "conformance/scale_grid.hpp"

#include <algorithm>

#include "contracts/family_table.hpp"
#include "contracts/scale_grain.hpp"
#include "qexact/error.hpp"

#include "qexact/quantize.hpp"
#include "reference/mx_ref.hpp"

namespace qexact::conformance {
namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return b > 0 ? (a + b - 1) / b : 0; }

}  // namespace

ScaleGrid::ScaleGrid(const Contract& c, const Shape& x) : c_(c), x_(x) {
  const std::int64_t numel = shape_numel(x);
  const std::int64_t k = x.empty() ? 1 : x.back();
  const auto grain_of = family_traits(c.family).grain;
  if (!grain_of) {
    // pool.mean: elements are the means (B, cells, F...); a group is one (b, cell).
    per_row_ = x.size() >= 2 ? ceil_div(x[1], c.pool) : 0;
    Shape out = x;
    if (out.size() >= 2) out[1] = per_row_;
    elements_ = shape_numel(out);
    groups_ = x.empty() ? 0 : x[0] * per_row_;
    row_len_ = groups_ > 0 ? elements_ / groups_ : 0;
    rows_ = groups_;
    grid_ = x.empty() ? Shape{} : Shape{x[0], per_row_};
    return;
  }
  // The family row's grain numbers the groups: the C order of its scale shape (MX's before its
  // layout; HiF4's 64-blocks along the last axis).
  grain_ = grain_of(c);
  row_len_ = k;
  rows_ = k > 0 ? numel / k : 0;
  elements_ = numel;
  try {
    grid_ = grain_scale_shape(grain_, x, family_name(c.family));
  } catch (const Error&) {
    return;  // a shape the contract refuses: no groups
  }
  groups_ = shape_numel(grid_);
  per_row_ = grain_.kind == Granularity::group ? ceil_div(k, grain_.cols) : 1;
}

std::int64_t ScaleGrid::group_of(std::int64_t e) const {
  if (!family_traits(c_.family).grain) return row_len_ > 0 ? e / row_len_ : 0;
  return grain_scale_index(grain_, x_, e);
}

bool ScaleGrid::has_tail() const {
  if (!family_traits(c_.family).grain) return x_.size() >= 2 && x_[1] % c_.pool != 0;
  switch (grain_.kind) {
    case Granularity::group: return row_len_ % grain_.cols != 0;
    case Granularity::tile: return rows_ % grain_.rows != 0 || row_len_ % grain_.cols != 0;
    case Granularity::head_block: return x_.size() == 4 && x_[1] % grain_.rows != 0;
    case Granularity::tensor:
    case Granularity::row: break;
  }
  return false;
}

bool ScaleGrid::is_tail_group(std::int64_t g) const {
  if (!has_tail()) return false;
  if (!family_traits(c_.family).grain) return g % per_row_ == per_row_ - 1;
  const std::int64_t last = grid_.empty() ? 1 : grid_.back();  // domains along the grid's last axis
  switch (grain_.kind) {
    case Granularity::group:
    case Granularity::head_block: return g % last == last - 1;
    case Granularity::tile:
      return (rows_ % grain_.rows != 0 && g / last == grid_[0] - 1) || (row_len_ % grain_.cols != 0 && g % last == last - 1);
    case Granularity::tensor:
    case Granularity::row: break;
  }
  return false;
}

std::vector<std::uint32_t> ScaleGrid::scale_bits(const Tensor& scale) const {
  std::vector<std::uint32_t> out(static_cast<std::size_t>(groups_), 0);
  if (c_.family == Family::mx) {
    const auto* s = scale.data<std::uint8_t>();
    for (std::int64_t g = 0; g < groups_; ++g)
      out[static_cast<std::size_t>(g)] = s[ref::mx_scale_offset(c_, g / per_row_, g % per_row_, per_row_)];
    return out;
  }
  if (scale.dtype() == DType::u8) {  // nvfp4's E4M3 codes
    for (std::int64_t g = 0; g < groups_; ++g) out[static_cast<std::size_t>(g)] = scale.data<std::uint8_t>()[g];
  } else if (scale.dtype() == DType::f32) {
    for (std::int64_t g = 0; g < groups_; ++g) out[static_cast<std::size_t>(g)] = scale.data<std::uint32_t>()[g];
  } else {
    for (std::int64_t g = 0; g < groups_; ++g) out[static_cast<std::size_t>(g)] = scale.data<std::uint16_t>()[g];
  }
  return out;
}

Tensor ScaleGrid::scale_tensor(const std::vector<std::uint32_t>& bits, DType scale_dtype) const {
  Tensor t(scale_dtype, scale_shape(c_, x_));  // zero-filled
  for (std::int64_t g = 0; g < groups_; ++g) {
    const std::uint32_t b = bits[static_cast<std::size_t>(g)];
    if (c_.family == Family::mx)
      t.data<std::uint8_t>()[ref::mx_scale_offset(c_, g / per_row_, g % per_row_, per_row_)] = static_cast<std::uint8_t>(b);
    else if (scale_dtype == DType::f32)
      t.data<std::uint32_t>()[g] = b;
    else
      t.data<std::uint16_t>()[g] = static_cast<std::uint16_t>(b);
  }
  return t;
}

Shape ScaleGrid::shape() const { return grid_; }

std::vector<std::uint8_t> ScaleGrid::codes(const Tensor& payload) const {
  std::vector<std::uint8_t> out(static_cast<std::size_t>(elements_), 0);
  const auto* p = static_cast<const std::uint8_t*>(payload.raw());
  const bool fp4 = (c_.family == Family::mx && c_.element == ElemFormat::e2m1) || c_.family == Family::nvfp4;
  if (!fp4) {
    for (std::int64_t e = 0; e < elements_; ++e) out[static_cast<std::size_t>(e)] = p[e];
    return out;
  }
  const std::int64_t row_bytes = ceil_div(row_len_, 2);
  for (std::int64_t e = 0; e < elements_; ++e) {
    const std::int64_t col = e % row_len_;
    const std::uint8_t b = p[e / row_len_ * row_bytes + col / 2];
    out[static_cast<std::size_t>(e)] = static_cast<std::uint8_t>(col % 2 == 0 ? b & 0x0F : b >> 4);
  }
  return out;
}

std::int64_t ordered_scale(std::uint32_t bits, ScaleEncoding encoding) {
  // Sign-magnitude over the bits below the sign bit `sign`.
  auto signed_magnitude = [bits](std::uint32_t sign) {
    const std::int64_t mag = bits & (sign - 1u);
    return (bits & sign) != 0 ? -mag : mag;
  };
  switch (encoding) {
    case ScaleEncoding::e4m3: return signed_magnitude(0x80u);
    case ScaleEncoding::fp32: return signed_magnitude(0x80000000u);
    case ScaleEncoding::f16: return signed_magnitude(0x8000u);
    case ScaleEncoding::e8m0:
    case ScaleEncoding::none: break;
  }
  return static_cast<std::int64_t>(bits);
}

std::string scale_delta_unit(ScaleEncoding encoding) {
  switch (encoding) {
    case ScaleEncoding::e8m0: return "E8M0 steps";
    case ScaleEncoding::e4m3: return "E4M3 codes";
    case ScaleEncoding::fp32:
    case ScaleEncoding::f16: return std::string("ulps of ") + dtype_name(scale_dtype(encoding));
    case ScaleEncoding::none: break;
  }
  return "";
}

}  // namespace qexact::conformance
