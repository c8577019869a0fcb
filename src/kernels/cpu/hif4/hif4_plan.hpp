// A HiF4 input as the fast kernels walk it: x viewed as [outer, length, inner] with the
// quantized axis in the middle (the contract's "move qdim to the last axis" without moving any
// data). A block is 64 consecutive positions along that axis at fixed (outer, inner); the
// output is contiguous in C order, so output element (o, l, i) is at (o * length + l) * inner + i.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/common/strided_dims.hpp"
#include "qexact/tensor.hpp"

namespace qexact::kernels {

inline constexpr std::int64_t kHif4Block = 64;
// Inner positions handled together by one work item of the column kernel: the widest SIMD
// vector of fp32 lanes, so that an item is never split differently on different targets.
inline constexpr std::int64_t kHif4ColumnChunk = 16;

struct Hif4Plan {
  DType dtype = DType::f32;
  std::size_t esize = 4;
  const std::uint8_t* data = nullptr;
  std::int64_t outer = 0, length = 0, inner = 0;
  std::int64_t blocks_per_line = 0;  // length / 64
  std::int64_t axis_stride = 1;      // elements between neighbours along the quantized axis
  StridedDims outer_dims, inner_dims;

  std::int64_t column_chunks() const { return (inner + kHif4ColumnChunk - 1) / kHif4ColumnChunk; }
  // Offset in elements of element (o, l, i) of the input.
  std::int64_t offset(std::int64_t o, std::int64_t l, std::int64_t i) const {
    return outer_dims.offset_of(o) + l * axis_stride + inner_dims.offset_of(i);
  }
};

// x must be a float view with a valid axis whose length is a multiple of 64.
Hif4Plan make_hif4_plan(const TensorView& x, int axis);

}  // namespace qexact::kernels
