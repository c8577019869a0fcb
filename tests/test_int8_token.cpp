// int8 per token (contracts §4, presets int8.token.*): exact bits on hand-computed rows, empty
// and zero rows, the two scale modes, both ranges, the path selector at its boundary with both
// paths byte-identical, rejected non-finite inputs, strided views and narrow input dtypes.
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

std::vector<std::uint32_t> scale_bits(const QuantResult& r) {
  std::vector<std::uint32_t> out;
  for (std::int64_t i = 0; i < r.scale.numel(); ++i)
    out.push_back(std::bit_cast<std::uint32_t>(r.scale.data<float>()[i]));
  return out;
}

QuantResult quantize_with(const std::string& name, const Tensor& x, const std::function<void(Contract&)>& change = {}) {
  return quantize(preset(name, change), x.view(), RunOptions{Engine::reference, 1});  // the pinned engine
}

TEST(Int8Token, BlazeRowWithAmax127HasScaleOne) {
  const Tensor x = f32({1, -2, 0.5f, 127, 2.5f, -126.5f, 0, 0, 0, 0, 0, 0}, {2, 6});
  const QuantResult r = quantize_with("int8.token.blaze", x);
  EXPECT_EQ(r.path, "single_pass");
  EXPECT_EQ(r.payload.dtype(), DType::i8);
  EXPECT_EQ(r.payload.shape(), (Shape{2, 6}));
  EXPECT_EQ(r.scale.dtype(), DType::f32);
  EXPECT_EQ(r.scale.shape(), (Shape{2}));
  EXPECT_EQ(scale_bits(r), (std::vector<std::uint32_t>{bits(1.0f), 0u}));
  EXPECT_EQ(payload_of(r), (std::vector<int>{1, -2, 0, 127, 2, -126, 0, 0, 0, 0, 0, 0}));
}

TEST(Int8Token, VllmMultipliesByTheReciprocalWhereBlazeDivides) {
  // amax 1.125: the true quotient of 0.5625 is the tie 63.5; x / fp32(1.125/127) = 63.499996
  // (63), x * fp32(127/1.125) = 63.5 exactly (RNE: 64).
  const Tensor x = f32({1.125f, 0.5625f, -0.5625f, 0.0f}, {1, 4});
  const QuantResult blaze = quantize_with("int8.token.blaze", x);
  const QuantResult vllm = quantize_with("int8.token.vllm", x);
  EXPECT_EQ(scale_bits(blaze), (std::vector<std::uint32_t>{bits(0x1.22448ap-7f)}));
  EXPECT_EQ(scale_bits(vllm), (std::vector<std::uint32_t>{bits(0x1.22448ap-7f)}));
  EXPECT_EQ(payload_of(blaze), (std::vector<int>{127, 63, -63, 0}));
  EXPECT_EQ(payload_of(vllm), (std::vector<int>{127, 64, -64, 0}));
}

TEST(Int8Token, EmptyTensorWithZeroRows) {
  for (const Shape& shape : {Shape{0, 16}, Shape{3, 0, 8}}) {
    SCOPED_TRACE(shape_str(shape));
    const QuantResult r = quantize_with("int8.token.blaze", Tensor(DType::f32, shape));
    EXPECT_EQ(r.payload.shape(), shape);
    EXPECT_EQ(r.payload.numel(), 0);
    EXPECT_EQ(r.scale.shape(), Shape(shape.begin(), shape.end() - 1));
    EXPECT_EQ(r.scale.numel(), 0);
  }
}

TEST(Int8Token, RankOneInputIsOneRowWithAScalarScale) {
  const QuantResult r = quantize_with("int8.token.blaze", f32({254, -1, 3}, {3}));
  EXPECT_EQ(r.scale.shape(), Shape{});
  EXPECT_EQ(scale_bits(r), (std::vector<std::uint32_t>{bits(2.0f)}));
  EXPECT_EQ(payload_of(r), (std::vector<int>{127, 0, 2}));
}

