// int8 per token (contracts §4; presets int8.token.*): one scale per row over the complete
// last axis, rows = the product of the leading dimensions. Two paths, chosen by the shared
// selector from the working-buffer budget, must give identical bytes:
//   single_pass       the row is copied into an fp32 working buffer, reduced, quantized from it;
//   two_pass_chunked  chunks of budget/4 elements: pass 1 reduces the whole row from the source,
//                     pass 2 re-reads the source and quantizes with that one scale.
// The scale's domain is the whole row on both paths, never a chunk.
#include <algorithm>
#include <string>
#include <vector>

#include "reference/int8_ref.hpp"
#include "reference/int8_steps.hpp"

namespace qexact::ref {
namespace {

constexpr std::int64_t kWorkingBytesPerElement = 4;  // the working row is fp32

struct Rows {
  const std::vector<float>& source;  // the input's values in C order
  std::int64_t cols;
  std::int8_t* payload;
  Tensor& scale;
  DType input;  // the input's dtype (scale_arith / quotient_arith=input)

  std::size_t at(std::int64_t row, std::int64_t col) const { return static_cast<std::size_t>(row * cols + col); }
};

void quantize_row_single_pass(const Contract& c, Rows& rows, std::int64_t row) {
  const auto first = rows.source.begin() + static_cast<std::ptrdiff_t>(rows.at(row, 0));
  const std::vector<float> working(first, first + static_cast<std::ptrdiff_t>(rows.cols));
  float amax = 0.0f;
  for (float v : working) amax = int8::fold_abs_max(amax, v);
  const int8::QuotientOp q = int8::scale_domain(c, amax, rows.scale, row, rows.input);
  for (std::int64_t j = 0; j < rows.cols; ++j)
    rows.payload[rows.at(row, j)] = int8::quantize_element(c, q, working[static_cast<std::size_t>(j)]);
}

void quantize_row_two_pass_chunked(const Contract& c, Rows& rows, std::int64_t row) {
  const std::int64_t chunk = std::max<std::int64_t>(1, c.budget / kWorkingBytesPerElement);
  float amax = 0.0f;
  for (std::int64_t start = 0; start < rows.cols; start += chunk)
    for (std::int64_t j = start; j < std::min(rows.cols, start + chunk); ++j)
      amax = int8::fold_abs_max(amax, rows.source[rows.at(row, j)]);
  const int8::QuotientOp q = int8::scale_domain(c, amax, rows.scale, row, rows.input);
  for (std::int64_t start = 0; start < rows.cols; start += chunk)
    for (std::int64_t j = start; j < std::min(rows.cols, start + chunk); ++j)
      rows.payload[rows.at(row, j)] = int8::quantize_element(c, q, rows.source[rows.at(row, j)]);
}

}  // namespace

QuantResult quantize_int8_token(const Contract& c, const TensorView& x) {
  int8::check_contract(c, Family::int8_token);
  const Shape ps = payload_shape(c, x.shape);
  const Shape ss = scale_shape(c, x.shape);
  const std::int64_t cols = x.shape.back();
  const std::int64_t row_count = shape_numel(ss);
  const std::vector<float> values = to_f32_vector(x);
  int8::reject_nonfinite(values, "int8.token", [&](std::int64_t i) {
    return "(row " + std::to_string(i / cols) + ", column " + std::to_string(i % cols) + ")";
  });

  const TokenPath path = select_token_path(cols * kWorkingBytesPerElement, c.budget);
  QuantResult r{int8::new_payload(ps), int8::new_scale(c, ss), token_path_name(path), {}};
  Rows rows{values, cols, r.payload.data<std::int8_t>(), r.scale, x.dtype};
  for (std::int64_t row = 0; row < row_count; ++row) {
    if (path == TokenPath::single_pass)
      quantize_row_single_pass(c, rows, row);
    else
      quantize_row_two_pass_chunked(c, rows, row);
  }
  return r;
}

}  // namespace qexact::ref
