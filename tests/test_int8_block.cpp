// int8 per (b, head, token block) on (B, S, N, D) (contracts §3, presets int8.block.*): exact
// payload and scale bits on hand-computed blocks, the tail rule, divide vs reciprocal, zero and
// tiny blocks, saturation, rejected non-finite inputs, strided views and narrow input dtypes.
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

std::uint32_t scale_bits(const QuantResult& r, std::int64_t i) { return bits(r.scale.data<float>()[i]); }

QuantResult quantize_with(const std::string& name, const Tensor& x, const std::function<void(Contract&)>& change = {}) {
  return quantize(preset(name, change), x.view(), RunOptions{Engine::reference, 1});  // the pinned engine
}

TEST(Int8Block, AscendBlockWithAmax127HasScaleOneAndRoundsToEven) {
  const Tensor x = f32({127, -127, 0.5f, 1.5f, 2.5f, -2.5f, 3.49f, -0.5f}, {1, 2, 1, 4});
  const QuantResult r = quantize_with("int8.block.ascend", x);
  EXPECT_EQ(r.path, "groupwise");
  EXPECT_EQ(r.payload.dtype(), DType::i8);
  EXPECT_EQ(r.payload.shape(), (Shape{1, 2, 1, 4}));
  EXPECT_EQ(r.scale.dtype(), DType::f32);
  EXPECT_EQ(r.scale.shape(), (Shape{1, 1, 1}));
  EXPECT_EQ(scale_bits(r, 0), bits(1.0f));
  EXPECT_EQ(payload_of(r), (std::vector<int>{127, -127, 0, 2, 2, -2, 3, 0}));
}

TEST(Int8Block, PresetsDifferAtAnExactTieOfTheTrueQuotient) {
  // amax 1.125: scale = fp32(1.125 / 127) = 0x1.22448ap-7. The true quotient of 0.5625 is the
  // tie 63.5. Dividing by the stored scale gives 63.499996 (RNE 63; Triton's +0.5 truncates to
  // 63); multiplying by fp32(127 / 1.125) gives exactly 63.5 (RNE to even: 64).
  const Tensor x = f32({1.125f, 0.5625f, -0.5625f, 0.0f}, {1, 1, 1, 4});
  for (const char* name : {"int8.block.ascend", "int8.block.sage.cuda", "int8.block.sage.triton"}) {
    SCOPED_TRACE(name);
    EXPECT_EQ(scale_bits(quantize_with(name, x), 0), bits(0x1.22448ap-7f));
  }
  EXPECT_EQ(payload_of(quantize_with("int8.block.ascend", x)), (std::vector<int>{127, 63, -63, 0}));
  EXPECT_EQ(payload_of(quantize_with("int8.block.sage.cuda", x)), (std::vector<int>{127, 64, -64, 0}));
  EXPECT_EQ(payload_of(quantize_with("int8.block.sage.triton", x)), (std::vector<int>{127, 63, -63, 0}));
}

TEST(Int8Block, TritonRoundsHalfAwayWithItsFp32Artefact) {
  const Tensor x = f32({127, 0x1.fffffep-2f, -0x1.fffffep-2f, 2.5f, -2.5f, 0.5f, -126.5f, 1.4999999f}, {1, 8, 1, 1});
  EXPECT_EQ(payload_of(quantize_with("int8.block.sage.triton", x)), (std::vector<int>{127, 1, -1, 3, -3, 1, -127, 1}));
  EXPECT_EQ(payload_of(quantize_with("int8.block.ascend", x)), (std::vector<int>{127, 0, 0, 2, -2, 0, -126, 1}));
}

TEST(Int8Block, OneScalePerBatchHeadAndTokenBlock) {
  // (B, S, N, D) = (2, 130, 3, 5): 3 blocks of 64 tokens (the last has 2). Block (b, n, k) holds
  // amax 127 * m with m = 1 + 9b + 3n + k, so its scale is exactly m.
  const Shape shape{2, 130, 3, 5};
  std::vector<float> v(static_cast<std::size_t>(shape_numel(shape)), 0.25f);
  for (int b = 0; b < 2; ++b)
    for (int n = 0; n < 3; ++n)
      for (int k = 0; k < 3; ++k) {
        const int s = k * 64 + (k == 2 ? 1 : 17), d = (b + n + k) % 5;
        v[static_cast<std::size_t>(((b * 130 + s) * 3 + n) * 5 + d)] =
            -127.0f * static_cast<float>(1 + 9 * b + 3 * n + k);
      }
  const QuantResult r = quantize_with("int8.block.ascend", f32(v, shape));
  ASSERT_EQ(r.scale.shape(), (Shape{2, 3, 3}));
  for (int b = 0; b < 2; ++b)
    for (int n = 0; n < 3; ++n)
      for (int k = 0; k < 3; ++k)
        EXPECT_EQ(r.scale.data<float>()[(b * 3 + n) * 3 + k], static_cast<float>(1 + 9 * b + 3 * n + k))
            << "b " << b << " n " << n << " block " << k;
}

