// Pooled block mean (contracts §6): exact sums, one rounding, sharding-independent.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "qexact/error.hpp"
#include "qexact/formats/bf16.hpp"
#include "qexact/formats/fp16.hpp"
#include "qexact/pool.hpp"
#include "qexact/tensor.hpp"
#include "tensor_test_util.hpp"
#include "reference/exact_sum.hpp"

namespace {

// The reference is the engine these tests pin (tests/test_fast_pool.cpp holds the kernel to it).
const qexact::RunOptions kRef{qexact::Engine::reference, 1};


using qexact::DType;
using qexact::PoolDivisor;
using qexact::Shape;
using qexact::Tensor;
using qexact::TensorView;

using qexact::test::bits;
using qexact::test::bytes_of;
using qexact::test::f32_tensor;
using qexact::test::values_of;

// The mean of a (1, S, 1) fp32 sequence pooled over all of it, in dtype `out`, as fp32.
float mean_of(const std::vector<float>& v, DType out = DType::f32) {
  const Tensor x = f32_tensor({1, static_cast<std::int64_t>(v.size()), 1}, v);
  return values_of(qexact::pooled_block_mean(x.view(), static_cast<std::int64_t>(v.size()), out, kRef))[0];
}

// x[:, offset : offset + length] as a view sharing x's storage and strides.
TensorView sequence_slice(const Tensor& x, std::int64_t offset, std::int64_t length) {
  TensorView v = x.view();
  v.shape[1] = length;
  v.data = static_cast<const std::uint8_t*>(x.raw()) +
           offset * v.strides[1] * static_cast<std::int64_t>(qexact::dtype_size(x.dtype()));
  return v;
}

std::vector<TensorView> shards_of(const Tensor& x, const std::vector<std::int64_t>& lengths) {
  std::vector<TensorView> shards;
  std::int64_t offset = 0;
  for (std::int64_t len : lengths) {
    shards.push_back(sequence_slice(x, offset, len));
    offset += len;
  }
  return shards;
}

// ---- an independent check that a result is the correctly rounded mean ----
// The exact mean is X = N / (n * 2^q) for an integer sum N of values on the 2^-q grid. A
// result r (a value of dtype dt) is the RNE of X iff X lies strictly between the midpoints to
// r's neighbours in dt, or on one of them with r even. Each midpoint has at most 26 significant
// bits and n < 2^20, so midpoint * n * 2^q and N are exact in long double (64-bit significand).

std::uint32_t pattern(float r, DType dt) {
  if (dt == DType::f32) return bits(r);
  return dt == DType::bf16 ? qexact::f32_to_bf16(r) : qexact::f32_to_f16(r);
}

float value(std::uint32_t p, DType dt) {
  if (dt == DType::f32) return std::bit_cast<float>(p);
  const auto h = static_cast<std::uint16_t>(p);
  return dt == DType::bf16 ? qexact::bf16_to_f32(h) : qexact::f16_to_f32(h);
}

float neighbour(float r, bool up, DType dt) {
  const std::uint32_t sign = dt == DType::f32 ? 0x80000000u : 0x8000u;
  const std::uint32_t p = pattern(r, dt);
  if (r == 0.0f) return value(up ? 1u : (sign | 1u), dt);
  const bool negative = (p & sign) != 0;
  return value(up != negative ? p + 1 : p - 1, dt);  // away from zero: magnitude + 1
}

::testing::AssertionResult is_rne_of_mean(float r, std::int64_t sum, int q, std::int64_t n, DType dt) {
  const long double scaled_sum = static_cast<long double>(sum);
  auto compare_to_mid = [&](float other) {  // sign of X - (r + other) / 2
    const long double mid = (static_cast<long double>(r) + static_cast<long double>(other)) / 2;
    const long double rhs = std::ldexp(mid * static_cast<long double>(n), q);
    return scaled_sum < rhs ? -1 : scaled_sum > rhs ? 1 : 0;
  };
  const bool even = (pattern(r, dt) & 1u) == 0;
  const int below = compare_to_mid(neighbour(r, false, dt));  // must be >= 0
  const int above = compare_to_mid(neighbour(r, true, dt));   // must be <= 0
  if (below < 0 || above > 0 || ((below == 0 || above == 0) && !even))
    return ::testing::AssertionFailure() << r << " is not the RNE of " << sum << " / (" << n << " * 2^" << q << ") in "
                                         << qexact::dtype_name(dt);
  if (r == 0.0f && std::signbit(r) != (sum < 0))
    return ::testing::AssertionFailure() << "zero of the wrong sign for sum " << sum;
  return ::testing::AssertionSuccess();
}

// ---- sharding ----

TEST(PoolMean, ShardedEqualsTheExactMeanRoundedOnce) {
  const unsigned seed = 8675309u;
  std::cout << "seed " << seed << "\n";
  std::mt19937 rng(seed);
  // Values k * 2^-8 with |k| <= 2^20: exact in fp32 and summed exactly in int64 by the check.
  const int q = 8;
  std::uniform_int_distribution<std::int64_t> grid(-(1 << 20), 1 << 20);
  const std::int64_t B = 2, S = 37, P = 8, F1 = 3, F2 = 2;  // 5 cells, the last of 5 rows
  std::vector<std::int64_t> ints(static_cast<std::size_t>(B * S * F1 * F2));
  std::vector<float> v(ints.size());
  for (std::size_t i = 0; i < ints.size(); ++i) {
    ints[i] = grid(rng);
    v[i] = std::ldexp(static_cast<float>(ints[i]), -q);
  }
  const Tensor x = f32_tensor({B, S, F1, F2}, v);
  const std::vector<std::vector<std::int64_t>> shardings = {
      {37}, {10, 27}, {5, 5, 5, 22}, {1, 12, 0, 24}, {36, 1}, {8, 8, 8, 8, 5}, {7, 9, 21}, {3, 3, 3, 3, 3, 3, 19}};
  for (DType out : {DType::f32, DType::bf16, DType::f16}) {
    const Tensor whole = qexact::pooled_block_mean(x.view(), P, out, kRef);
    ASSERT_EQ(whole.shape(), (Shape{B, 5, F1, F2}));
    ASSERT_EQ(whole.dtype(), out);
    const std::vector<float> means = values_of(whole);
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t cell = 0; cell < 5; ++cell)
        for (std::int64_t f = 0; f < F1 * F2; ++f) {
          std::int64_t sum = 0, n = 0;
          for (std::int64_t s = cell * P; s < std::min(S, (cell + 1) * P); ++s, ++n)
            sum += ints[static_cast<std::size_t>((b * S + s) * F1 * F2 + f)];
          EXPECT_TRUE(is_rne_of_mean(means[static_cast<std::size_t>((b * 5 + cell) * F1 * F2 + f)], sum, q, n, out))
              << "cell (" << b << ", " << cell << ", " << f << ")";
        }
    for (const auto& lengths : shardings) {
      SCOPED_TRACE(std::string(qexact::dtype_name(out)) + ", " + std::to_string(lengths.size()) + " shards");
      const Tensor sharded = qexact::pooled_block_mean_sharded(shards_of(x, lengths), P, out, PoolDivisor::true_length);
      EXPECT_EQ(sharded.shape(), whole.shape());
      EXPECT_EQ(bytes_of(sharded), bytes_of(whole));
    }
  }
}

