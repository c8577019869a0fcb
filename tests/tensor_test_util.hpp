// Small tensor helpers shared by the library tests: seeded normal samples, a sequence slice,
// fp32 tensors from values and back, raw bytes and bits.
#pragma once
#include <bit>
#include <cstdint>
#include <random>
#include <vector>

#include "qexact/tensor.hpp"

namespace qexact::test {

// n values from a seeded normal distribution N(0, sigma^2), in draw order.
inline std::vector<float> normal_values(std::int64_t n, float sigma, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

// x[:, offset : offset + length], a view into x (contiguous when B == 1), as a rank's shard of
// the sequence axis.
inline TensorView seq_slice(const Tensor& x, std::int64_t offset, std::int64_t length) {
  TensorView v = x.view();
  v.shape[1] = length;
  v.data = static_cast<const std::uint8_t*>(x.raw()) +
           offset * v.strides[1] * static_cast<std::int64_t>(dtype_size(x.dtype()));
  return v;
}

// A contiguous fp32 tensor of `shape` holding `values`.
inline Tensor f32_tensor(const Shape& shape, const std::vector<float>& values) {
  return from_f32_vector(values, shape, DType::f32);
}

// Any float tensor's values as fp32, in C order.
inline std::vector<float> values_of(const Tensor& t) { return to_f32_vector(t.view()); }

inline std::vector<std::uint8_t> bytes_of(const Tensor& t) {
  const auto* p = static_cast<const std::uint8_t*>(t.raw());
  return std::vector<std::uint8_t>(p, p + t.nbytes());
}

inline std::uint32_t bits(float v) { return std::bit_cast<std::uint32_t>(v); }

}  // namespace qexact::test
