// The fast pooled block mean against the reference, byte for byte: pool sizes with and without
// a tail cell, feature chunks with tails, every input and output dtype, columns whose exponent
// range takes each of the kernel's three exact sums (64-bit lanes, 128-bit, the wide
// accumulator), subnormal, zero and overflowing means, strided views, the checks and their
// messages, for every SIMD target and 1, 2, 3 and 7 threads. The fast mean of a whole tensor
// also equals the reference's sharded mean of its slices. The reference's answer for an input
// is computed once and reused by every target.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <iostream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "fast_test_util.hpp"
#include "kernels/cpu/pool/quotient_rounding.hpp"
#include "qexact/formats/bf16.hpp"
#include "qexact/formats/fp16.hpp"
#include "qexact/pool.hpp"
#include "qexact/quantize.hpp"
#include "reference/exact_sum.hpp"

namespace qexact {
namespace {

using test::differing_bytes;
using test::Storage;
using test::expect_same_outcome;
using test::Outcome;
using test::outcome_of;
using test::reference_outcome;

const RunOptions kRef{Engine::reference, 1};

// The fast mean of x equals the reference's (or both throw the same message).
void expect_mean_matches(const std::string& key, const TensorView& x, std::int64_t pool, DType out, int threads) {
  const std::string id = key + " pool " + std::to_string(pool) + " -> " + dtype_name(out);
  const Outcome& want = reference_outcome(id, [&] { return pooled_block_mean(x, pool, out, kRef); });
  expect_same_outcome(want, outcome_of([&] {
                        return pooled_block_mean(x, pool, out, RunOptions{Engine::fast, threads});
                      }),
                      id + " threads " + std::to_string(threads));
}

constexpr DType kDtypes[] = {DType::f32, DType::bf16, DType::f16};

std::vector<float> normal_values(std::size_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> octave(-6, 6);
  std::vector<float> v(n);
  for (float& f : v) f = std::ldexp(normal(rng), octave(rng));
  return v;
}

class FastPool : public test::PerTarget {};

TEST_P(FastPool, RandomShapesPoolSizesAndDtypes) {
  const std::uint64_t seed = 606;
  std::cout << "seed " << seed << "\n";
  std::mt19937_64 rng(seed);
  const Shape shapes[] = {
      {2, 600, 300},  // features in a whole chunk of 256 and a tail of 44
      {1, 4096},      // no feature dims: one column
      {3, 37, 5, 7},  // several feature dims
      {1, 1, 64},     // one row
  };
  int turn = 0;
  for (const Shape& shape : shapes) {
    const Storage data(normal_values(static_cast<std::size_t>(shape_numel(shape)), rng));
    const std::int64_t S = shape[1];
    for (DType in : kDtypes)
      for (std::int64_t pool : {std::int64_t{1}, std::int64_t{7}, std::int64_t{64}, S, S + 5}) {
        const DType out = kDtypes[turn++ % 3];
        const std::string key = std::string("random ") + dtype_name(in) + " " + shape_str(shape);
        for (int threads : {1, 2, 3, 7}) expect_mean_matches(key, data.view(in, shape), pool, out, threads);
      }
  }
}

TEST_P(FastPool, SeveralMebibytes) {
  const std::uint64_t seed = 707;
  std::cout << "seed " << seed << "\n";
  std::mt19937_64 rng(seed);
  const Shape shape{4, 1000, 520};  // 8 MB of f32
  const Storage data(normal_values(static_cast<std::size_t>(shape_numel(shape)), rng));
  for (int threads : {2, 7}) {
    expect_mean_matches("large f32", data.view(DType::f32, shape), 64, DType::bf16, threads);
    expect_mean_matches("large bf16", data.view(DType::bf16, shape), 48, DType::f32, threads);
  }
}

// Columns built for each way the kernel sums exactly, and for each rounding edge of the three
// output dtypes.
std::vector<float> column_classes(std::int64_t S, std::int64_t F, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> wide(-30, 30), wider(-120, 120);
  const float big = std::numeric_limits<float>::max();
  std::vector<float> v(static_cast<std::size_t>(S * F));
  for (std::int64_t s = 0; s < S; ++s) {
    const float z = normal(rng);
    const bool odd = s % 2 != 0;
    const float column[] = {
        z,                          // 64-bit lanes
        std::ldexp(z, wide(rng)),   // spans ~60 binades: 128-bit
        std::ldexp(z, wider(rng)),  // spans ~240 binades: the wide accumulator
        std::ldexp(z, -140),        // fp32 subnormals
        odd ? -std::ldexp(1.0f, s % 40) : std::ldexp(1.0f, (s - s % 2 + 1) % 40),  // cancels pairwise
        odd ? -0.0f : 0.0f,                                                        // zeros: +0
        odd ? big : big * 0.75f,                                                   // past FLT_MAX when summed
        65519.0f + static_cast<float>(s % 3),                                      // the f16 overflow boundary
        std::ldexp(1.0f + static_cast<float>(s % 5), -25),                         // f16 subnormal means
        std::ldexp(1.0f + static_cast<float>(s % 5), -134),                        // bf16 subnormal means
        -0x1p-149f,        // rounds to -0 in every dtype but f32
        z * 1e-3f + 1.0f,  // near 1: ties and near-ties of the rounding
    };
    for (std::int64_t f = 0; f < F; ++f) v[static_cast<std::size_t>(s * F + f)] = column[f % 12];
  }
  return v;
}

TEST_P(FastPool, EveryExactSumAndRoundingEdge) {
  const std::uint64_t seed = 808;
  std::cout << "seed " << seed << "\n";
  std::mt19937_64 rng(seed);
  // 12 features: a work item too narrow for vectors; 36: vectors with a partial one.
  for (std::int64_t F : {std::int64_t{12}, std::int64_t{36}})
    for (std::int64_t S : {std::int64_t{48}, std::int64_t{5000}}) {
      const Storage data(column_classes(S, F, rng));
      const Shape shape{1, S, F};
      const std::string key = "classes S " + std::to_string(S) + " F " + std::to_string(F);
      for (std::int64_t pool : {std::int64_t{1}, std::int64_t{2}, std::int64_t{3}, std::int64_t{16}, S})
        for (DType out : kDtypes)
          for (int threads : {1, 3}) expect_mean_matches(key, data.view(DType::f32, shape), pool, out, threads);
    }
}

TEST_P(FastPool, StridedViews) {
  const std::uint64_t seed = 909;
  std::cout << "seed " << seed << "\n";
  std::mt19937_64 rng(seed);
  const Storage data(normal_values(3 * 40 * 6 * 5 * 2, rng));
  for (DType dt : kDtypes) {
    const void* base = data.data(dt);
    const auto esize = static_cast<std::int64_t>(dtype_size(dt));
    struct View {
      std::string name;
      TensorView v;
    };
    const View views[] = {
        // (B, S, F1, F2) with the feature dims swapped: no single feature stride.
        {"swapped features", TensorView{dt, {3, 40, 5, 6}, {1200, 30, 1, 5}, base}},
        // Every other row.
        {"every other row", TensorView{dt, {3, 20, 30}, {1200, 60, 1}, base}},
        // Sequence innermost in memory: features of stride S.
        {"transposed", TensorView{dt, {3, 40, 30}, {1200, 1, 40}, base}},
        // Reversed sequence.
        {"reversed",
         TensorView{dt, {3, 40, 30}, {1200, -30, 1}, static_cast<const std::uint8_t*>(base) + 39 * 30 * esize}},
    };
    for (const View& w : views)
      for (std::int64_t pool : {3, 8})
        for (int threads : {1, 7})
          expect_mean_matches(std::string("view ") + w.name + " " + dtype_name(dt), w.v, pool, DType::f32, threads);
  }
}

// The fast mean of a tensor is the reference's sharded mean of its slices.
TEST_P(FastPool, EqualsTheShardedReference) {
  const std::uint64_t seed = 1010;
  std::cout << "seed " << seed << "\n";
  std::mt19937_64 rng(seed);
  const Shape shape{2, 61, 9};
  const Storage data(normal_values(static_cast<std::size_t>(shape_numel(shape)), rng));
  const TensorView x = data.view(DType::f32, shape);
  const std::vector<std::vector<std::int64_t>> shardings = {
      {61}, {30, 31}, {8, 8, 8, 37}, {1, 0, 59, 1}, {13, 13, 13, 13, 9}};
  for (std::int64_t pool : {4, 8, 13})
    for (DType out : kDtypes) {
      const Tensor fast = pooled_block_mean(x, pool, out, RunOptions{Engine::fast, 3});
      for (const auto& lengths : shardings) {
        std::vector<TensorView> shards;
        std::int64_t offset = 0;
        for (std::int64_t len : lengths) {
          TensorView s = x;
          s.shape[1] = len;
          s.data = data.f32.data() + offset * shape[2];
          shards.push_back(s);
          offset += len;
        }
        const std::string id = "sharded pool " + std::to_string(pool) + " " + dtype_name(out) + " " +
                               std::to_string(lengths.size()) + " shards";
        const Outcome& want = reference_outcome(id, [&] { return pooled_block_mean_sharded(shards, pool, out); });
        ASSERT_FALSE(want.threw) << want.message;
        EXPECT_EQ(differing_bytes(want.tensors[0], fast), 0) << id;
      }
    }
}

TEST_P(FastPool, ChecksAndMessagesMatchTheReference) {
  std::vector<float> v(2 * 6 * 3, 1.0f);
  const TensorView x = make_view(DType::f32, {2, 6, 3}, v.data());
  const Tensor ints(DType::i32, {2, 6});
  for (const auto& [name, view, pool, out] : std::vector<std::tuple<std::string, TensorView, std::int64_t, DType>>{
           {"pool 0", x, 0, DType::f32},
           {"pool -3", x, -3, DType::f32},
           {"u8 output", x, 2, DType::u8},
           {"i32 input", ints.view(), 2, DType::f32},
           {"rank 1", make_view(DType::f32, {6}, v.data()), 2, DType::f32}})
    for (int threads : {1, 7}) expect_mean_matches("check " + name, view, pool, out, threads);

  // Non-finite elements: the first in C order is named, whichever thread meets it.
  std::vector<float> bad(2 * 300 * 40, 0.5f);
  bad[(1 * 300 + 250) * 40 + 3] = -INFINITY;
  bad[(1 * 300 + 7) * 40 + 39] = std::numeric_limits<float>::quiet_NaN();
  bad[(1 * 300 + 7) * 40 + 38] = INFINITY;
  const Storage poisoned(bad);
  for (DType dt : kDtypes)
    for (int threads : {1, 2, 7})
      expect_mean_matches(std::string("non-finite ") + dtype_name(dt), poisoned.view(dt, {2, 300, 40}), 16, DType::f32,
                          threads);
}

TEST_P(FastPool, EmptyDimensions) {
  const std::vector<float> none;
  for (const Shape& shape : {Shape{2, 0, 3}, Shape{0, 5, 3}, Shape{2, 5, 0}, Shape{2, 5, 3, 0}})
    expect_mean_matches("empty " + shape_str(shape), make_view(DType::f32, shape, none.data()), 4, DType::bf16, 3);
}

TEST_P(FastPool, RepeatedRunsGiveIdenticalBytes) {
  std::mt19937_64 rng(12);
  std::cout << "seed 12\n";
  const Storage data(normal_values(3 * 500 * 70, rng));
  const TensorView x = data.view(DType::f32, {3, 500, 70});
  const Tensor first = pooled_block_mean(x, 32, DType::f32, RunOptions{Engine::fast, 2});
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(differing_bytes(pooled_block_mean(x, 32, DType::f32, RunOptions{Engine::fast, 1 + i % 7}), first), 0)
        << "run " << i;
}

QEXACT_INSTANTIATE_PER_TARGET(FastPool);

// The kernel's rounding of sum / n against the reference's exact accumulator, for sums of up to
// 104 bits at every scale and counts up to 2^63 (a count of 2^32 or more takes another division).
TEST(PoolRounding, QuotientMatchesTheExactSumForAnyCount) {
  const std::uint64_t seed = 1111;
  std::cout << "seed " << seed << "\n";
  std::mt19937_64 rng(seed);
  const std::uint64_t counts[] = {1,
                                  2,
                                  3,
                                  7,
                                  48,
                                  1000003,
                                  (1ull << 32) - 1,
                                  1ull << 32,
                                  (1ull << 32) + 1,
                                  (1ull << 40) + 3,
                                  (1ull << 62) + 7,
                                  (1ull << 63) - 1};
  std::int64_t differing = 0, trials = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    // sum = (a + b * 2^40 + c * 2^80) * 2^unit, each part an fp32 value.
    const int unit = static_cast<int>(rng() % 170) - 149;
    const std::uint64_t parts[] = {rng() >> 40, trial % 3 > 0 ? rng() >> 40 : 0, trial % 3 > 1 ? rng() >> 40 : 0};
    const bool negative = rng() % 2 != 0;
    ref::ExactSum sum;
    kernels::UInt128 magnitude = 0;
    for (int k = 0; k < 3; ++k) {
      const float part = std::ldexp(static_cast<float>(parts[k]), unit + 40 * k);
      sum.add(negative ? -part : part);
      magnitude += static_cast<kernels::UInt128>(parts[k]) << (40 * k);
    }
    for (DType out : kDtypes) {
      const std::uint64_t n = trial % 4 == 0 ? (rng() >> 1) | 1 : counts[rng() % std::size(counts)];
      const float want = sum.mean(n, out);
      const std::uint32_t want_bits = out == DType::f32    ? std::bit_cast<std::uint32_t>(want)
                                      : out == DType::bf16 ? f32_to_bf16(want)
                                                           : f32_to_f16(want);
      differing += kernels::rounded_quotient_bits(magnitude, unit, n, negative, out) != want_bits;
      ++trials;
    }
  }
  EXPECT_EQ(differing, 0) << "of " << trials;
}

// Quotients at a rounding tie of every dtype, and just above it by a remainder or by low bits
// of a sum wider than 64 bits: only the remainder and those bits decide them.
TEST(PoolRounding, TiesAndJustAboveThem) {
  using kernels::UInt128;
  auto expect_rounding = [](const std::vector<UInt128>& parts, std::uint64_t n, DType out) {
    ref::ExactSum sum;
    UInt128 magnitude = 0;
    for (UInt128 part : parts) {
      sum.add(static_cast<float>(part));  // every part is an fp32 value
      magnitude += part;
    }
    const float want = sum.mean(n, out);
    const std::uint32_t want_bits = out == DType::f32    ? std::bit_cast<std::uint32_t>(want)
                                    : out == DType::bf16 ? f32_to_bf16(want)
                                                         : f32_to_f16(want);
    EXPECT_EQ(kernels::rounded_quotient_bits(magnitude, 0, n, false, out), want_bits)
        << dtype_name(out) << " n " << n << " parts " << parts.size();
  };
  for (DType out : kDtypes) {
    const int p = out == DType::f32 ? 24 : out == DType::bf16 ? 8 : 11;
    // The tie 2^k + 2^(k - p) between two values of a sum, times n, plus 0 or 1.
    for (std::uint64_t n :
         {std::uint64_t{1}, std::uint64_t{3}, (std::uint64_t{1} << 32) + 1, (std::uint64_t{1} << 62) + 7}) {
      const int k = out == DType::f16 ? 12 : 24;  // f16: below its largest finite
      const UInt128 tie = (UInt128{1} << k) + (UInt128{1} << (k - p));
      const UInt128 times_n = tie * n;
      std::vector<UInt128> parts;
      for (int bit = 0; bit < 128; ++bit)
        if (((times_n >> bit) & 1u) != 0) parts.push_back(UInt128{1} << bit);
      expect_rounding(parts, n, out);  // a tie: to even
      parts.push_back(1);
      expect_rounding(parts, n, out);  // 1/n above it: up
    }
    // Sums past 2^64 whose tie is broken only by their lowest bit, which a 64-bit dividend drops.
    if (out != DType::f16) {
      const std::vector<UInt128> tie = {UInt128{1} << 100, UInt128{1} << (100 - p)};
      expect_rounding(tie, 1, out);
      std::vector<UInt128> above = tie;
      above.push_back(1);
      expect_rounding(above, 1, out);
    }
  }
}

}  // namespace
}  // namespace qexact
