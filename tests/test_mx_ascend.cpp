// mxfp8.ascend (contracts §1): every check value the spec writes down, as exact bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "mx_test_util.hpp"
#include "qexact/formats/bf16.hpp"

namespace qexact {
namespace {

using test::group_of;
using test::quantize_f32;

const Contract& ascend() {
  static const Contract c = make_contract("mxfp8.ascend");
  return c;
}

std::uint8_t scale_of_group(const Contract& c, const std::vector<float>& g) {
  return quantize_f32(c, g).scale.data<std::uint8_t>()[0];
}

TEST(MxAscend, AmaxToScaleByteTable) {
  // amax = 448 * 2^k -> byte 127 + k (the seed prints 121 for 3.5: its own formula gives 120).
  const std::pair<float, int> table[] = {{0.4375f, 117}, {3.5f, 120},   {224.0f, 126},  {448.0f, 127},
                                         {896.0f, 128},  {7168.0f, 131}, {458752.0f, 137}};
  for (auto [amax, byte] : table)
    EXPECT_EQ(scale_of_group(ascend(), group_of(32, 0.0f, {{5, amax}})), byte) << "amax " << amax;
}

TEST(MxAscend, CeilLog2FormulaDisagreesAt450_1000_230) {
  // ceil(log2(amax / 448)) + 127 is a different contract: it gives 128, 129, 127 here.
  const std::pair<float, int> cases[] = {{450.0f, 127}, {1000.0f, 128}, {230.0f, 126}};
  for (auto [amax, byte] : cases) {
    const int ceil_rule = 127 + static_cast<int>(std::ceil(std::log2(static_cast<double>(amax) / 448.0)));
    const int got = scale_of_group(ascend(), group_of(32, 0.0f, {{0, amax}}));
    EXPECT_EQ(got, byte) << amax;
    EXPECT_NE(got, ceil_rule) << amax;
  }
}

TEST(MxAscend, PayloadCheckValuesAtScaleOne) {
  // amax 440 -> byte 127 (scale 1).
  const std::pair<float, std::uint8_t> cases[] = {
      {1.0625f, 0x38}, {1.1875f, 0x3A}, {1.25f, 0x3A}, {200.0f, 0x74}, {440.0f, 0x7E}, {-440.0f, 0xFE}};
  for (auto [x, code] : cases) {
    auto g = group_of(32, 0.0f, {{0, 440.0f}, {1, x}});
    const QuantResult r = quantize_f32(ascend(), g);
    EXPECT_EQ(r.scale.data<std::uint8_t>()[0], 127);
    EXPECT_EQ(r.payload.data<std::uint8_t>()[1], code) << x;
  }
}

TEST(MxAscend, E4M3SaturatingCheckValuesAtScaleOne) {
  // Values a scale-1 group cannot hold still encode to 448: e4m3_rne_saturate never gives NaN.
  const float bf16max = bf16_to_f32(0x7F7F);
  for (float x : {512.0f, 1000.0f, 1e30f, bf16max}) {
    EXPECT_EQ(elem_encode(ElemFormat::e4m3, x, Rounding::rne, Overflow::saturate), 0x7E) << x;
    EXPECT_EQ(elem_encode(ElemFormat::e4m3, -x, Rounding::rne, Overflow::saturate), 0xFE) << x;
  }
}

TEST(MxAscend, SaturatesInsideTheBinade) {
  // amax in (448, 512) keeps byte 127: values up to 511 saturate to 448 (0x7E), never NaN.
  for (float x : {450.0f, 464.0f, 480.0f, 500.0f, 510.0f}) {  // all bf16 values
    const QuantResult r = quantize_f32(ascend(), group_of(32, 1.0f, {{7, x}, {8, -x}}));
    EXPECT_EQ(r.scale.data<std::uint8_t>()[0], 127) << x;
    EXPECT_EQ(r.payload.data<std::uint8_t>()[7], 0x7E) << x;
    EXPECT_EQ(r.payload.data<std::uint8_t>()[8], 0xFE) << x;
  }
}

TEST(MxAscend, LargeValuesSaturateAfterBf16Rounding) {
  const float bf16max = bf16_to_f32(0x7F7F);
  for (float x : {1000.0f, 1e30f, bf16max}) {
    // The group max is x itself: scale follows it, and x / scale lands in [256, 512).
    const QuantResult r = quantize_f32(ascend(), group_of(32, 0.0f, {{3, x}}));
    const std::uint8_t code = r.payload.data<std::uint8_t>()[3];
    EXPECT_TRUE(code == 0x7E || (code & 0x78) == 0x78) << x;  // 256..448 top binade
  }
}

TEST(MxAscend, DegenerateGroupsFlush) {
  for (float tiny : {0.0f, 1e-38f, std::ldexp(1.0f, -119)}) {
    const QuantResult r = quantize_f32(ascend(), group_of(32, tiny, {{0, -tiny}}));
    EXPECT_EQ(r.scale.data<std::uint8_t>()[0], 0) << tiny;
    for (int i = 0; i < 32; ++i) EXPECT_EQ(r.payload.data<std::uint8_t>()[i], 0x00) << tiny;
  }
  // 2^-110: byte 127 - 110 - 8 = 9, not flushed.
  const QuantResult r = quantize_f32(ascend(), group_of(32, std::ldexp(1.0f, -110)));
  EXPECT_EQ(r.scale.data<std::uint8_t>()[0], 9);
  EXPECT_EQ(r.payload.data<std::uint8_t>()[0], 0x78);  // 256 = 1.0 * 2^8
}

TEST(MxAscend, NonFiniteGroupGivesByte255AndZeroPayload) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (float bad : {inf, -inf, nan}) {
    for (int pos : {0, 15, 31}) {
      std::vector<float> v = group_of(64, 3.0f, {{pos, bad}});  // group 0 poisoned, group 1 clean
      const QuantResult r = quantize_f32(ascend(), v, {1, 64});
      EXPECT_EQ(r.scale.data<std::uint8_t>()[0], 255);
      for (int i = 0; i < 32; ++i) EXPECT_EQ(r.payload.data<std::uint8_t>()[i], 0x00);
      EXPECT_EQ(r.scale.data<std::uint8_t>()[1], 127 + 1 - 8);  // amax 3: floor(log2 3) = 1
      for (int i = 32; i < 64; ++i) EXPECT_EQ(r.payload.data<std::uint8_t>()[i], 0x7C) << i;  // 3 * 2^7 = 384 = 1.5 * 2^8
    }
  }
}

TEST(MxAscend, SignedZeroInNormalGroup) {
  const QuantResult r = quantize_f32(ascend(), group_of(32, 0.0f, {{0, 440.0f}, {1, -0.0f}, {2, -1e-6f}}));
  EXPECT_EQ(r.payload.data<std::uint8_t>()[1], 0x80);
  EXPECT_EQ(r.payload.data<std::uint8_t>()[2], 0x80);
  EXPECT_EQ(r.payload.data<std::uint8_t>()[3], 0x00);
  Contract unsigned_zero = make_contract("mxfp8.ascend", {"signed_zero=false"});
  const QuantResult u = quantize_f32(unsigned_zero, group_of(32, 0.0f, {{0, 440.0f}, {1, -0.0f}, {2, -1e-6f}}));
  EXPECT_EQ(u.payload.data<std::uint8_t>()[1], 0x00);
  EXPECT_EQ(u.payload.data<std::uint8_t>()[2], 0x00);
}

TEST(MxAscend, Fp32InputIsRoundedToBf16First) {
  // 1.00390625 = 1 + 2^-8 is a bf16 tie that rounds to 1.0 (even); amax 440 -> scale 1.
  // Without the pre-rounding the amax would be taken on fp32 values.
  const float above = std::nextafter(256.0f * 1.00390625f, 1e9f);  // rounds up to the next bf16
  const QuantResult r = quantize_f32(ascend(), group_of(32, 0.0f, {{0, 511.9f}, {1, above}}));
  // 511.9 -> bf16 512 -> byte 128 (scale 2): with prequant the group's amax is 512.
  EXPECT_EQ(r.scale.data<std::uint8_t>()[0], 128);
  Contract no_pre = make_contract("mxfp8.ascend", {"prequant_round=none"});
  EXPECT_EQ(quantize_f32(no_pre, group_of(32, 0.0f, {{0, 511.9f}})).scale.data<std::uint8_t>()[0], 127);
}

TEST(MxAscend, ScaleLayoutByMarkers) {
  // A distinct power-of-two amax per group: each group's byte is unique and must sit at
  // t * 2 * ceil(G/2) + g. G = 5 (odd): the padding byte of each row is 0.
  const int rows = 3, groups = 5, k = groups * 32 - 7;  // last group partial
  std::vector<float> v(static_cast<std::size_t>(rows * k), 0.0f);
  for (int t = 0; t < rows; ++t)
    for (int g = 0; g < groups; ++g) v[static_cast<std::size_t>(t * k + g * 32 + (g % 3))] = std::ldexp(1.0f, t * groups + g);
  const QuantResult r = quantize_f32(ascend(), v, {rows, k});
  ASSERT_EQ(r.scale.shape(), (Shape{rows, 3, 2}));
  const std::uint8_t* s = r.scale.data<std::uint8_t>();
  for (int t = 0; t < rows; ++t) {
    for (int g = 0; g < groups; ++g) EXPECT_EQ(s[t * 6 + g], 127 + t * groups + g - 8);
    EXPECT_EQ(s[t * 6 + 5], 0);
  }
}

}  // namespace
}  // namespace qexact