TEST(Int8Token, ZeroRowsFollowTheScaleRule) {
  const Tensor zeros = f32(std::vector<float>(8, 0.0f), {2, 4});
  const QuantResult no_min = quantize_with("int8.token.blaze", zeros);
  EXPECT_EQ(scale_bits(no_min), (std::vector<std::uint32_t>{0u, 0u}));
  EXPECT_EQ(payload_of(no_min), std::vector<int>(8, 0));
  const QuantResult after = quantize_with("int8.token.blaze", zeros, [](Contract& c) { c.scale_min = 0.5f; });
  EXPECT_EQ(scale_bits(after), (std::vector<std::uint32_t>{bits(0.5f), bits(0.5f)}));
  EXPECT_EQ(payload_of(after), std::vector<int>(8, 0));
  const QuantResult before = quantize_with("int8.token.blaze", zeros, [](Contract& c) {
    c.scale_min = 0.5f;
    c.scale_mode = ScaleMode::before;
  });
  EXPECT_EQ(scale_bits(before), (std::vector<std::uint32_t>{bits(0x1.020408p-8f), bits(0x1.020408p-8f)}));
  EXPECT_EQ(payload_of(before), std::vector<int>(8, 0));
  const QuantResult vllm = quantize_with("int8.token.vllm", zeros);
  EXPECT_EQ(scale_bits(vllm), (std::vector<std::uint32_t>{0u, 0u}));
  EXPECT_EQ(payload_of(vllm), std::vector<int>(8, 0));
}

TEST(Int8Token, ScaleModesBeforeAndAfterAreDifferentContracts) {
  const Tensor x = f32({1.0f, -0.25f, 0.5f}, {1, 3});
  // scale_min 0.01 lies between amax/127 and amax: before gives 1/127, after gives 0.01.
  const auto with_min = [](ScaleMode m, float min) {
    return [m, min](Contract& c) {
      c.scale_mode = m;
      c.scale_min = min;
    };
  };
  const QuantResult before = quantize_with("int8.token.blaze", x, with_min(ScaleMode::before, 0.01f));
  const QuantResult after = quantize_with("int8.token.blaze", x, with_min(ScaleMode::after, 0.01f));
  EXPECT_EQ(scale_bits(before), (std::vector<std::uint32_t>{bits(0x1.020408p-7f)}));
  EXPECT_EQ(scale_bits(after), (std::vector<std::uint32_t>{bits(0.01f)}));
  EXPECT_EQ(payload_of(before), (std::vector<int>{127, -32, 64}));  // -31.75, and the tie 63.5 to even
  EXPECT_EQ(payload_of(after), (std::vector<int>{100, -25, 50}));
  // scale_min 0.001 < amax/127: both give 1/127.
  const QuantResult before_small = quantize_with("int8.token.blaze", x, with_min(ScaleMode::before, 0.001f));
  const QuantResult after_small = quantize_with("int8.token.blaze", x, with_min(ScaleMode::after, 0.001f));
  EXPECT_EQ(scale_bits(before_small), scale_bits(after_small));
  EXPECT_EQ(scale_bits(before_small), (std::vector<std::uint32_t>{bits(0x1.020408p-7f)}));
  EXPECT_EQ(payload_of(before_small), payload_of(after_small));
}

TEST(Int8Token, Range128ReachesMinus128OnlyWhereTheQuotientGoesBelowMinus127Point5) {
  constexpr unsigned kSeed = 314159;
  std::cout << "seed " << kSeed << "\n";
  SCOPED_TRACE("seed " + std::to_string(kSeed));
  // Random rows: |quotient| <= 127 (+ an ulp or two) by construction, so the ranges agree.
  const Tensor x = f32(randn(64 * 512, kSeed), {64, 512});
  for (const char* name : {"int8.token.blaze", "int8.token.vllm"}) {
    SCOPED_TRACE(name);
    const QuantResult r127 = quantize_with(name, x, [](Contract& c) { c.range = 127; });
    const QuantResult r128 = quantize_with(name, x, [](Contract& c) { c.range = 128; });
    EXPECT_EQ(differing_bytes(r127.payload, r128.payload), 0);
  }
  // vLLM on a row of amax 1e-38: fp32(127 / 1e-38) = inf, so x * inf saturates (to -128 with
  // range 128), 0 * inf = NaN encodes to 0; the scale itself is a non-zero subnormal.
  const Tensor tiny = f32({-1e-38f, 1e-38f, 0.0f, -3e-39f}, {1, 4});
  const QuantResult vllm = quantize_with("int8.token.vllm", tiny);
  EXPECT_EQ(scale_bits(vllm), (std::vector<std::uint32_t>{bits(1e-38f / 127.0f)}));
  EXPECT_EQ(payload_of(vllm), (std::vector<int>{-128, 127, 0, -128}));
  EXPECT_EQ(payload_of(quantize_with("int8.token.vllm", tiny, [](Contract& c) { c.range = 127; })),
            (std::vector<int>{-127, 127, 0, -127}));
  // An fp16-stored scale that rounds down (2.5 * 2^-24 -> 2 * 2^-24): quotients +/-158.75.
  const float amax = 317.5f * 0x1p-24f;
  const Tensor f16_case = f32({amax, -amax, 10 * 0x1p-23f}, {1, 3});
  const auto f16_store = [](int range) {
    return [range](Contract& c) {
      c.scale_store = ScaleStore::f16;
      c.range = range;
    };
  };
  const QuantResult s127 = quantize_with("int8.token.blaze", f16_case, f16_store(127));
  const QuantResult s128 = quantize_with("int8.token.blaze", f16_case, f16_store(128));
  ASSERT_EQ(s127.scale.dtype(), DType::f16);
  EXPECT_EQ(s127.scale.data<std::uint16_t>()[0], 0x0002);
  EXPECT_EQ(payload_of(s127), (std::vector<int>{127, -127, 10}));
  EXPECT_EQ(payload_of(s128), (std::vector<int>{127, -128, 10}));
}

