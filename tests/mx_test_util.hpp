// Small helpers for the MX tests: quantize rows of fp32 values with a named contract.
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "qexact/contract.hpp"
#include "qexact/quantize.hpp"

namespace qexact::test {

// The reference's result, which the check values pin; the fast engine must give the same bytes.
inline QuantResult quantize_f32(const Contract& c, const std::vector<float>& values, Shape shape = {}) {
  if (shape.empty()) shape = {static_cast<std::int64_t>(values.size())};
  const TensorView x = make_view(DType::f32, shape, values.data());
  QuantResult ref = quantize(c, x, RunOptions{Engine::reference, 1});
  const QuantResult fast = quantize(c, x, RunOptions{Engine::fast, 2});
  EXPECT_TRUE(same_contents(ref.payload, fast.payload))
      << "fast payload differs from the reference";
  EXPECT_TRUE(same_contents(ref.scale, fast.scale))
      << "fast scale differs from the reference";
  return ref;
}

// A group of `n` values: `fill` everywhere, then the listed (index, value) pairs.
inline std::vector<float> group_of(int n, float fill, std::vector<std::pair<int, float>> set = {}) {
  std::vector<float> v(static_cast<std::size_t>(n), fill);
  for (auto [i, x] : set) v[static_cast<std::size_t>(i)] = x;
  return v;
}

}  // namespace qexact::test
