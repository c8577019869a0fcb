// The int8 element codec (formats/int8.hpp): rounding rules at and around ties, Triton's fp32
// artefact, saturation to both ranges, NaN and infinities, and a sweep over fp32 bit patterns
// against an independent exact rounding computed in double.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "qexact/formats/int8.hpp"

namespace {

using qexact::int8_encode;
using qexact::int8_round;
using qexact::IntRounding;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kJustBelowHalf = 0x1.fffffep-2f;  // 0.5 - 2^-25 (0.49999997f)

// Exact rounding of a float held in a double (every float is one): floor and the remainder
// are exact in double, so ties are decided on the true value.
double exact_round(double v, IntRounding r) {
  const double a = std::fabs(v);
  const double f = std::floor(a);
  const double rem = a - f;
  double out = f;
  if (r == IntRounding::trunc)
    out = f;
  else if (rem > 0.5)
    out = f + 1;
  else if (rem == 0.5)
    out = (r == IntRounding::rne) ? (std::fmod(f, 2.0) == 0.0 ? f : f + 1) : f + 1;
  return std::copysign(out, v);
}

int exact_encode(float v, IntRounding r, int range) {
  if (std::isnan(v)) return 0;
  const double q = std::isinf(v) ? static_cast<double>(v) : exact_round(v, r);
  const double lo = range == 128 ? -128.0 : -127.0;
  return static_cast<int>(q < lo ? lo : (q > 127.0 ? 127.0 : q));
}

struct Case {
  float v;
  int want;
};

void expect_encodes(IntRounding r, int range, std::initializer_list<Case> cases) {
  for (const Case& c : cases)
    EXPECT_EQ(int8_encode(c.v, r, range), c.want) << "v = " << c.v << " (" << std::hexfloat << c.v << ")";
}

TEST(Int8Codec, RneTiesGoToEven) {
  expect_encodes(IntRounding::rne, 127,
                 {{0.5f, 0},
                  {1.5f, 2},
                  {2.5f, 2},
                  {3.5f, 4},
                  {-0.5f, 0},
                  {-1.5f, -2},
                  {-2.5f, -2},
                  {126.5f, 126},
                  {0x1.000002p-1f, 1},
                  {kJustBelowHalf, 0},
                  {63.49999618f, 63},
                  {-0.0f, 0},
                  {0.0f, 0}});
}

TEST(Int8Codec, HalfAwayRoundsTiesAwayFromZeroExactly) {
  expect_encodes(IntRounding::half_away, 127,
                 {{0.5f, 1},
                  {1.5f, 2},
                  {2.5f, 3},
                  {-0.5f, -1},
                  {-2.5f, -3},
                  {126.5f, 127},
                  {kJustBelowHalf, 0},
                  {-kJustBelowHalf, 0},
                  {1.4999999f, 1}});
}

TEST(Int8Codec, HalfAwayFp32HasTritonsArtefactJustBelowOneHalf) {
  // 0.49999997f + 0.5f = 1 - 2^-25, a tie in fp32 between 1 - 2^-24 and 1: it rounds to 1.
  expect_encodes(IntRounding::half_away_fp32, 128,
                 {{kJustBelowHalf, 1},
                  {-kJustBelowHalf, -1},
                  {0x1.fffffcp-2f, 0},
                  {0.5f, 1},
                  {2.5f, 3},
                  {-2.5f, -3},
                  {1.4999999f, 1},
                  {-0.0f, 0}});
}

TEST(Int8Codec, HalfAwayFp32DiffersFromHalfAwayOnlyJustBelowOneHalf) {
  // Every float in [0.25, 0.75) (where fp32(v + 0.5) can cross an integer), both signs.
  std::int64_t differing = 0, checked = 0;
  for (std::uint32_t u = std::bit_cast<std::uint32_t>(0.25f); u < std::bit_cast<std::uint32_t>(0.75f); ++u) {
    for (float v : {std::bit_cast<float>(u), -std::bit_cast<float>(u)}) {
      ++checked;
      if (int8_round(v, IntRounding::half_away_fp32) != int8_round(v, IntRounding::half_away)) {
        ++differing;
        EXPECT_EQ(std::fabs(v), kJustBelowHalf) << std::hexfloat << v;
      }
    }
  }
  std::cout << "half_away_fp32 vs half_away: " << differing << " differing of " << checked << "\n";
  EXPECT_EQ(differing, 2);
}

TEST(Int8Codec, TruncRoundsTowardZero) {
  expect_encodes(IntRounding::trunc, 127,
                 {{0.5f, 0}, {0.999999f, 0}, {1.5f, 1}, {2.5f, 2}, {126.99f, 126}, {-0.5f, 0}, {-1.5f, -1},
                  {-126.99f, -126}, {kJustBelowHalf, 0}, {-127.9f, -127}, {200.0f, 127}});
  expect_encodes(IntRounding::trunc, 128, {{-127.9f, -127}, {-128.5f, -128}, {-1e30f, -128}});
}

TEST(Int8Codec, SaturatesToTheRangeInsteadOfWrapping) {
  for (IntRounding r : {IntRounding::rne, IntRounding::half_away, IntRounding::half_away_fp32}) {
    SCOPED_TRACE(static_cast<int>(r));
    expect_encodes(r, 127,
                   {{127.4f, 127},
                    {128.0f, 127},
                    {200.0f, 127},
                    {1e30f, 127},
                    {kInf, 127},
                    {-127.4f, -127},
                    {-127.6f, -127},
                    {-128.0f, -127},
                    {-200.0f, -127},
                    {-1e30f, -127},
                    {-kInf, -127},
                    {5e6f, 127},
                    {-5e6f, -127},
                    {kNaN, 0},
                    {-kNaN, 0}});
    expect_encodes(r, 128,
                   {{128.0f, 127},
                    {200.0f, 127},
                    {kInf, 127},
                    {-127.6f, -128},
                    {-128.0f, -128},
                    {-128.4f, -128},
                    {-129.0f, -128},
                    {-1e30f, -128},
                    {-kInf, -128},
                    {kNaN, 0}});
  }
  // A tie at -127.5: RNE goes to -128 (clamped to -127 in range 127), half-away too.
  EXPECT_EQ(int8_encode(-127.5f, IntRounding::rne, 128), -128);
  EXPECT_EQ(int8_encode(-127.5f, IntRounding::rne, 127), -127);
  EXPECT_EQ(int8_encode(-126.5f, IntRounding::rne, 128), -126);
}

TEST(Int8Codec, MatchesExactRoundingOverSampledBitPatterns) {
  // Every 1021st fp32 bit pattern (about 4.2 million, all magnitudes, infinities and NaNs).
  // None of them is +/-(0.5 - 2^-25), where half_away_fp32 differs from half_away.
  constexpr std::uint64_t kStride = 1021;
  std::int64_t checked = 0, wrong = 0;
  for (std::uint64_t u = 0; u <= 0xFFFFFFFFull; u += kStride) {
    const float v = std::bit_cast<float>(static_cast<std::uint32_t>(u));
    for (int range : {127, 128}) {
      checked += 4;
      if (int8_encode(v, IntRounding::trunc, range) != exact_encode(v, IntRounding::trunc, range)) ++wrong;
      if (int8_encode(v, IntRounding::rne, range) != exact_encode(v, IntRounding::rne, range)) ++wrong;
      if (int8_encode(v, IntRounding::half_away, range) != exact_encode(v, IntRounding::half_away, range)) ++wrong;
      // half_away_fp32 is exact half-away except at +/-(0.5 - 2^-25), checked above.
      if (int8_encode(v, IntRounding::half_away_fp32, range) != exact_encode(v, IntRounding::half_away, range)) ++wrong;
    }
  }
  std::cout << "int8_encode vs exact rounding: " << wrong << " wrong of " << checked << "\n";
  EXPECT_EQ(wrong, 0);
}

TEST(Int8Codec, RneRoundIsExactBelowTwoToThe22) {
  std::int64_t wrong = 0;
  for (std::uint32_t u = 0; u < std::bit_cast<std::uint32_t>(0x1p22f); u += 257) {
    const float v = std::bit_cast<float>(u);
    if (int8_round(v, IntRounding::rne) != static_cast<float>(exact_round(v, IntRounding::rne))) ++wrong;
    if (int8_round(-v, IntRounding::rne) != static_cast<float>(exact_round(-v, IntRounding::rne))) ++wrong;
  }
  EXPECT_EQ(wrong, 0);
}

TEST(Int8Codec, DecodeIsOneFp32Multiply) {
  EXPECT_EQ(qexact::int8_decode(-128, 0.5f), -64.0f);
  EXPECT_EQ(qexact::int8_decode(127, 0x1p-149f), 127 * 0x1p-149f);
  EXPECT_EQ(qexact::int8_decode(3, 0x1.020408p-7f), 3.0f * 0x1.020408p-7f);
  EXPECT_EQ(qexact::int8_decode(0, 1e30f), 0.0f);
}

}  // namespace