TEST(Int8Token, TinyAmaxUnderflowsTheScaleToZeroAtOrBelow63Subnormals) {
  const float t = 0x1p-149f;
  const QuantResult r = quantize_with("int8.token.blaze", f32({63 * t, -t, 5 * t, 64 * t, -t, 5 * t}, {2, 3}));
  EXPECT_EQ(scale_bits(r), (std::vector<std::uint32_t>{0u, bits(t)}));
  EXPECT_EQ(payload_of(r), (std::vector<int>{0, 0, 0, 64, -1, 5}));
}

TEST(Int8Token, SelectorBoundary) {
  EXPECT_EQ(select_token_path(256, 255), TokenPath::two_pass_chunked);
  EXPECT_EQ(select_token_path(256, 256), TokenPath::single_pass);
  EXPECT_EQ(select_token_path(256, 257), TokenPath::single_pass);
  EXPECT_STREQ(token_path_name(TokenPath::single_pass), "single_pass");
  EXPECT_STREQ(token_path_name(TokenPath::two_pass_chunked), "two_pass_chunked");
}

// Random rows whose amax sits in a different place in each row (first element, last element,
// and a chunk boundary among them), so a chunked reduction that missed a chunk would show.
std::vector<float> rows_with_moving_max(std::int64_t rows, std::int64_t cols, unsigned seed) {
  std::vector<float> v = randn(static_cast<std::size_t>(rows * cols), seed);
  for (std::int64_t r = 0; r < rows; ++r)
    v[static_cast<std::size_t>(r * cols + (r * 37) % cols)] = (r % 2 ? -1.0f : 1.0f) * (8.0f + static_cast<float>(r));
  v[static_cast<std::size_t>(cols - 1)] = 50.0f;
  return v;
}

TEST(Int8Token, BothPathsGiveIdenticalBytesAroundTheBudget) {
  constexpr unsigned kSeed = 271828;
  std::cout << "seed " << kSeed << "\n";
  SCOPED_TRACE("seed " + std::to_string(kSeed));
  const std::int64_t R = 37, Q = 64;  // a working row is 256 bytes
  const Tensor x = from_f32_vector(rows_with_moving_max(R, Q, kSeed), {R, Q}, DType::bf16);
  for (const char* name : {"int8.token.blaze", "int8.token.vllm"}) {
    SCOPED_TRACE(name);
    const QuantResult at = quantize_with(name, x, [](Contract& c) { c.budget = 256; });
    EXPECT_EQ(at.path, "single_pass");
    struct Case {
      std::int64_t budget;
      const char* path;
    };
    // 255: chunks of 63 (one partial chunk per row); 100: chunks of 25; 4 and 3: chunks of 1.
    for (const Case& k : {Case{257, "single_pass"}, Case{1 << 20, "single_pass"}, Case{255, "two_pass_chunked"},
                          Case{100, "two_pass_chunked"}, Case{4, "two_pass_chunked"}, Case{3, "two_pass_chunked"}}) {
      SCOPED_TRACE("budget " + std::to_string(k.budget));
      const QuantResult r = quantize_with(name, x, [&](Contract& c) { c.budget = k.budget; });
      EXPECT_EQ(r.path, k.path);
      EXPECT_EQ(differing_bytes(r.payload, at.payload), 0);
      EXPECT_EQ(differing_bytes(r.scale, at.scale), 0);
    }
  }
}

