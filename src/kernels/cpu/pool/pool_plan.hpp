// A pooled-mean input (contracts §6) as the fast kernel walks it: x of shape (B, S, F...) with
// any strides; a work item is one (batch, cell) and a chunk of up to kPoolColumnChunk features
// (columns), summed down the cell's rows.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "qexact/tensor.hpp"

namespace qexact::kernels {

inline constexpr std::int64_t kPoolColumnChunk = 256;

struct PoolPlan {
  DType dtype = DType::f32;
  std::size_t esize = 4;
  const std::uint8_t* data = nullptr;
  std::int64_t batch = 0, length = 0, pool = 1, cells = 0, features = 1;
  std::int64_t batch_stride = 0, seq_stride = 0;
  // Feature f is at offset f * feature_stride when the feature dims collapse into one stride,
  // else at feature_offsets[f].
  bool features_regular = true;
  std::int64_t feature_stride = 1;
  std::vector<std::int64_t> feature_offsets;

  std::int64_t chunks() const { return (features + kPoolColumnChunk - 1) / kPoolColumnChunk; }
  std::int64_t feature_offset(std::int64_t f) const {
    return features_regular ? f * feature_stride : feature_offsets[static_cast<std::size_t>(f)];
  }
  // Byte address of element (b, s, feature 0).
  const std::uint8_t* row(std::int64_t b, std::int64_t s) const {
    return data + (b * batch_stride + s * seq_stride) * static_cast<std::int64_t>(esize);
  }
};

// x: a float view of rank >= 2; pool >= 1.
PoolPlan make_pool_plan(const TensorView& x, std::int64_t pool);

// Per column c < width (feature f0 + c) of rows [s0, s1) of batch b: the largest and smallest
// exponent field (1 for subnormals) over the non-zero elements, 0 and 255 when there is none;
// a NaN or +/-inf makes the largest 255. Arrays hold width rounded up to 16 entries.
void pool_column_exponents(const PoolPlan& p, std::int64_t b, std::int64_t s0, std::int64_t s1, std::int64_t f0,
                           std::int64_t width, std::int32_t* emax, std::int32_t* emin);
// Per column, the sum of its finite elements in units of 2^(emin[c] - 150), modulo 2^64: the
// exact sum, in two's complement, when it fits in an int64.
void pool_column_sums(const PoolPlan& p, std::int64_t b, std::int64_t s0, std::int64_t s1, std::int64_t f0,
                      std::int64_t width, const std::int32_t* emin, std::uint64_t* sums);

}  // namespace qexact::kernels