TEST(Int8Block, TokenBlockIsAParameter) {
  const QuantResult r =
      quantize_with("int8.block.ascend", f32({1, 2, 3, 4, 5}, {1, 5, 1, 1}), [](Contract& c) { c.token_block = 2; });
  ASSERT_EQ(r.scale.shape(), (Shape{1, 1, 3}));
  EXPECT_EQ(r.scale.data<float>()[0], 2.0f / 127.0f);
  EXPECT_EQ(r.scale.data<float>()[1], 4.0f / 127.0f);
  EXPECT_EQ(r.scale.data<float>()[2], 5.0f / 127.0f);
  EXPECT_EQ(payload_of(r), (std::vector<int>{64, 127, 95, 127, 127}));
}

TEST(Int8Block, TailBlockEqualsZeroPadThenSlice) {
  constexpr unsigned kSeed = 20240601;
  std::cout << "seed " << kSeed << "\n";
  SCOPED_TRACE("seed " + std::to_string(kSeed));
  const std::int64_t B = 2, N = 3, D = 16;
  for (std::int64_t S : {100, 65, 127}) {
    const std::int64_t padded_s = (S + 63) / 64 * 64;
    const std::vector<float> v = randn(static_cast<std::size_t>(B * S * N * D), kSeed + static_cast<unsigned>(S));
    std::vector<float> padded(static_cast<std::size_t>(B * padded_s * N * D), 0.0f);
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t i = 0; i < S * N * D; ++i)
        padded[static_cast<std::size_t>(b * padded_s * N * D + i)] = v[static_cast<std::size_t>(b * S * N * D + i)];
    for (const char* name : {"int8.block.ascend", "int8.block.sage.cuda", "int8.block.sage.triton"}) {
      SCOPED_TRACE(std::string(name) + " S " + std::to_string(S));
      const QuantResult r = quantize_with(name, f32(v, {B, S, N, D}));
      const QuantResult p = quantize_with(name, f32(padded, {B, padded_s, N, D}));
      EXPECT_EQ(r.scale.shape(), p.scale.shape());
      EXPECT_EQ(differing_bytes(r.scale, p.scale), 0);
      std::int64_t differing = 0, compared = 0;
      for (std::int64_t b = 0; b < B; ++b)
        for (std::int64_t i = 0; i < S * N * D; ++i, ++compared)
          differing += r.payload.data<std::int8_t>()[b * S * N * D + i] !=
                       p.payload.data<std::int8_t>()[b * padded_s * N * D + i];
      EXPECT_EQ(differing, 0) << differing << " differing of " << compared;
    }
  }
}

// Independent recomputation of §3 on a contiguous (B, S, N, D) fp32 tensor with token_block
// 64: block amax by its own loops, RNE by std::nearbyint in double (not the 1.5 * 2^23 trick).
std::vector<int> expected_block_payload(const std::vector<float>& v, const Shape& shape, bool reciprocal) {
  const std::int64_t B = shape[0], S = shape[1], N = shape[2], D = shape[3];
  std::vector<int> out(v.size());
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t s0 = 0; s0 < S; s0 += 64) {
        auto at = [&](std::int64_t s, std::int64_t d) {
          return static_cast<std::size_t>(((b * S + s) * N + n) * D + d);
        };
        float amax = 0.0f;
        for (std::int64_t s = s0; s < std::min(S, s0 + 64); ++s)
          for (std::int64_t d = 0; d < D; ++d) amax = std::max(amax, std::fabs(v[at(s, d)]));
        const float scale = amax / 127.0f;
        const float multiplier = 127.0f / amax;
        for (std::int64_t s = s0; s < std::min(S, s0 + 64); ++s)
          for (std::int64_t d = 0; d < D; ++d) {
            const float q = reciprocal ? v[at(s, d)] * multiplier : v[at(s, d)] / scale;
            out[at(s, d)] = static_cast<int>(std::clamp(std::nearbyint(static_cast<double>(q)), -127.0, 127.0));
          }
      }
  return out;
}