TEST(Int8Token, WideRowsTakeTheChunkedPathUnderTheDefaultBudget) {
  constexpr unsigned kSeed = 1618;
  std::cout << "seed " << kSeed << "\n";
  const std::int64_t R = 2, Q = 300000;  // 1.2 MB working row > the 1 MiB default budget
  const Tensor x = f32(rows_with_moving_max(R, Q, kSeed), {R, Q});
  const QuantResult chunked = quantize_with("int8.token.blaze", x);
  const QuantResult single = quantize_with("int8.token.blaze", x, [](Contract& c) { c.budget = 4 * 300000; });
  EXPECT_EQ(chunked.path, "two_pass_chunked");
  EXPECT_EQ(single.path, "single_pass");
  EXPECT_EQ(differing_bytes(chunked.payload, single.payload), 0);
  EXPECT_EQ(differing_bytes(chunked.scale, single.scale), 0);
}

// Independent recomputation of §4 on contiguous fp32 rows: RNE by std::nearbyint in double.
std::vector<int> expected_token_payload(const std::vector<float>& v, std::int64_t cols, const Contract& c) {
  std::vector<int> out(v.size());
  const double lo = c.range == 128 ? -128.0 : -127.0;
  for (std::size_t r = 0; r < v.size() / static_cast<std::size_t>(cols); ++r) {
    const float* row = v.data() + r * static_cast<std::size_t>(cols);
    float amax = 0.0f;
    for (std::int64_t j = 0; j < cols; ++j) amax = std::max(amax, std::fabs(row[j]));
    const float scale =
        c.scale_mode == ScaleMode::before ? std::max(amax, c.scale_min) / 127.0f : std::max(amax / 127.0f, c.scale_min);
    const float multiplier = 127.0f / std::max(amax, c.scale_min);
    for (std::int64_t j = 0; j < cols; ++j) {
      const float q = c.quotient == Quotient::reciprocal ? row[j] * multiplier : row[j] / scale;
      out[r * static_cast<std::size_t>(cols) + static_cast<std::size_t>(j)] =
          static_cast<int>(std::clamp(std::nearbyint(static_cast<double>(q)), lo, 127.0));
    }
  }
  return out;
}

TEST(Int8Token, RandomRowsAreExactToTheirContracts) {
  constexpr unsigned kSeed = 8675309;
  std::cout << "seed " << kSeed << "\n";
  SCOPED_TRACE("seed " + std::to_string(kSeed));
  const Tensor x = from_f32_vector(randn(128 * 256, kSeed, 0.05f), {128, 256}, DType::bf16);
  const std::vector<float> v = to_f32_vector(x.view());
  const std::vector<Contract> contracts = {preset("int8.token.blaze"), preset("int8.token.vllm"),
                                           preset("int8.token.blaze", [](Contract& c) { c.scale_min = 1e-3f; }),
                                           preset("int8.token.blaze", [](Contract& c) {
                                             c.scale_min = 1e-3f;
                                             c.scale_mode = ScaleMode::before;
                                           })};
  for (const Contract& c : contracts) {
    const QuantResult r = quantize(c, x.view());
    EXPECT_EQ(payload_of(r), expected_token_payload(v, 256, c));
  }
  const std::int64_t differing =
      differing_bytes(quantize(contracts[0], x.view()).payload, quantize(preset("int8.token.blaze",
                                                                                [](Contract& c) {
                                                                                  c.scale_mode = ScaleMode::before;
                                                                                  c.quotient = Quotient::reciprocal;
                                                                                }),
                                                                         x.view())
                                                                    .payload);
  std::cout << "divide vs reciprocal: " << differing << " differing payload bytes of " << x.numel() << "\n";
  EXPECT_GT(differing, 0);
}

