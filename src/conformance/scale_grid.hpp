// A contract's outputs seen on their logical grid, for compare and its diagnoses: which scale
// domain ("group") and which row each element belongs to, each group's scale read out of the
// contract's layout (E8M0 byte, or the f32/f16 bits of an int8 scale), each element's code
// (E2M1 nibbles unpacked), and which groups are partial tails. Groups are numbered in the C
// order of the logical scale grid, the family row's grain's scale shape (contracts/scale_grain):
// MX (row, group), int8.block (b, head, token block), int8.token row, int8.group (row, group),
// HiF4 (row, 64-block), nvfp4 (row, 16-block), fp8.scaled its granularity's; pool.mean (b, cell).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "contracts/family_table.hpp"
#include "qexact/contract.hpp"
#include "qexact/tensor.hpp"

namespace qexact::conformance {

class ScaleGrid {
 public:
  // x: the input's shape. For pool.mean and HiF4 the elements are the output's.
  ScaleGrid(const Contract& c, const Shape& x);

  std::int64_t groups() const { return groups_; }
  std::int64_t rows() const { return rows_; }
  std::int64_t elements() const { return elements_; }
  std::int64_t group_of(std::int64_t element) const;
  std::int64_t row_of(std::int64_t element) const { return row_len_ > 0 ? element / row_len_ : 0; }
  // A partial last block (MX K % block, int8.block S % token_block, pool S % P; fp8.scaled
  // group:N, tile:MxN and head_block:T domains cut short by the edge of the tensor).
  bool is_tail_group(std::int64_t g) const;
  bool has_tail() const;

  // Per group: the scale's bits (E8M0 byte; f32 or f16 bit pattern) from a tensor in the
  // contract's scale shape and layout.
  std::vector<std::uint32_t> scale_bits(const Tensor& scale) const;
  // The inverse: per-group bits (scale_bits of any contract with this grid) as a tensor in
  // this contract's scale shape, dtype and layout; layout padding is 0, as the quantizers
  // write it. The quantizing families only.
  Tensor scale_tensor(const std::vector<std::uint32_t>& bits, DType scale_dtype) const;
  // The logical grid's shape, whose C order numbers the groups: MX and int8.group
  // x[:-1] + (groups per row,), int8.block and int8.token the scale shape, pool.mean (B, cells),
  // HiF4 x[:-1] + (K / 64,).
  Shape shape() const;
  // Per element: the payload code (MX: E2M1 unpacked; int8: the byte as unsigned).
  std::vector<std::uint8_t> codes(const Tensor& payload) const;

 private:
  const Contract& c_;
  Shape x_;
  std::int64_t groups_ = 0, rows_ = 0, elements_ = 0, row_len_ = 0;
  std::int64_t per_row_ = 0;  // MX / int8.group: groups per row; pool: cells
  ScaleGrain grain_;           // which elements share a scale (the family row's grain; pool: none)
  Shape grid_;                 // the logical grid (shape())
};

// Signed integers whose differences count representable steps of the scale's own encoding:
// E8M0 bytes as they are, E4M3 codes and fp32/f16 bit patterns as sign-magnitude integers
// (adjacent codes, adjacent floats of that width differ by 1).
std::int64_t ordered_scale(std::uint32_t bits, ScaleEncoding encoding);
// The unit of those differences: "E8M0 steps", "E4M3 codes", "ulps of f32", "ulps of f16".
std::string scale_delta_unit(ScaleEncoding encoding);

}  // namespace qexact::conformance