TEST(PoolMean, HalfPrecisionAndStridedInputs) {
  const unsigned seed = 515u;
  std::cout << "seed " << seed << "\n";
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> v(4 * 21 * 6);
  for (float& f : v) f = normal(rng);
  const Tensor x32 = f32_tensor({4, 21, 6}, v);
  const Tensor x16 = qexact::from_f32_vector(v, {4, 21, 6}, DType::bf16);
  // bf16 input means the same as the fp32 tensor of its (exact) values.
  EXPECT_EQ(bytes_of(qexact::pooled_block_mean(x16.view(), 4, DType::f32)),
            bytes_of(qexact::pooled_block_mean(f32_tensor({4, 21, 6}, values_of(x16)).view(), 4, DType::f32)));
  // A non-contiguous view (x32 read as (6, 21, 4) through strides) equals its contiguous copy.
  const TensorView strided{DType::f32, {6, 21, 4}, {1, 6, 126}, x32.raw()};
  EXPECT_EQ(bytes_of(qexact::pooled_block_mean(strided, 4, DType::f32)),
            bytes_of(qexact::pooled_block_mean(qexact::contiguous_copy(strided).view(), 4, DType::f32)));
}

TEST(PoolMean, TailCellDividesByItsTrueLength) {
  const Tensor x = f32_tensor({1, 5}, {1, 2, 3, 4, 10});
  EXPECT_EQ(values_of(qexact::pooled_block_mean(x.view(), 2)), (std::vector<float>{1.5f, 3.5f, 10.0f}));
  const std::vector<TensorView> shards = shards_of(x, {3, 2});
  EXPECT_EQ(values_of(qexact::pooled_block_mean_sharded(shards, 2, DType::f32, PoolDivisor::true_length)),
            (std::vector<float>{1.5f, 3.5f, 10.0f}));
  EXPECT_EQ(values_of(qexact::pooled_block_mean_sharded(shards, 2, DType::f32, PoolDivisor::uniform)),
            (std::vector<float>{1.5f, 3.5f, 5.0f}));
}