TEST(Int8Block, DivideByStoredScaleAndReciprocalMultiplyDifferAndEachIsExact) {
  constexpr unsigned kSeed = 1234567;
  std::cout << "seed " << kSeed << "\n";
  SCOPED_TRACE("seed " + std::to_string(kSeed));
  // bf16 values, as attention activations arrive: with 8-bit mantissas the true quotient
  // 127 x / amax often is an exact tie, where the two quotients' rounding errors decide.
  const Shape shape{2, 256, 4, 128};
  const Tensor x =
      from_f32_vector(randn(static_cast<std::size_t>(shape_numel(shape)), kSeed, 3.0f), shape, DType::bf16);
  const std::vector<float> v = to_f32_vector(x.view());
  const QuantResult divide = quantize_with("int8.block.ascend", x);
  const QuantResult reciprocal =
      quantize_with("int8.block.ascend", x, [](Contract& c) { c.quotient = Quotient::reciprocal; });
  EXPECT_EQ(differing_bytes(divide.scale, reciprocal.scale), 0);
  const std::int64_t differing = differing_bytes(divide.payload, reciprocal.payload);
  std::cout << "divide vs reciprocal: " << differing << " differing payload bytes of " << x.numel() << "\n";
  EXPECT_GT(differing, 0);
  EXPECT_EQ(payload_of(divide), expected_block_payload(v, shape, false));
  EXPECT_EQ(payload_of(reciprocal), expected_block_payload(v, shape, true));
}

TEST(Int8Block, ZeroBlockGivesZeroPayloadAndTheScaleRulesScale) {
  // Two heads: head 0 all zero, head 1 not.
  const Tensor x = f32({0, 1.0f, 0, -2.0f, 0, 0.5f}, {1, 3, 2, 1});
  const QuantResult ascend = quantize_with("int8.block.ascend", x);
  EXPECT_EQ(scale_bits(ascend, 0), 0u);
  EXPECT_EQ(scale_bits(ascend, 1), bits(2.0f / 127.0f));
  EXPECT_EQ(payload_of(ascend), (std::vector<int>{0, 64, 0, -127, 0, 32}));
  const QuantResult triton = quantize_with("int8.block.sage.triton", x);
  EXPECT_EQ(scale_bits(triton, 0), 0u);
  EXPECT_EQ(payload_of(triton), (std::vector<int>{0, 64, 0, -127, 0, 32}));
  // SageAttention CUDA's epsilon: scale = 1e-7 / 127, payload 0.
  const QuantResult cuda = quantize_with("int8.block.sage.cuda", x);
  EXPECT_EQ(scale_bits(cuda, 0), bits(1e-7f / 127.0f));
  EXPECT_EQ(payload_of(cuda), (std::vector<int>{0, 64, 0, -127, 0, 32}));
}

TEST(Int8Block, TinyAmaxUnderflowsTheScaleToZeroAtOrBelow63Subnormals) {
  const float t = 0x1p-149f;
  // amax 63 * 2^-149: 63/127 of the smallest subnormal rounds to 0 -> scale 0, payload 0.
  const QuantResult below = quantize_with("int8.block.ascend", f32({63 * t, -t, 5 * t, 0}, {1, 4, 1, 1}));
  EXPECT_EQ(scale_bits(below, 0), 0u);
  EXPECT_EQ(payload_of(below), (std::vector<int>{0, 0, 0, 0}));
  // amax 64 * 2^-149: 64/127 rounds up to 2^-149 -> scale 2^-149, payload = x / 2^-149.
  const QuantResult above = quantize_with("int8.block.ascend", f32({64 * t, -t, 5 * t, 0}, {1, 4, 1, 1}));
  EXPECT_EQ(scale_bits(above, 0), bits(t));
  EXPECT_EQ(payload_of(above), (std::vector<int>{64, -1, 5, 0}));
}

