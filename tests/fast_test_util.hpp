// Shared by the fast-vs-reference tests: a test fixture parametrised by SIMD target (every
// target compiled in that this CPU runs, forced through the same switch as
// QEXACT_FORCE_TARGET) and byte comparison with absolute counts.
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "kernels/cpu/simd_target.hpp"
#include "qexact/tensor.hpp"

namespace qexact::test {

class PerTarget : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    kernels::force_target(GetParam());
    // The forced target is the one the kernels report running.
    ASSERT_EQ(kernels::active_target(), GetParam());
  }
  void TearDown() override { kernels::force_target(""); }
};

inline std::string TargetParamName(const testing::TestParamInfo<std::string>& info) { return info.param; }

#define QEXACT_INSTANTIATE_PER_TARGET(suite)                                                      \
  INSTANTIATE_TEST_SUITE_P(AllTargets, suite, testing::ValuesIn(::qexact::kernels::available_targets()), \
                           ::qexact::test::TargetParamName)

// Number of differing bytes between two tensors of the same shape and dtype (-1 if they differ
// in shape or dtype).
inline std::int64_t differing_bytes(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return -1;
  const auto* pa = static_cast<const std::uint8_t*>(a.raw());
  const auto* pb = static_cast<const std::uint8_t*>(b.raw());
  std::int64_t n = 0;
  for (std::size_t i = 0; i < a.nbytes(); ++i) n += pa[i] != pb[i];
  return n;
}

}  // namespace qexact::test
