// Shared by the fast-vs-reference tests: a test fixture parametrised by SIMD target (every
// target compiled in that this CPU runs, forced through the same switch as
// QEXACT_FORCE_TARGET) and byte comparison with absolute counts.
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "qexact/error.hpp"

#include "kernels/cpu/common/simd_target.hpp"
#include "qexact/formats/bf16.hpp"
#include "qexact/formats/fp16.hpp"
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

// `v` rounded (RNE) to bf16 or f16 bit patterns.
inline std::vector<std::uint16_t> narrowed(const std::vector<float>& v, DType dt) {
  std::vector<std::uint16_t> h(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) h[i] = dt == DType::bf16 ? f32_to_bf16(v[i]) : f32_to_f16(v[i]);
  return h;
}

// A float tensor's storage, kept alive with views of it in any of the three input dtypes.
struct Storage {
  std::vector<float> f32;
  std::vector<std::uint16_t> bf16, f16;
  explicit Storage(std::vector<float> v)
      : f32(std::move(v)), bf16(narrowed(f32, DType::bf16)), f16(narrowed(f32, DType::f16)) {}
  const void* data(DType dt) const {
    return dt == DType::f32    ? static_cast<const void*>(f32.data())
           : dt == DType::bf16 ? static_cast<const void*>(bf16.data())
                               : f16.data();
  }
  TensorView view(DType dt, const Shape& shape) const { return make_view(dt, shape, data(dt)); }
};

// What a call produced: its output tensors, or the qexact::Error it threw. The fast engine must
// give the reference's outcome: the same bytes, or the same error message.
struct Outcome {
  bool threw = false;
  std::string message;
  std::vector<Tensor> tensors;
};

// f returns a Tensor or a std::vector<Tensor>.
template <class F>
Outcome outcome_of(F&& f) {
  Outcome o;
  try {
    if constexpr (std::is_same_v<std::decay_t<decltype(f())>, Tensor>)
      o.tensors.push_back(f());
    else
      o.tensors = f();
  } catch (const Error& e) {
    o.threw = true;
    o.message = e.what();
  }
  return o;
}

// The reference's outcome for `key`, computed on first use (the reference is slow; the fast
// engine runs once per target and thread count against it).
template <class F>
const Outcome& reference_outcome(const std::string& key, F&& f) {
  static std::map<std::string, Outcome> cache;
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, outcome_of(std::forward<F>(f))).first;
  return it->second;
}

inline void expect_same_outcome(const Outcome& want, const Outcome& got, const std::string& what) {
  ASSERT_EQ(want.threw, got.threw) << what << ": reference " << (want.threw ? want.message : "ran") << ", fast "
                                   << (got.threw ? got.message : "ran");
  EXPECT_EQ(want.message, got.message) << what;
  ASSERT_EQ(want.tensors.size(), got.tensors.size()) << what;
  for (std::size_t i = 0; i < want.tensors.size(); ++i) {
    EXPECT_EQ(want.tensors[i].shape(), got.tensors[i].shape()) << what << ": output " << i;
    EXPECT_EQ(differing_bytes(want.tensors[i], got.tensors[i]), 0)
        << what << ": output " << i << ": " << differing_bytes(want.tensors[i], got.tensors[i]) << " differing of "
        << want.tensors[i].nbytes() << " bytes";
  }
}

// Awkward views of one [37, 96] f32 tensor (values k * 0.37, k in [-1000, 1000], seed 5): its
// transpose in storage, every other row and every other column of a taller tensor, and a
// [74, 96] tensor of random f16 bit patterns (NaN and inf included).
struct StridedViews {
  static constexpr std::int64_t kRows = 37, kCols = 96;
  std::vector<float> base;
  std::vector<std::uint16_t> half_bits;
  TensorView transposed, strided, cols, half;
  StridedViews() : base(static_cast<std::size_t>(kRows * kCols * 2)), half_bits(base.size()) {
    std::mt19937 rng(5);
    for (auto& v : base) v = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) * 0.37f;
    for (auto& b : half_bits) b = static_cast<std::uint16_t>(rng());
    transposed = TensorView{DType::f32, {kRows, kCols}, {1, kRows}, base.data()};
    strided = TensorView{DType::f32, {kRows, kCols}, {2 * kCols, 1}, base.data()};
    cols = TensorView{DType::f32, {kRows, kCols}, {2 * kCols, 2}, base.data()};
    half = make_view(DType::f16, {kRows * 2, kCols}, half_bits.data());
  }
  std::vector<const TensorView*> all() const { return {&transposed, &strided, &cols, &half}; }
};

}  // namespace qexact::test