TEST(PoolMean, UniformDivisorDiffersExactlyOnTheTailCell) {
  const unsigned seed = 2718u;
  std::cout << "seed " << seed << "\n";
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> positive(0.5f, 2.0f);  // non-zero means everywhere
  for (std::int64_t S : {37, 40}) {
    SCOPED_TRACE("S = " + std::to_string(S));
    std::vector<float> v(static_cast<std::size_t>(3 * S * 5));
    for (float& f : v) f = positive(rng);
    const Tensor x = f32_tensor({3, S, 5}, v);
    const std::vector<TensorView> shards = shards_of(x, {S - 13, 13});
    const std::vector<float> exact =
        values_of(qexact::pooled_block_mean_sharded(shards, 8, DType::f32, PoolDivisor::true_length));
    const std::vector<float> uniform =
        values_of(qexact::pooled_block_mean_sharded(shards, 8, DType::f32, PoolDivisor::uniform));
    const std::int64_t cells = (S + 7) / 8;
    const bool has_tail = S % 8 != 0;
    std::int64_t differing_full = 0, differing_tail = 0;
    for (std::int64_t b = 0; b < 3; ++b)
      for (std::int64_t cell = 0; cell < cells; ++cell)
        for (std::int64_t f = 0; f < 5; ++f) {
          const auto i = static_cast<std::size_t>((b * cells + cell) * 5 + f);
          const bool differ = bits(exact[i]) != bits(uniform[i]);
          (cell == cells - 1 && has_tail ? differing_tail : differing_full) += differ;
        }
    EXPECT_EQ(differing_full, 0);
    EXPECT_EQ(differing_tail, has_tail ? 3 * 5 : 0);  // every tail cell, and nothing else
  }
}

TEST(PoolMean, IdenticalAcrossCalls) {
  std::mt19937 rng(1u);
  std::cout << "seed 1\n";
  std::normal_distribution<float> normal(0.0f, 1e6f);
  std::vector<float> v(2 * 100 * 7);
  for (float& f : v) f = normal(rng);
  const Tensor x = f32_tensor({2, 100, 7}, v);
  EXPECT_EQ(bytes_of(qexact::pooled_block_mean(x.view(), 16, DType::bf16)),
            bytes_of(qexact::pooled_block_mean(x.view(), 16, DType::bf16)));
  const std::vector<TensorView> shards = shards_of(x, {33, 33, 34});
  EXPECT_EQ(bytes_of(qexact::pooled_block_mean_sharded(shards, 16, DType::f32)),
            bytes_of(qexact::pooled_block_mean_sharded(shards, 16, DType::f32)));
}

