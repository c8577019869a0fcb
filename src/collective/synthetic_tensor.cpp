#include "collective/synthetic_tensor.hpp"

#include <vector>

namespace qexact::dist {
namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
  return h;
}

// 2^(k - 2) for k in 0..4: exact powers of two, so the scaling rounds nothing.
float power_of_two_factor(std::uint64_t h) {
  static constexpr float kFactors[5] = {0.25f, 0.5f, 1.0f, 2.0f, 4.0f};
  return kFactors[h % 5];
}

}  // namespace

Tensor synthetic_tensor(const Shape& shape, DType dtype, std::uint64_t seed, const std::string& name) {
  const std::int64_t n = shape_numel(shape);
  const std::uint64_t stream = splitmix64(seed ^ fnv1a(name));
  const std::int64_t channels = shape.back();
  const std::int64_t token_stride = shape.size() >= 2 ? shape_numel(Shape(shape.begin() + 2, shape.end())) : 1;
  const std::int64_t tokens = shape.size() >= 2 ? shape[1] : 1;
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint64_t h = splitmix64(stream + static_cast<std::uint64_t>(i));
    // Irwin-Hall of four 16-bit uniforms: mean 0, variance 1/3, range (-2, 2).
    float sum = 0.0f;
    for (int k = 0; k < 4; ++k) sum += static_cast<float>((h >> (16 * k)) & 0xFFFFu);
    float x = (sum / 65536.0f - 2.0f) * 1.7320508f;
    const std::int64_t channel = i % channels;
    const std::int64_t token = (i / token_stride) % tokens;
    x *= power_of_two_factor(splitmix64(stream ^ (0xC0FFEEull + static_cast<std::uint64_t>(channel))));
    x *= power_of_two_factor(splitmix64(stream ^ (0x7E57ull << 32) ^ static_cast<std::uint64_t>(token)));
    if (splitmix64(h) % 2000 == 0) x *= 32.0f;
    v[static_cast<std::size_t>(i)] = x;
  }
  return from_f32_vector(v, shape, dtype);
}

}  // namespace qexact::dist
