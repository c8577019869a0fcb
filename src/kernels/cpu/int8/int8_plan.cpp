#include "kernels/cpu/int8/int8_plan.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "qexact/formats/bf16.hpp"
#include "qexact/formats/fp16.hpp"
#include "qexact/quantize.hpp"

namespace qexact::kernels {
namespace {

// int8.token's working row is fp32: the selector weighs a row at 4 bytes a value.
constexpr std::int64_t kWorkingBytesPerElement = 4;

float load_f32(const Int8Plan& p, std::int64_t offset) {
  const std::uint8_t* at = p.element(offset);
  if (p.dtype == DType::f32) {
    float f;
    std::memcpy(&f, at, sizeof f);
    return f;
  }
  std::uint16_t h;
  std::memcpy(&h, at, sizeof h);
  return p.dtype == DType::bf16 ? bf16_to_f32(h) : f16_to_f32(h);
}

}  // namespace

RowMap::RowMap(const TensorView& x) {
  for (int i = 0; i + 1 < x.rank(); ++i) {
    const std::int64_t size = x.shape[static_cast<std::size_t>(i)];
    const std::int64_t stride = x.strides[static_cast<std::size_t>(i)];
    if (size == 1) continue;  // its stride never multiplies a non-zero index
    if (!dims_.empty() && dims_.back().second == size * stride)
      dims_.back() = {dims_.back().first * size, stride};
    else
      dims_.emplace_back(size, stride);
  }
}

std::int64_t RowMap::offset(std::int64_t row) const {
  if (dims_.size() == 1) return row * dims_[0].second;
  std::int64_t off = 0;
  for (std::size_t i = dims_.size(); i-- > 0;) {
    off += (row % dims_[i].first) * dims_[i].second;
    row /= dims_[i].first;
  }
  return off;
}

Int8Plan make_int8_plan(const Contract& c, const TensorView& x, std::int8_t* payload, void* scale,
                        std::atomic<bool>* nonfinite) {
  Int8Plan p;
  p.scale_mode = c.scale_mode;
  p.scale_min = c.scale_min;
  p.quotient = c.quotient;
  p.rounding = c.int_rounding;
  p.lowest = c.range == 128 ? -128.0f : -127.0f;
  p.f16_scale = scale_encoding(c) == ScaleEncoding::f16;
  p.qmax = c.qmax;
  p.scale_round = c.scale_arith == ScaleArith::input ? x.dtype : DType::f32;
  p.quotient_round = c.quotient_arith == QuotientArith::input ? x.dtype : DType::f32;
  p.zero_group = c.zero_group;
  p.dtype = x.dtype;
  p.elem_bytes = dtype_size(x.dtype);
  p.data = static_cast<const std::uint8_t*>(x.data);
  p.shape = x.shape;
  p.strides = x.strides;
  p.cols = x.shape.empty() ? 1 : x.shape.back();
  p.col_stride = x.strides.empty() ? 1 : x.strides.back();
  p.rows = RowMap(x);
  p.token_block = c.token_block;
  if (c.family == Family::int8_block) p.blocks = (x.shape[1] + c.token_block - 1) / c.token_block;
  p.group = c.group;
  if (c.family == Family::int8_token) {
    p.single_pass = select_token_path(p.cols * kWorkingBytesPerElement, c.budget) == TokenPath::single_pass;
    p.chunk = std::max<std::int64_t>(1, c.budget / kWorkingBytesPerElement);
  }
  p.payload = payload;
  p.scale = scale;
  p.nonfinite = nonfinite;
  return p;
}

void reject_first_nonfinite(const Int8Plan& p, const std::string& what,
                            std::string (*where)(const Int8Plan&, std::int64_t flat)) {
  const std::int64_t n = shape_numel(p.shape);
  for (std::int64_t row = 0; row * p.cols < n; ++row) {
    const std::int64_t start = p.rows.offset(row);
    for (std::int64_t j = 0; j < p.cols; ++j) {
      const float v = load_f32(p, start + j * p.col_stride);
      if (std::isfinite(v)) continue;
      const char* kind = std::isnan(v) ? "NaN" : (v > 0 ? "+inf" : "-inf");
      fail(ErrorKind::bad_input, what + " takes finite inputs only: " + kind + " at " + where(p, row * p.cols + j));
    }
  }
  // Only reachable when the input changed while it was being read.
  fail(ErrorKind::bad_input, what + " takes finite inputs only: the input held a NaN or an infinity while it was read");
}

}  // namespace qexact::kernels