// ---- why exact sums ----

TEST(PoolMean, ExactSumsWhereNaiveFp32AccumulationFails) {
  // 1e8 + 1 rounds back to 1e8 in fp32, so the naive mean of {1e8, 1, -1e8} is 0.
  const std::vector<float> cancel = {1e8f, 1.0f, -1e8f};
  const float naive = ((cancel[0] + cancel[1]) + cancel[2]) / 3.0f;
  EXPECT_EQ(naive, 0.0f);
  EXPECT_EQ(mean_of(cancel), 1.0f / 3.0f);  // 1/3 correctly rounded

  // {2^-100, 2 + 2^-22, 1, 1}: the mean is 1 + 2^-24 + 2^-102, just above the midpoint of 1
  // and 1 + 2^-23, so it rounds up. fp32 accumulation and an fp64 sum (which drops 2^-100)
  // both land on the midpoint itself and round down to 1.
  const std::vector<float> tie = {0x1p-100f, 2.0f + 0x1p-22f, 1.0f, 1.0f};
  EXPECT_EQ(mean_of(tie), 1.0f + 0x1p-23f);
  EXPECT_EQ((((tie[0] + tie[1]) + tie[2]) + tie[3]) / 4.0f, 1.0f);
  EXPECT_EQ(static_cast<float>(((static_cast<double>(tie[0]) + tie[1]) + tie[2] + tie[3]) / 4.0), 1.0f);

  // The remainder of the division decides: the sum 6 + 2^-22 + 2^-23 + 2^-149 over 6 is
  // 1 + 2^-24 + 2^-149 / 6, a third of a quotient unit above the midpoint of 1 and 1 + 2^-23.
  const std::vector<float> remainder = {0x1p-149f, 1.0f + 0x1p-22f, 1.0f + 0x1p-23f, 1.0f, 1.0f, 2.0f};
  EXPECT_EQ(mean_of(remainder), 1.0f + 0x1p-23f);
  double sum = 0.0;
  for (float f : remainder) sum += f;
  EXPECT_EQ(static_cast<float>(sum / 6.0), 1.0f);

  // A sum past FLT_MAX is no problem for the exact sum.
  const float big = std::numeric_limits<float>::max();
  EXPECT_EQ(mean_of({big, big, big, big}), big);
  EXPECT_EQ(((big + big) + big + big) / 4.0f, INFINITY);
}

// ---- rounding once, into subnormals and overflow ----

TEST(PoolMean, RoundsOnceWithTiesToEven) {
  EXPECT_EQ(mean_of({1.0f, 1.0f + 0x1p-23f}), 1.0f);                              // tie -> even
  EXPECT_EQ(mean_of({1.0f + 0x1p-23f, 1.0f + 0x1p-22f}), 1.0f + 0x1p-22f);        // tie -> even
  EXPECT_EQ(mean_of({1.0f, 1.0f + 0x1p-23f, 1.0f + 0x1p-23f}), 1.0f + 0x1p-23f);  // 2/3 ulp: up
  EXPECT_EQ(mean_of({-1.0f, -1.0f - 0x1p-23f}), -1.0f);
  EXPECT_EQ(mean_of({3.0f, -3.0f}), 0.0f);
  EXPECT_FALSE(std::signbit(mean_of({3.0f, -3.0f})));  // an exact zero is +0
  EXPECT_FALSE(std::signbit(mean_of({-0.0f, -0.0f})));
  // bf16: 1 + 2^-8 is the midpoint of 1 and 1 + 2^-7.
  EXPECT_EQ(mean_of({1.0f, 1.0f + 0x1p-7f}, DType::bf16), 1.0f);
  EXPECT_EQ(mean_of({1.0f, 1.0f + 0x1p-7f, 1.0f + 0x1p-7f}, DType::bf16), 1.0f + 0x1p-7f);
}

