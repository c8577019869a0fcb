// Small helpers for the MX tests: quantize rows of fp32 values with a named contract.
#pragma once
#include <vector>

#include "qexact/contract.hpp"
#include "qexact/quantize.hpp"

namespace qexact::test {

inline QuantResult quantize_f32(const Contract& c, const std::vector<float>& values, Shape shape = {}) {
  if (shape.empty()) shape = {static_cast<std::int64_t>(values.size())};
  return quantize(c, make_view(DType::f32, shape, values.data()));
}

// A group of `n` values: `fill` everywhere, then the listed (index, value) pairs.
inline std::vector<float> group_of(int n, float fill, std::vector<std::pair<int, float>> set = {}) {
  std::vector<float> v(static_cast<std::size_t>(n), fill);
  for (auto [i, x] : set) v[static_cast<std::size_t>(i)] = x;
  return v;
}

}  // namespace qexact::test
