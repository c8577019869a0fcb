// The pooled side channel as data between processes (qexact/pool.hpp: pooled_partial,
// pooled_combine, the byte form): combined partials equal the single-process exact mean bit for
// bit, whatever the split; the uniform divisor differs on the tail cell only.
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "qexact/pool.hpp"
#include "tensor_test_util.hpp"

namespace {

using namespace qexact;
using test::seq_slice;

Tensor sample(const Shape& shape, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> v(static_cast<std::size_t>(shape_numel(shape)));
  for (float& x : v) x = normal(rng);
  return from_f32_vector(v, shape, DType::bf16);
}

std::vector<std::uint8_t> bytes_of(const Tensor& t) {
  const auto* p = static_cast<const std::uint8_t*>(t.raw());
  return std::vector<std::uint8_t>(p, p + t.nbytes());
}

// Partials of the split at `offsets` (ascending, from 0 to S), each sent through its byte form.
std::vector<PoolPartial> travelled_partials(const Tensor& x, const std::vector<std::int64_t>& offsets,
                                            std::int64_t pool) {
  std::vector<PoolPartial> out;
  for (std::size_t r = 0; r + 1 < offsets.size(); ++r) {
    const PoolPartial p = pooled_partial(seq_slice(x, offsets[r], offsets[r + 1] - offsets[r]), offsets[r], pool);
    out.push_back(pool_partial_from_bytes(pool_partial_bytes(p)));
  }
  return out;
}

TEST(PoolPartial, CombinedPartialsEqualTheWholeTensorsMean) {
  const Shape shape{2, 100, 3, 4};  // S = 100, P = 16: cells 6 of 16 and a tail of 4
  const Tensor x = sample(shape, 7);
  const Tensor whole = pooled_block_mean(x.view(), 16, DType::bf16, {Engine::reference, 1});
  for (const std::vector<std::int64_t>& offsets :
       {std::vector<std::int64_t>{0, 100}, {0, 50, 100}, {0, 25, 50, 75, 100}, {0, 33, 33, 41, 100}}) {
    const Tensor combined =
        pooled_combine(travelled_partials(x, offsets, 16), 2, {3, 4}, 100, 16, DType::bf16);
    EXPECT_EQ(combined.shape(), whole.shape());
    EXPECT_EQ(bytes_of(combined), bytes_of(whole)) << "split of " << offsets.size() - 1 << " shards";
  }
}

TEST(PoolPartial, UniformDivisorDiffersOnTheTailCellOnly) {
  const Shape shape{1, 100, 2, 8};
  const Tensor x = sample(shape, 8);
  const std::vector<PoolPartial> parts = travelled_partials(x, {0, 25, 50, 75, 100}, 16);
  const Tensor exact = pooled_combine(parts, 1, {2, 8}, 100, 16, DType::f32);
  const Tensor uniform = pooled_combine(parts, 1, {2, 8}, 100, 16, DType::f32, PoolDivisor::uniform);
  const std::int64_t per_cell = 2 * 8;
  std::int64_t tail_differing = 0;
  for (std::int64_t i = 0; i < exact.numel(); ++i) {
    const bool differs = exact.data<float>()[i] != uniform.data<float>()[i];
    if (i / per_cell == 6)
      tail_differing += differs;
    else
      EXPECT_FALSE(differs) << "element " << i;
  }
  EXPECT_GT(tail_differing, 0);
}

TEST(PoolPartial, PartialsThatDoNotCoverTheSequenceAreRejected) {
  const Tensor x = sample({1, 64, 1, 2}, 9);
  std::vector<PoolPartial> parts = travelled_partials(x, {0, 32, 64}, 16);
  parts.pop_back();
  try {
    pooled_combine(parts, 1, {1, 2}, 64, 16, DType::f32);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the partials hold 0 rows of cell 2, which has 16"), std::string::npos) << e.what();
  }
  std::vector<std::uint8_t> bytes = pool_partial_bytes(travelled_partials(x, {0, 64}, 16)[0]);
  bytes.resize(bytes.size() - 3);
  EXPECT_THROW(pool_partial_from_bytes(bytes), Error);
}

}  // namespace