TEST(Int8Block, ReciprocalMultiplierThatOverflowsSaturatesAndZeroStaysZero) {
  // Without SageAttention's epsilon, fp32(127 / 1e-38) = inf: x * inf saturates, 0 * inf = NaN
  // encodes to 0 (as cvt.rni.sat.s8.f32 does), and range 128 reaches -128.
  const Tensor x = f32({1e-38f, -1e-38f, 0.0f, 1e-39f}, {1, 4, 1, 1});
  const QuantResult r = quantize_with("int8.block.sage.cuda", x, [](Contract& c) { c.scale_min = 0.0f; });
  EXPECT_EQ(scale_bits(r, 0), bits(1e-38f / 127.0f));
  EXPECT_NE(scale_bits(r, 0), 0u);
  EXPECT_EQ(payload_of(r), (std::vector<int>{127, -128, 0, 127}));
}

TEST(Int8Block, SaturatesWhenTheStoredScaleRoundsDown) {
  // s = amax / 127 = 2.5 * 2^-24 is an fp16 tie that rounds down to 2 * 2^-24: amax / stored
  // = 158.75, beyond the range. Range 128 reaches -128 only here, where the quotient allows it.
  const float amax = 317.5f * 0x1p-24f;
  const Tensor x = f32({amax, -amax, 10 * 0x1p-23f, -127.4f * 0x1p-23f}, {1, 4, 1, 1});
  const QuantResult r127 = quantize_with("int8.block.ascend", x, [](Contract& c) { c.scale_store = ScaleStore::f16; });
  ASSERT_EQ(r127.scale.dtype(), DType::f16);
  EXPECT_EQ(r127.scale.data<std::uint16_t>()[0], 0x0002);
  EXPECT_EQ(payload_of(r127), (std::vector<int>{127, -127, 10, -127}));
  const QuantResult r128 = quantize_with("int8.block.ascend", x, [](Contract& c) {
    c.scale_store = ScaleStore::f16;
    c.range = 128;
  });
  EXPECT_EQ(payload_of(r128), (std::vector<int>{127, -128, 10, -127}));
}

TEST(Int8Block, Range128GivesTheSameBytesWhereTheQuotientStaysWithin127) {
  constexpr unsigned kSeed = 99;
  std::cout << "seed " << kSeed << "\n";
  const Tensor x = f32(randn(2 * 128 * 2 * 64, kSeed), {2, 128, 2, 64});
  for (const char* name : {"int8.block.ascend", "int8.block.sage.cuda"}) {
    SCOPED_TRACE(name);
    const QuantResult r127 = quantize_with(name, x, [](Contract& c) { c.range = 127; });
    const QuantResult r128 = quantize_with(name, x, [](Contract& c) { c.range = 128; });
    EXPECT_EQ(differing_bytes(r127.payload, r128.payload), 0);
  }
}

TEST(Int8Block, NonFiniteInputIsRejectedNamingTheFirstIndex) {
  const Shape shape{2, 3, 4, 5};
  const auto flat = [](int b, int s, int n, int d) { return static_cast<std::size_t>(((b * 3 + s) * 4 + n) * 5 + d); };
  const float inf = std::numeric_limits<float>::infinity();
  struct Place {
    int b, s, n, d;
    const char* text;
  };
  for (const Place& p : {Place{0, 0, 0, 0, "(b 0, s 0, n 0, d 0)"}, Place{1, 1, 2, 3, "(b 1, s 1, n 2, d 3)"},
                         Place{1, 2, 3, 4, "(b 1, s 2, n 3, d 4)"}}) {
    for (const auto& [value, name] :
         {std::pair{std::numeric_limits<float>::quiet_NaN(), "NaN"}, std::pair{inf, "+inf"}, std::pair{-inf, "-inf"}}) {
      std::vector<float> v(static_cast<std::size_t>(shape_numel(shape)), 1.0f);
      v[flat(p.b, p.s, p.n, p.d)] = value;
      if (p.b == 0) v.back() = std::numeric_limits<float>::quiet_NaN();  // a later one is not named
      const Tensor x = f32(v, shape);
      const std::string msg = error_of([&] { quantize_with("int8.block.ascend", x); }, ErrorKind::bad_input);
      EXPECT_NE(msg.find(std::string(name) + " at " + p.text), std::string::npos) << msg;
    }
  }
}