TEST(PoolMean, Fp32Subnormals) {
  const float tiny = 0x1p-149f;
  EXPECT_EQ(bits(mean_of({tiny, 0.0f})), bits(0.0f));                   // 2^-150: tie -> 0
  EXPECT_EQ(bits(mean_of({tiny, tiny, 0.0f})), bits(tiny));             // 2/3 of 2^-149
  EXPECT_EQ(bits(mean_of({-tiny, 0.0f})), bits(-0.0f));                 // rounds to zero, keeps sign
  EXPECT_EQ(bits(mean_of({3 * tiny, 0.0f})), bits(2 * tiny));           // 1.5 ulp: tie -> even
  EXPECT_EQ(bits(mean_of({0x1p-148f, 0.0f, 0.0f, 0.0f})), bits(0.0f));  // 2^-150 again
  EXPECT_EQ(bits(mean_of({0x1p-126f, 0x1p-126f, 0x1p-126f})), bits(0x1p-126f));
  EXPECT_EQ(bits(mean_of({0x1p-126f, 0.0f, 0.0f})), bits(0x1p-126f / 3.0f));  // a subnormal quotient
}

TEST(PoolMean, HalfPrecisionSubnormalsAndOverflow) {
  // f16: largest finite 65504, next would be 65536; the midpoint 65520 ties to "even" 65536,
  // which overflows to inf.
  EXPECT_EQ(mean_of({65519.0f, 65519.0f}, DType::f16), 65504.0f);
  EXPECT_EQ(mean_of({65520.0f, 65520.0f}, DType::f16), INFINITY);
  EXPECT_EQ(mean_of({-65520.0f, -65520.0f}, DType::f16), -INFINITY);
  EXPECT_EQ(mean_of({70000.0f}, DType::f16), INFINITY);
  // f16 subnormals are multiples of 2^-24.
  EXPECT_EQ(mean_of({0x1p-24f, 0.0f}, DType::f16), 0.0f);                  // half: tie -> 0
  EXPECT_EQ(mean_of({3 * 0x1p-24f, 0.0f}, DType::f16), 2 * 0x1p-24f);      // 1.5: tie -> 2
  EXPECT_EQ(mean_of({3 * 0x1p-25f, 0.0f, 0.0f, 0.0f}, DType::f16), 0.0f);  // 0.375 -> 0
  EXPECT_EQ(mean_of({0x1p-24f, 0x1p-24f, 0.0f}, DType::f16), 0x1p-24f);    // 0.667 -> 1
  // bf16: largest finite 0x7F7F = 0x1.FEp127; the midpoint to 2^128 is 0x1.FFp127.
  const float bf16_max = qexact::bf16_to_f32(0x7F7F);
  const float midpoint = 0x1.FFp127f;
  EXPECT_EQ(mean_of({midpoint}, DType::bf16), INFINITY);
  EXPECT_EQ(mean_of({std::nextafter(midpoint, 0.0f)}, DType::bf16), bf16_max);
  EXPECT_EQ(mean_of({std::numeric_limits<float>::max(), std::numeric_limits<float>::max()}, DType::bf16), INFINITY);
  EXPECT_EQ(mean_of({0x1p-133f, 0.0f}, DType::bf16), 0.0f);  // half the smallest subnormal
  EXPECT_EQ(mean_of({0x1p-133f, 0x1p-133f, 0.0f}, DType::bf16), 0x1p-133f);
  // The output tensor stores those as the dtype's own bits.
  const Tensor x = f32_tensor({1, 2, 1}, {65520.0f, 65520.0f});
  EXPECT_EQ(qexact::pooled_block_mean(x.view(), 2, DType::f16).data<std::uint16_t>()[0], 0x7C00);
}

// ---- the exact accumulator itself ----

