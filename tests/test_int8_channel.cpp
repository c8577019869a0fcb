// int8 per (head, channel) with a global amax (qexact/int8_channel.hpp, contracts §7): the
// same bytes as an independent route through int8.block, and exact across a sequence split
// once the shards' amax tensors are max-reduced.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "int8_test_util.hpp"
#include "qexact/int8_channel.hpp"
#include "tensor_test_util.hpp"

namespace {

using namespace qexact;
using test::seq_slice;
using namespace qexact::int8_test;

std::vector<float> sample(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.5f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Int8Channel, EqualsInt8BlockWhoseBlockIsOneChannel) {
  // (1, S, N, D) seen as (1, S, N*D, 1) with token_block >= S: int8.block's domain of head n*D+d
  // is then exactly channel (n, d) over the whole sequence.
  const Shape shape{1, 48, 3, 8};
  const Tensor x = f32(sample(48 * 3 * 8, 1), shape);
  const QuantResult got = quantize_int8_channel(x.view(), int8_channel_abs_max(x.view()).view());

  Tensor as_heads = x;
  as_heads.reshape({1, 48, 24, 1});
  const QuantResult want =
      quantize(make_contract("int8.block.ascend", {"token_block=64"}), as_heads.view(), {Engine::reference, 1});
  EXPECT_EQ(got.payload.shape(), shape);
  EXPECT_EQ(got.scale.shape(), (Shape{3, 8}));
  EXPECT_EQ(bytes_of(got.payload), bytes_of(want.payload));
  EXPECT_EQ(bytes_of(got.scale), bytes_of(want.scale));
}

TEST(Int8Channel, ShardsWithTheMaxReducedAmaxGiveTheWholeTensorsBytes) {
  const Shape shape{1, 90, 2, 16};
  const Tensor x = from_f32_vector(sample(90 * 2 * 16, 2), shape, DType::bf16);
  const QuantResult whole = quantize_int8_channel(x.view(), int8_channel_abs_max(x.view()).view());

  const std::vector<std::int64_t> offsets{0, 30, 60, 90};
  Tensor amax(DType::f32, {2, 16});
  for (std::size_t r = 0; r + 1 < offsets.size(); ++r) {
    const Tensor local = int8_channel_abs_max(seq_slice(x, offsets[r], offsets[r + 1] - offsets[r]));
    for (std::int64_t i = 0; i < amax.numel(); ++i)
      amax.data<float>()[i] = std::max(amax.data<float>()[i], local.data<float>()[i]);
  }
  std::vector<std::uint8_t> gathered;
  for (std::size_t r = 0; r + 1 < offsets.size(); ++r) {
    const QuantResult part = quantize_int8_channel(seq_slice(x, offsets[r], offsets[r + 1] - offsets[r]), amax.view());
    EXPECT_EQ(bytes_of(part.scale), bytes_of(whole.scale));
    const auto b = bytes_of(part.payload);
    gathered.insert(gathered.end(), b.begin(), b.end());
  }
  EXPECT_EQ(gathered, bytes_of(whole.payload));

  // A shard's own amax is not the global one: its scales differ somewhere.
  const QuantResult local = quantize_int8_channel(seq_slice(x, 0, 30), int8_channel_abs_max(seq_slice(x, 0, 30)).view());
  EXPECT_GT(differing_bytes(local.scale, whole.scale), 0);
}

TEST(Int8Channel, ScaleIsAmaxOver127AndAZeroChannelGivesZeros) {
  // Channel 0: amax 254 -> scale exactly 2, q = x / 2; channel 1 all zero -> scale 0, payload 0.
  const Tensor x = f32({254.0f, 0.0f, -3.0f, 0.0f, 5.0f, 0.0f}, {1, 3, 1, 2});
  const QuantResult r = quantize_int8_channel(x.view(), int8_channel_abs_max(x.view()).view());
  EXPECT_EQ(r.scale.data<float>()[0], 2.0f);
  EXPECT_EQ(r.scale.data<float>()[1], 0.0f);
  EXPECT_EQ(payload_of(r), (std::vector<int>{127, 0, -2, 0, 2, 0}));  // -1.5 and 2.5 round to even
}

TEST(Int8Channel, BadInputIsAClearError) {
  const Tensor x = f32({1.0f, std::numeric_limits<float>::quiet_NaN(), 2.0f, 3.0f}, {1, 2, 1, 2});
  EXPECT_NE(error_of([&] { int8_channel_abs_max(x.view()); }).find("NaN at (b 0, s 0, n 0, d 1)"), std::string::npos);
  const Tensor y = f32({1.0f, 2.0f, 3.0f, 4.0f}, {1, 2, 1, 2});
  EXPECT_NE(error_of([&] { quantize_int8_channel(y.view(), f32({1.0f}, {1, 1}).view()); }).find("amax must be f32 of shape (1, 2)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { quantize_int8_channel(y.view(), f32({2.0f, 4.0f}, {1, 2}).view()); })
                .find("|x| at (b 0, s 1, n 0, d 0) exceeds the given amax"),
            std::string::npos);
  EXPECT_NE(error_of([&] { int8_channel_abs_max(f32({1.0f}, {1}).view()); }).find("needs a (B, S, N, D) tensor"),
            std::string::npos);
}

}  // namespace