TEST(Int8Token, NonFiniteInputIsRejectedNamingRowAndColumn) {
  const Shape shape{2, 3, 5};  // rows = 6, Q = 5
  const float inf = std::numeric_limits<float>::infinity();
  struct Place {
    std::size_t flat;
    const char* text;
  };
  for (const Place& p :
       {Place{0, "(row 0, column 0)"}, Place{17, "(row 3, column 2)"}, Place{29, "(row 5, column 4)"}}) {
    for (const auto& [value, name] :
         {std::pair{std::numeric_limits<float>::quiet_NaN(), "NaN"}, std::pair{inf, "+inf"}, std::pair{-inf, "-inf"}}) {
      std::vector<float> v(30, 1.0f);
      v[p.flat] = value;
      if (p.flat == 0) v[29] = inf;  // a later one is not named
      const Tensor x = f32(v, shape);
      for (std::int64_t budget : {1 << 20, 4}) {
        const std::string msg =
            error_of([&] { quantize_with("int8.token.blaze", x, [&](Contract& c) { c.budget = budget; }); },
                     ErrorKind::bad_input);
        EXPECT_NE(msg.find(std::string(name) + " at " + p.text), std::string::npos) << msg;
      }
    }
  }
}

TEST(Int8Token, NonContiguousViewsGiveTheBytesOfTheirContiguousCopies) {
  constexpr unsigned kSeed = 11;
  std::cout << "seed " << kSeed << "\n";
  const std::int64_t R = 9, Q = 40;
  const Tensor qr = f32(randn(static_cast<std::size_t>(Q * R), kSeed), {Q, R});
  const TensorView transposed{DType::f32, {R, Q}, {1, R}, qr.raw()};
  const Tensor wide = f32(randn(static_cast<std::size_t>(R * 2 * Q), kSeed + 1), {R, 2 * Q});
  const TensorView strided{DType::f32, {R, Q}, {2 * Q, 2}, wide.raw()};
  for (std::int64_t budget : {1 << 20, 64}) {
    for (const char* name : {"int8.token.blaze", "int8.token.vllm"}) {
      SCOPED_TRACE(std::string(name) + " budget " + std::to_string(budget));
      const Contract c = preset(name, [&](Contract& k) { k.budget = budget; });
      for (const TensorView& view : {transposed, strided}) {
        ASSERT_FALSE(view.is_contiguous());
        const QuantResult a = quantize(c, view);
        const QuantResult b = quantize(c, contiguous_copy(view).view());
        EXPECT_EQ(a.path, b.path);
        EXPECT_EQ(differing_bytes(a.payload, b.payload), 0);
        EXPECT_EQ(differing_bytes(a.scale, b.scale), 0);
      }
    }
  }
}

TEST(Int8Token, Bf16AndF16InputsQuantizeTheirOwnValues) {
  constexpr unsigned kSeed = 2718;
  std::cout << "seed " << kSeed << "\n";
  const std::vector<float> v = randn(16 * 48, kSeed);
  for (DType dt : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor narrow = from_f32_vector(v, {16, 48}, dt);
    const Tensor widened = f32(to_f32_vector(narrow.view()), {16, 48});
    for (const char* name : {"int8.token.blaze", "int8.token.vllm"}) {
      const QuantResult a = quantize_with(name, narrow);
      const QuantResult b = quantize_with(name, widened);
      EXPECT_EQ(differing_bytes(a.payload, b.payload), 0) << name;
      EXPECT_EQ(differing_bytes(a.scale, b.scale), 0) << name;
    }
  }
}

TEST(Int8Token, DequantizeMultipliesEachCodeByItsRowsStoredScale) {
  const std::vector<float> v = randn(2 * 3 * 7, 3);
  for (ScaleStore store : {ScaleStore::f32, ScaleStore::f16}) {
    SCOPED_TRACE(static_cast<int>(store));
    const Contract c = preset("int8.token.blaze", [&](Contract& k) { k.scale_store = store; });
    const QuantResult r = quantize(c, f32(v, {2, 3, 7}).view());
    const Tensor x = dequantize(c, r.payload.view(), r.scale.view(), {2, 3, 7});
    ASSERT_EQ(x.shape(), (Shape{2, 3, 7}));
    const std::vector<float> scales = to_f32_vector(r.scale.view());
    std::int64_t wrong = 0;
    for (std::int64_t i = 0; i < 42; ++i) {
      const float want = static_cast<float>(r.payload.data<std::int8_t>()[i]) * scales[static_cast<std::size_t>(i / 7)];
      wrong += bits(x.data<float>()[i]) != bits(want);
    }
    EXPECT_EQ(wrong, 0);
  }
}

}  // namespace
