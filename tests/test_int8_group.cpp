// int8 per group along the last axis (ggml q8_0, preset q8_0.ggml): d = amax / 127 stored as
// fp16, q = roundf(x * (1 / d)) with the fp32 d before storage; shapes, zero and tiny groups,
// rejected non-finite inputs, strided views, narrow input dtypes and dequantization.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "qexact/contract.hpp"
#include "qexact/formats/fp16.hpp"
#include "qexact/quantize.hpp"
#include "qexact/tensor.hpp"
#include "int8_test_util.hpp"

namespace {

using namespace qexact;
using namespace qexact::int8_test;

std::vector<std::uint16_t> scale_f16_bits(const QuantResult& r) {
  const auto* p = r.scale.data<std::uint16_t>();
  return std::vector<std::uint16_t>(p, p + r.scale.numel());
}

QuantResult q8_0(const Tensor& x, const std::function<void(Contract&)>& change = {}) {
  return quantize(preset("q8_0.ggml", change), x.view(), RunOptions{Engine::reference, 1});  // the pinned engine
}

// A row of `groups` groups of 32, the given leading values of each group, zeros after.
std::vector<float> row_of_groups(const std::vector<std::vector<float>>& heads) {
  std::vector<float> v;
  for (const auto& head : heads) {
    std::vector<float> group(32, 0.0f);
    std::copy(head.begin(), head.end(), group.begin());
    v.insert(v.end(), group.begin(), group.end());
  }
  return v;
}

std::vector<int> row_of_codes(const std::vector<std::vector<int>>& heads) {
  std::vector<int> v;
  for (const auto& head : heads) {
    std::vector<int> group(32, 0);
    std::copy(head.begin(), head.end(), group.begin());
    v.insert(v.end(), group.begin(), group.end());
  }
  return v;
}

TEST(Int8Group, GgmlRoundsHalfAwayFromZeroAndStoresAnF16Scale) {
  // Group 0: amax 127 -> d = 1 (fp16 0x3C00), id = 1. Group 1: amax 1 -> d = fp32(1/127)
  // = 0x1.020408p-7, fp16 0x2008; id = fp32(1/d) = 127.00001: 0.25 * id = 31.750002 -> 32.
  const Tensor x = f32(
      row_of_groups({{127, 2.5f, -2.5f, 0.5f, -0.5f, 1.5f, 0x1.fffffep-2f, -126.5f}, {1, -1, 0.25f, -0.25f}}), {1, 64});
  const QuantResult r = q8_0(x);
  EXPECT_EQ(r.path, "groupwise");
  EXPECT_EQ(r.payload.dtype(), DType::i8);
  EXPECT_EQ(r.scale.dtype(), DType::f16);
  EXPECT_EQ(r.scale.shape(), (Shape{1, 2}));
  EXPECT_EQ(scale_f16_bits(r), (std::vector<std::uint16_t>{0x3C00, 0x2008}));
  EXPECT_EQ(payload_of(r), row_of_codes({{127, 3, -3, 1, -1, 2, 0, -127}, {127, -127, 32, -32}}));
  // The AVX path of ggml rounds to even: a different contract.
  const QuantResult even = q8_0(x, [](Contract& c) { c.int_rounding = IntRounding::rne; });
  EXPECT_EQ(payload_of(even), row_of_codes({{127, 2, -2, 0, 0, 2, 0, -126}, {127, -127, 32, -32}}));
}

TEST(Int8Group, ScaleShapeAndGroupSize) {
  const Tensor x = f32(randn(2 * 3 * 64, 1), {2, 3, 64});
  EXPECT_EQ(q8_0(x).scale.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(q8_0(x, [](Contract& c) { c.group = 16; }).scale.shape(), (Shape{2, 3, 4}));
  const Tensor ragged = f32(randn(2 * 48, 1), {2, 48});
  const std::string msg = error_of([&] { q8_0(ragged); }, ErrorKind::bad_argument);
  EXPECT_NE(msg.find("multiple of the group 32"), std::string::npos) << msg;
}

TEST(Int8Group, EachGroupHasItsOwnScale) {
  // Group g of row r holds amax 127 * m with m = 1 + 4r + g: its d is exactly m.
  std::vector<float> v(3 * 128, 0.5f);
  for (int r = 0; r < 3; ++r)
    for (int g = 0; g < 4; ++g)
      v[static_cast<std::size_t>(r * 128 + g * 32 + (r + 5 * g) % 32)] = 127.0f * static_cast<float>(1 + 4 * r + g);
  const QuantResult res = q8_0(f32(v, {3, 128}));
  ASSERT_EQ(res.scale.shape(), (Shape{3, 4}));
  for (int i = 0; i < 12; ++i)
    EXPECT_EQ(f16_to_f32(res.scale.data<std::uint16_t>()[i]), static_cast<float>(1 + i)) << "group " << i;
}

TEST(Int8Group, ZeroAndTinyGroups) {
  const float t = 0x1p-149f;
  const Tensor x = f32(row_of_groups({{0, 0}, {63 * t, -t}, {1e-38f, -1e-38f, 0, 1e-39f}}), {1, 96});
  const QuantResult r = q8_0(x);
  // Zero group: d = 0, id = 0. 63 * 2^-149: d underflows to 0. amax 1e-38: d = 7.9e-41 is not
  // zero but fp16 stores it as 0, and id = fp32(1 / d) = inf: x * inf saturates, 0 * inf = NaN -> 0.
  EXPECT_EQ(scale_f16_bits(r), (std::vector<std::uint16_t>{0, 0, 0}));
  EXPECT_EQ(payload_of(r), row_of_codes({{0, 0}, {0, 0}, {127, -127, 0, 127}}));
}

// Independent recomputation of q8_0 on contiguous fp32 groups of 32: half-away rounding by
// std::round in double; `by_stored` divides by the fp16-stored d instead of multiplying by 1/d.
std::vector<int> expected_q8_0(const std::vector<float>& v, bool by_stored) {
  std::vector<int> out(v.size());
  for (std::size_t g = 0; g < v.size(); g += 32) {
    float amax = 0.0f;
    for (std::size_t i = g; i < g + 32; ++i) amax = std::max(amax, std::fabs(v[i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const float stored = f16_to_f32(f32_to_f16(d));
    for (std::size_t i = g; i < g + 32; ++i) {
      const float q = by_stored ? (stored != 0.0f ? v[i] / stored : 0.0f) : v[i] * id;
      out[i] = static_cast<int>(std::clamp(std::round(static_cast<double>(q)), -127.0, 127.0));
    }
  }
  return out;
}

TEST(Int8Group, InverseOfTheFp32ScaleDiffersFromDividingByTheStoredScale) {
  constexpr unsigned kSeed = 5150;
  std::cout << "seed " << kSeed << "\n";
  SCOPED_TRACE("seed " + std::to_string(kSeed));
  const Tensor x = f32(randn(256 * 256, kSeed), {256, 256});
  const std::vector<float> v = to_f32_vector(x.view());
  const QuantResult inv = q8_0(x);
  const QuantResult div = q8_0(x, [](Contract& c) { c.quotient = Quotient::divide; });
  EXPECT_EQ(differing_bytes(inv.scale, div.scale), 0);
  const std::int64_t differing = differing_bytes(inv.payload, div.payload);
  std::cout << "inv_scale vs divide by stored fp16: " << differing << " differing payload bytes of " << x.numel()
            << "\n";
  EXPECT_GT(differing, 0);
  EXPECT_EQ(payload_of(inv), expected_q8_0(v, false));
  EXPECT_EQ(payload_of(div), expected_q8_0(v, true));
  std::int64_t wrong_scales = 0;
  for (std::size_t g = 0; g < v.size() / 32; ++g) {
    float amax = 0.0f;
    for (std::size_t i = g * 32; i < g * 32 + 32; ++i) amax = std::max(amax, std::fabs(v[i]));
    wrong_scales += inv.scale.data<std::uint16_t>()[g] != f32_to_f16(amax / 127.0f);
  }
  EXPECT_EQ(wrong_scales, 0);
}

TEST(Int8Group, NonFiniteInputIsRejectedNamingRowAndColumn) {
  const float inf = std::numeric_limits<float>::infinity();
  struct Place {
    std::size_t flat;
    const char* text;
  };
  for (const Place& p :
       {Place{0, "(row 0, column 0)"}, Place{64 + 37, "(row 1, column 37)"}, Place{191, "(row 2, column 63)"}}) {
    for (const auto& [value, name] :
         {std::pair{std::numeric_limits<float>::quiet_NaN(), "NaN"}, std::pair{inf, "+inf"}, std::pair{-inf, "-inf"}}) {
      std::vector<float> v(192, 1.0f);
      v[p.flat] = value;
      if (p.flat == 0) v[191] = -inf;  // a later one is not named
      const Tensor x = f32(v, {3, 64});
      const std::string msg = error_of([&] { q8_0(x); }, ErrorKind::bad_input);
      EXPECT_NE(msg.find(std::string(name) + " at " + p.text), std::string::npos) << msg;
    }
  }
}

TEST(Int8Group, NonContiguousViewsGiveTheBytesOfTheirContiguousCopies) {
  constexpr unsigned kSeed = 13;
  std::cout << "seed " << kSeed << "\n";
  const std::int64_t R = 5, K = 96;
  const Tensor kr = f32(randn(static_cast<std::size_t>(K * R), kSeed), {K, R});
  const TensorView transposed{DType::f32, {R, K}, {1, R}, kr.raw()};
  const Tensor wide = f32(randn(static_cast<std::size_t>(R * 2 * K), kSeed + 1), {R, 2 * K});
  const TensorView strided{DType::f32, {R, K}, {2 * K, 2}, wide.raw()};
  const Contract c = make_preset("q8_0.ggml");
  for (const TensorView& view : {transposed, strided}) {
    ASSERT_FALSE(view.is_contiguous());
    const QuantResult a = quantize(c, view);
    const QuantResult b = quantize(c, contiguous_copy(view).view());
    EXPECT_EQ(differing_bytes(a.payload, b.payload), 0);
    EXPECT_EQ(differing_bytes(a.scale, b.scale), 0);
  }
}

TEST(Int8Group, Bf16AndF16InputsQuantizeTheirOwnValues) {
  constexpr unsigned kSeed = 1729;
  std::cout << "seed " << kSeed << "\n";
  const std::vector<float> v = randn(8 * 64, kSeed);
  for (DType dt : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor narrow = from_f32_vector(v, {8, 64}, dt);
    const Tensor widened = f32(to_f32_vector(narrow.view()), {8, 64});
    const QuantResult a = q8_0(narrow);
    const QuantResult b = q8_0(widened);
    EXPECT_EQ(differing_bytes(a.payload, b.payload), 0);
    EXPECT_EQ(differing_bytes(a.scale, b.scale), 0);
  }
}

TEST(Int8Group, DequantizeMultipliesEachCodeByItsGroupsStoredScale) {
  const Contract c = make_preset("q8_0.ggml");
  const QuantResult r = quantize(c, f32(randn(2 * 96, 17), {2, 96}).view());
  const Tensor x = dequantize(c, r.payload.view(), r.scale.view(), {2, 96});
  ASSERT_EQ(x.shape(), (Shape{2, 96}));
  ASSERT_EQ(x.dtype(), DType::f32);
  std::int64_t wrong = 0;
  for (std::int64_t i = 0; i < 192; ++i) {
    const float want =
        static_cast<float>(r.payload.data<std::int8_t>()[i]) * f16_to_f32(r.scale.data<std::uint16_t>()[i / 32]);
    wrong += std::bit_cast<std::uint32_t>(x.data<float>()[i]) != std::bit_cast<std::uint32_t>(want);
  }
  EXPECT_EQ(wrong, 0);
  // The scale's dtype is part of the contract.
  const Tensor f32_scale = f32(to_f32_vector(r.scale.view()), r.scale.shape());
  error_of([&] { dequantize(c, r.payload.view(), f32_scale.view(), {2, 96}); }, ErrorKind::bad_argument);
}

}  // namespace