TEST(ExactSum, MergeEqualsAddingEverythingInAnyOrder) {
  const std::vector<float> v = {1e30f, -3.5f, 0x1p-149f, -1e30f, 7.25f, -0x1p-140f, 3e38f, -3e38f, 0.1f};
  qexact::ref::ExactSum forward, backward, left, right;
  for (float f : v) forward.add(f);
  for (auto it = v.rbegin(); it != v.rend(); ++it) backward.add(*it);
  for (std::size_t i = 0; i < v.size(); ++i) (i % 2 ? left : right).add(v[i]);
  left.merge(right);
  EXPECT_TRUE(forward == backward);
  EXPECT_TRUE(forward == left);
  qexact::ref::ExactSum expected;  // the same value written differently: 1e30 - 1e30 etc.
  for (float f : {-3.5f, 0x1p-149f, 7.25f, -0x1p-140f, 0.1f}) expected.add(f);
  EXPECT_TRUE(forward == expected);
  EXPECT_FALSE(forward == qexact::ref::ExactSum{});
}

TEST(ExactSum, MeanOverflowsToInfinityInTheTargetFormat) {
  qexact::ref::ExactSum s;
  s.add(65520.0f);
  EXPECT_EQ(s.mean(1, DType::f16), INFINITY);
  EXPECT_EQ(s.mean(1, DType::f32), 65520.0f);
  qexact::ref::ExactSum b;
  b.add(std::numeric_limits<float>::max());
  EXPECT_EQ(b.mean(1, DType::bf16), INFINITY);
  qexact::ref::ExactSum n;
  n.add(-65520.0f);
  EXPECT_EQ(n.mean(1, DType::f16), -INFINITY);
  EXPECT_THROW(s.mean(0, DType::f32), qexact::Error);
  EXPECT_THROW(s.mean(1, DType::u8), qexact::Error);
  EXPECT_THROW(s.add(NAN), qexact::Error);
}

// ---- invalid input ----

template <class F>
void expect_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (const qexact::Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(PoolMean, RejectsBadArguments) {
  const Tensor x = f32_tensor({2, 6, 3}, std::vector<float>(36, 1.0f));
  const Tensor other_batch = f32_tensor({3, 2, 3}, std::vector<float>(18, 1.0f));
  const Tensor other_features = f32_tensor({2, 2, 4}, std::vector<float>(16, 1.0f));
  const Tensor rank1 = f32_tensor({6}, std::vector<float>(6, 1.0f));
  expect_error(
      [&] {
        qexact::pooled_block_mean_sharded({x.view(), other_batch.view()}, 2, DType::f32);
      },
      "shard 1: shape (3, 2, 3) does not match shard 0");
  expect_error(
      [&] {
        qexact::pooled_block_mean_sharded({x.view(), other_features.view()}, 2, DType::f32);
      },
      "shard 1: shape (2, 2, 4) does not match shard 0");
  expect_error([&] { qexact::pooled_block_mean_sharded({}, 2, DType::f32); }, "no shards");
  expect_error([&] { qexact::pooled_block_mean(rank1.view(), 2); }, "rank >= 2");
  expect_error([&] { qexact::pooled_block_mean(x.view(), 0); }, "pool size must be >= 1");
  expect_error([&] { qexact::pooled_block_mean(x.view(), 2, DType::u8); }, "output dtype");
  expect_error([&] { qexact::pooled_block_mean(Tensor(DType::i32, {2, 6}).view(), 2); }, "i32");

  std::vector<float> v(36, 1.0f);
  v[(1 * 6 + 4) * 3 + 2] = std::numeric_limits<float>::quiet_NaN();
  const Tensor with_nan = f32_tensor({2, 6, 3}, v);
  expect_error([&] { qexact::pooled_block_mean(with_nan.view(), 2); }, "NaN at (1, 4, 2)");
  v[(1 * 6 + 4) * 3 + 2] = -INFINITY;
  const Tensor with_inf = f32_tensor({2, 6, 3}, v);
  expect_error(
      [&] {
        qexact::pooled_block_mean_sharded(shards_of(with_inf, {3, 3}), 2, DType::f32);
      },
      "shard 1: -inf at (1, 1, 2)");
}

TEST(PoolMean, EmptySequenceGivesNoCells) {
  const Tensor x(DType::f32, {2, 0, 3});
  const Tensor y = qexact::pooled_block_mean(x.view(), 4);
  EXPECT_EQ(y.shape(), (Shape{2, 0, 3}));
}

}  // namespace