TEST(Int8Block, NonContiguousViewsGiveTheBytesOfTheirContiguousCopies) {
  constexpr unsigned kSeed = 7;
  std::cout << "seed " << kSeed << "\n";
  const std::int64_t B = 2, S = 70, N = 3, D = 8;
  // Stored as (B, N, S, D), viewed as (B, S, N, D).
  const Tensor bnsd = f32(randn(static_cast<std::size_t>(B * N * S * D), kSeed), {B, N, S, D});
  const TensorView transposed{DType::f32, {B, S, N, D}, {N * S * D, D, S * D, 1}, bnsd.raw()};
  // Every other channel of a (B, S, N, 2D) tensor.
  const Tensor wide = f32(randn(static_cast<std::size_t>(B * S * N * 2 * D), kSeed + 1), {B, S, N, 2 * D});
  const TensorView strided{DType::f32, {B, S, N, D}, {S * N * 2 * D, N * 2 * D, 2 * D, 2}, wide.raw()};
  for (const char* name : {"int8.block.ascend", "int8.block.sage.cuda", "int8.block.sage.triton"}) {
    SCOPED_TRACE(name);
    const Contract c = make_preset(name);
    for (const TensorView& view : {transposed, strided}) {
      ASSERT_FALSE(view.is_contiguous());
      const QuantResult a = quantize(c, view);
      const QuantResult b = quantize(c, contiguous_copy(view).view());
      EXPECT_EQ(differing_bytes(a.payload, b.payload), 0);
      EXPECT_EQ(differing_bytes(a.scale, b.scale), 0);
    }
  }
}

TEST(Int8Block, Bf16AndF16InputsQuantizeTheirOwnValues) {
  constexpr unsigned kSeed = 42;
  std::cout << "seed " << kSeed << "\n";
  const Shape shape{1, 96, 2, 16};
  const std::vector<float> v = randn(static_cast<std::size_t>(shape_numel(shape)), kSeed);
  for (DType dt : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor narrow = from_f32_vector(v, shape, dt);
    const Tensor widened = f32(to_f32_vector(narrow.view()), shape);
    for (const char* name : {"int8.block.ascend", "int8.block.sage.cuda", "int8.block.sage.triton"}) {
      const QuantResult a = quantize_with(name, narrow);
      const QuantResult b = quantize_with(name, widened);
      EXPECT_EQ(differing_bytes(a.payload, b.payload), 0) << name;
      EXPECT_EQ(differing_bytes(a.scale, b.scale), 0) << name;
    }
  }
}

TEST(Int8Block, RejectsShapesOtherThanBSND) {
  const Tensor x = f32({1, 2, 3, 4}, {2, 2, 1});
  const std::string msg = error_of([&] { quantize_with("int8.block.ascend", x); }, ErrorKind::bad_argument);
  EXPECT_NE(msg.find("(B, S, N, D)"), std::string::npos) << msg;
}

TEST(Int8Block, DequantizeMultipliesEachCodeByItsBlocksStoredScale) {
  const Shape shape{1, 66, 2, 3};
  const std::vector<float> v = randn(static_cast<std::size_t>(shape_numel(shape)), 5);
  for (ScaleStore store : {ScaleStore::f32, ScaleStore::f16}) {
    SCOPED_TRACE(static_cast<int>(store));
    const Contract c = preset("int8.block.ascend", [&](Contract& k) { k.scale_store = store; });
    const QuantResult r = quantize(c, f32(v, shape).view());
    const Tensor x = dequantize(c, r.payload.view(), r.scale.view(), shape);
    ASSERT_EQ(x.shape(), shape);
    ASSERT_EQ(x.dtype(), DType::f32);
    const std::vector<float> scales = to_f32_vector(r.scale.view());
    std::int64_t wrong = 0;
    for (std::int64_t s = 0; s < 66; ++s)
      for (std::int64_t n = 0; n < 2; ++n)
        for (std::int64_t d = 0; d < 3; ++d) {
          const std::int64_t i = (s * 2 + n) * 3 + d;
          const float want =
              static_cast<float>(r.payload.data<std::int8_t>()[i]) * scales[static_cast<std::size_t>(n * 2 + s / 64)];
          wrong += bits(x.data<float>()[i]) != bits(want);
        }
    EXPECT_EQ(wrong, 0);
  }
  const Contract c = make_preset("int8.block.ascend");
  const QuantResult r = quantize(c, f32(v, shape).view());
  error_of([&] { dequantize(c, r.payload.view(), r.scale.view(), Shape{1, 65, 2, 3}); }, ErrorKind::bad_argument);
}

}  // namespace
