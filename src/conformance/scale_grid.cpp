#include "conformance/scale_grid.hpp"

#include "contracts/scale_grain.hpp"

#include "qexact/quantize.hpp"
#include "reference/int8_steps.hpp"
#include "reference/reference.hpp"

namespace qexact::conformance {
namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return b > 0 ? (a + b - 1) / b : 0; }

}  // namespace

ScaleGrid::ScaleGrid(const Contract& c, const Shape& x) : c_(c), x_(x) {
  const std::int64_t numel = shape_numel(x);
  const std::int64_t k = x.empty() ? 1 : x.back();
  switch (c.family) {
    case Family::mx:
      per_row_ = ceil_div(k, c.block);
      row_len_ = k;
      rows_ = k > 0 ? numel / k : 0;
      groups_ = rows_ * per_row_;
      elements_ = numel;
      break;
    case Family::int8_block:
    case Family::int8_token:
    case Family::int8_group:
      row_len_ = k;
      rows_ = k > 0 ? numel / k : 0;
      groups_ = shape_numel(scale_shape(c, x));
      per_row_ = c.family == Family::int8_group ? k / c.group : 1;
      blocks_ = c.family == Family::int8_block ? ceil_div(x[1], c.token_block) : 0;
      elements_ = numel;
      break;
    case Family::pool: {
      // Elements are the means (B, cells, F...); a group is one (b, cell).
      per_row_ = x.size() >= 2 ? ceil_div(x[1], c.pool) : 0;
      Shape out = x;
      if (out.size() >= 2) out[1] = per_row_;
      elements_ = shape_numel(out);
      groups_ = x.empty() ? 0 : x[0] * per_row_;
      row_len_ = groups_ > 0 ? elements_ / groups_ : 0;
      rows_ = groups_;
      break;
    }
    case Family::hif4:
      row_len_ = k;
      rows_ = k > 0 ? numel / k : 0;
      groups_ = numel / 64;
      elements_ = numel;
      break;
    case Family::fp8_scaled:
    case Family::nvfp4:
      row_len_ = k;
      rows_ = k > 0 ? numel / k : 0;
      groups_ = shape_numel(scale_shape(c, x));
      per_row_ = c.family == Family::nvfp4 ? k / kNvfp4Block
                 : c.granularity.kind == Granularity::group ? ceil_div(k, c.granularity.cols)
                                                            : 1;
      elements_ = numel;
      break;
  }
}

std::int64_t ScaleGrid::group_of(std::int64_t e) const {
  switch (c_.family) {
    case Family::mx: return e / row_len_ * per_row_ + (e % row_len_) / c_.block;
    case Family::int8_block: return ref::int8::scale_index_of(c_, x_, e);
    case Family::int8_token:
    case Family::int8_group: return ref::int8::scale_index_of(c_, x_, e);
    case Family::pool:
    case Family::hif4: return row_len_ > 0 ? e / (c_.family == Family::hif4 ? 64 : row_len_) : 0;
    case Family::fp8_scaled: return grain_scale_index(c_.granularity, x_, e);
    case Family::nvfp4: return e / kNvfp4Block;
  }
  return 0;
}

bool ScaleGrid::has_tail() const {
  switch (c_.family) {
    case Family::mx: return row_len_ % c_.block != 0;
    case Family::int8_block: return x_.size() == 4 && x_[1] % c_.token_block != 0;
    case Family::pool: return x_.size() >= 2 && x_[1] % c_.pool != 0;
    default: return false;
  }
}

bool ScaleGrid::is_tail_group(std::int64_t g) const {
  if (!has_tail()) return false;
  switch (c_.family) {
    case Family::mx:
    case Family::pool: return g % per_row_ == per_row_ - 1;
    case Family::int8_block: return g % blocks_ == blocks_ - 1;
    default: return false;
  }
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

Shape ScaleGrid::shape() const {
  Shape s = x_;
  switch (c_.family) {
    case Family::mx:
    case Family::int8_group:
    case Family::hif4:
      if (s.empty()) return s;
      s.back() = c_.family == Family::hif4 ? row_len_ / 64 : per_row_;
      return s;
    case Family::int8_block:
    case Family::int8_token:
    case Family::fp8_scaled:
    case Family::nvfp4: return scale_shape(c_, x_);
    case Family::pool: return x_.empty() ? Shape{} : Shape{x_[0], per_row_};
  }
  return s;
}

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

std::int64_t ordered_scale(std::uint32_t bits, DType scale_dtype) {
  switch (scale_dtype) {
    case DType::f32: {
      const std::int64_t mag = bits & 0x7FFFFFFFu;
      return (bits >> 31) != 0 ? -mag : mag;
    }
    case DType::f16:
    case DType::bf16: {
      const std::int64_t mag = bits & 0x7FFFu;
      return (bits >> 15) != 0 ? -mag : mag;
    }
    default: return static_cast<std::int64_t>(bits);
  }
}

}  // namespace qexact::conformance
