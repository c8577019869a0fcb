// Element and scale codecs, checked exhaustively against independent brute-force definitions.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include "qexact/error.hpp"
#include "qexact/formats/bf16.hpp"
#include "qexact/formats/e8m0.hpp"
#include "qexact/formats/element.hpp"
#include "qexact/formats/fp16.hpp"

namespace qexact {
namespace {

constexpr ElemFormat kFormats[] = {ElemFormat::e4m3, ElemFormat::e5m2, ElemFormat::e2m3, ElemFormat::e3m2,
                                   ElemFormat::e2m1};

// Brute force: scan every finite code, nearest by |v - value| in double (exact for these
// values), ties to the even code or away from zero.
std::uint8_t brute_encode(ElemFormat f, float v, bool ties_even) {
  const ElemTraits& t = elem_traits(f);
  const double a = std::fabs(static_cast<double>(v));
  int best = 0;
  double best_d = std::numeric_limits<double>::infinity();
  for (int c = 0; c <= t.max_code; ++c) {
    const double d = std::fabs(a - static_cast<double>(elem_decode(f, static_cast<std::uint8_t>(c))));
    if (d < best_d || (d == best_d && (ties_even ? c % 2 == 0 : c > best))) {
      best = c;
      best_d = d;
    }
  }
  return static_cast<std::uint8_t>((std::signbit(v) ? 1 << (t.bits - 1) : 0) | best);
}

TEST(ElementCodec, KnownMaxima) {
  EXPECT_EQ(elem_decode(ElemFormat::e4m3, 0x7E), 448.0f);
  EXPECT_EQ(elem_decode(ElemFormat::e5m2, 0x7B), 57344.0f);
  EXPECT_EQ(elem_decode(ElemFormat::e2m3, 0x1F), 7.5f);
  EXPECT_EQ(elem_decode(ElemFormat::e3m2, 0x1F), 28.0f);
  EXPECT_EQ(elem_decode(ElemFormat::e2m1, 0x7), 6.0f);
  const float fp4[] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (int c = 0; c < 8; ++c) EXPECT_EQ(elem_decode(ElemFormat::e2m1, static_cast<std::uint8_t>(c)), fp4[c]);
  EXPECT_TRUE(std::isnan(elem_decode(ElemFormat::e4m3, 0x7F)));
  EXPECT_TRUE(std::isnan(elem_decode(ElemFormat::e4m3, 0xFF)));
  EXPECT_TRUE(std::isinf(elem_decode(ElemFormat::e5m2, 0x7C)));
  EXPECT_EQ(elem_decode(ElemFormat::e4m3, 0x01), std::ldexp(1.0f, -9));  // smallest subnormal
}

TEST(ElementCodec, EveryCodeRoundTrips) {
  for (ElemFormat f : kFormats) {
    const ElemTraits& t = elem_traits(f);
    for (int c = 0; c < (1 << t.bits); ++c) {
      const float v = elem_decode(f, static_cast<std::uint8_t>(c));
      if (!std::isfinite(v)) continue;
      for (Rounding r : {Rounding::rne, Rounding::half_away, Rounding::half_away_fp32, Rounding::even_fp32, Rounding::trunc})
        EXPECT_EQ(elem_encode(f, v, r, Overflow::saturate), c) << t.name << " code " << c;
    }
  }
}

TEST(ElementCodec, MidpointsAndNeighboursMatchBruteForce) {
  for (ElemFormat f : kFormats) {
    const ElemTraits& t = elem_traits(f);
    for (int c = 0; c < t.max_code; ++c) {
      const float lo = elem_decode(f, static_cast<std::uint8_t>(c));
      const float hi = elem_decode(f, static_cast<std::uint8_t>(c + 1));
      const float mid = (lo + hi) / 2;  // exact: a few significant bits
      for (float v : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f), -mid, -std::nextafter(mid, 1e9f)}) {
        EXPECT_EQ(elem_encode(f, v, Rounding::rne, Overflow::saturate), brute_encode(f, v, true)) << t.name << " " << v;
        EXPECT_EQ(elem_encode(f, v, Rounding::half_away, Overflow::saturate), brute_encode(f, v, false))
            << t.name << " " << v;
      }
    }
  }
}

// Brute force for rounding toward zero: the largest code whose value is <= |v|.
std::uint8_t brute_trunc(ElemFormat f, float v) {
  const ElemTraits& t = elem_traits(f);
  const double a = std::fabs(static_cast<double>(v));
  int best = 0;
  for (int c = 0; c <= t.max_code; ++c)
    if (static_cast<double>(elem_decode(f, static_cast<std::uint8_t>(c))) <= a) best = c;
  return static_cast<std::uint8_t>((std::signbit(v) ? 1 << (t.bits - 1) : 0) | best);
}

TEST(ElementCodec, TruncMatchesBruteForceOnEveryBf16Input) {
  for (ElemFormat f : kFormats) {
    const ElemTraits& t = elem_traits(f);
    std::int64_t differing = 0, total = 0;
    for (std::uint32_t b = 0; b < 65536; ++b) {
      const float v = bf16_to_f32(static_cast<std::uint16_t>(b));
      if (!std::isfinite(v)) continue;
      ++total;
      differing += elem_encode(f, v, Rounding::trunc, Overflow::saturate) != brute_trunc(f, v);
    }
    EXPECT_EQ(differing, 0) << t.name << ": " << differing << " differing of " << total;
  }
}

TEST(ElementCodec, TruncHandCheckedValues) {
  // E4M3 around 1: grid 1, 1.125, 1.25; truncation never goes up, not even a hair below a code.
  EXPECT_EQ(elem_encode(ElemFormat::e4m3, 1.0625f, Rounding::trunc, Overflow::saturate), 0x38);  // 1.0
  EXPECT_EQ(elem_encode(ElemFormat::e4m3, 1.2499999f, Rounding::trunc, Overflow::saturate), 0x39);  // 1.125
  EXPECT_EQ(elem_encode(ElemFormat::e4m3, -1.2499999f, Rounding::trunc, Overflow::saturate), 0xB9);
  EXPECT_EQ(elem_encode(ElemFormat::e4m3, 0x1.fp-10f, Rounding::trunc, Overflow::saturate), 0x00);  // < 2^-9: signed 0
  EXPECT_EQ(elem_encode(ElemFormat::e4m3, -0x1.fp-10f, Rounding::trunc, Overflow::saturate), 0x80);
  // Overflow: 479 truncates to 448 on the grid; 480 is past max (the next step) and overflows.
  EXPECT_EQ(elem_encode(ElemFormat::e4m3, 479.0f, Rounding::trunc, Overflow::nan), 0x7E);
  EXPECT_EQ(elem_encode(ElemFormat::e4m3, 480.0f, Rounding::trunc, Overflow::nan), 0x7F);
  EXPECT_EQ(elem_encode(ElemFormat::e4m3, 480.0f, Rounding::trunc, Overflow::saturate), 0x7E);
  EXPECT_EQ(elem_encode(ElemFormat::e2m1, 5.9f, Rounding::trunc, Overflow::saturate), 0x6);  // 4
  EXPECT_EQ(elem_encode(ElemFormat::e2m1, -0.49f, Rounding::trunc, Overflow::saturate), 0x8);
  EXPECT_EQ(parse_rounding("trunc"), Rounding::trunc);
}

TEST(ElementCodec, AllBf16InputsMatchBruteForce) {
  // Every finite bf16 value, at scale 1, through each format (the saturating RNE contract).
  for (ElemFormat f : kFormats) {
    const ElemTraits& t = elem_traits(f);
    std::int64_t differing = 0, total = 0;
    for (std::uint32_t b = 0; b < 65536; ++b) {
      const float v = bf16_to_f32(static_cast<std::uint16_t>(b));
      if (!std::isfinite(v)) continue;
      ++total;
      const std::uint8_t want = std::fabs(v) >= t.max ? static_cast<std::uint8_t>((std::signbit(v) ? 1 << (t.bits - 1) : 0) | t.max_code)
                                                     : brute_encode(f, v, true);
      differing += elem_encode(f, v, Rounding::rne, Overflow::saturate) != want;
    }
    EXPECT_EQ(differing, 0) << t.name << ": " << differing << " differing of " << total;
  }
}

TEST(ElementCodec, OverflowRules) {
  // ml_dtypes float8_e4m3fn (non-saturating RNE): 464 -> 448, 465 -> NaN.
  EXPECT_EQ(elem_encode(ElemFormat::e4m3, 464.0f, Rounding::rne, Overflow::nan), 0x7E);
  EXPECT_EQ(elem_encode(ElemFormat::e4m3, 465.0f, Rounding::rne, Overflow::nan), 0x7F);
  EXPECT_EQ(elem_encode(ElemFormat::e4m3, -465.0f, Rounding::rne, Overflow::nan), 0xFF);
  EXPECT_EQ(elem_encode(ElemFormat::e4m3, 465.0f, Rounding::rne, Overflow::saturate), 0x7E);
  EXPECT_EQ(elem_encode(ElemFormat::e4m3, std::numeric_limits<float>::infinity(), Rounding::rne, Overflow::saturate),
            0x7E);
  // E5M2: the tie at 61440 goes to the even neighbour, which is inf.
  EXPECT_EQ(elem_encode(ElemFormat::e5m2, 61440.0f, Rounding::rne, Overflow::inf), 0x7C);
  EXPECT_EQ(elem_encode(ElemFormat::e5m2, 61439.0f, Rounding::rne, Overflow::inf), 0x7B);
  EXPECT_EQ(elem_encode(ElemFormat::e5m2, -1e6f, Rounding::rne, Overflow::inf), 0xFC);
  // FP4 saturates at 6 (float4_e2m1fn).
  EXPECT_EQ(elem_encode(ElemFormat::e2m1, 100.0f, Rounding::rne, Overflow::saturate), 0x7);
  EXPECT_EQ(elem_encode(ElemFormat::e2m1, -5.0f, Rounding::rne, Overflow::saturate), 0xE);  // tie 4|6 -> 4
  EXPECT_THROW(elem_encode(ElemFormat::e2m1, 1.0f, Rounding::rne, Overflow::nan), Error);
  EXPECT_THROW(elem_encode(ElemFormat::e4m3, 1.0f, Rounding::rne, Overflow::inf), Error);
}

TEST(ElementCodec, Fp32HalfAwayArtefact) {
  // microxcaling: floor(fp32(u + 0.5)) with u = 0.5 - 2^-25 rounds up; the exact rule does not.
  // In E4M3 units of the smallest subnormal 2^-9: v = (0.5 - 2^-25) * 2^-9.
  const float v = std::ldexp(0.5f - std::ldexp(1.0f, -25), -9);
  EXPECT_EQ(elem_encode(ElemFormat::e4m3, v, Rounding::half_away, Overflow::saturate), 0x00);
  EXPECT_EQ(elem_encode(ElemFormat::e4m3, v, Rounding::rne, Overflow::saturate), 0x00);
  EXPECT_EQ(elem_encode(ElemFormat::e4m3, v, Rounding::half_away_fp32, Overflow::saturate), 0x01);
  EXPECT_EQ(elem_encode(ElemFormat::e4m3, v, Rounding::even_fp32, Overflow::saturate), 0x01);
  // An exact tie: half_away goes up, the even variants stay on the even code.
  const float tie = std::ldexp(1.0f, -10);  // half the smallest subnormal
  EXPECT_EQ(elem_encode(ElemFormat::e4m3, tie, Rounding::half_away_fp32, Overflow::saturate), 0x01);
  EXPECT_EQ(elem_encode(ElemFormat::e4m3, tie, Rounding::even_fp32, Overflow::saturate), 0x00);
  EXPECT_EQ(elem_encode(ElemFormat::e4m3, -tie, Rounding::rne, Overflow::saturate), 0x80);
}

TEST(Bf16, EveryBf16RoundTripsAndRoundingIsNearestEven) {
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const float v = bf16_to_f32(static_cast<std::uint16_t>(b));
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(round_bf16(v)));
      continue;
    }
    EXPECT_EQ(f32_to_bf16(v), b);
  }
  std::mt19937 rng(7);
  std::cout << "seed 7\n";
  for (int i = 0; i < 200000; ++i) {
    const float x = std::bit_cast<float>(static_cast<std::uint32_t>(rng()));
    if (!std::isfinite(x)) continue;
    // Independent: pick the nearer of the two bf16 neighbours in double, ties to even.
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
    const std::uint32_t lo_b = bits & 0xFFFF0000u;
    const double lo = std::bit_cast<float>(lo_b);
    const double hi = (lo_b & 0x7FFFFFFFu) == 0x7F7F0000u ? std::copysign(std::ldexp(1.0, 128), x)
                                                          : static_cast<double>(std::bit_cast<float>(lo_b + 0x10000u));
    const double dl = std::fabs(x - lo), dh = std::fabs(hi - x);
    const bool up = dh < dl || (dh == dl && ((lo_b >> 16) & 1u));
    const float want = up ? (std::isinf(static_cast<float>(hi)) ? std::copysign(INFINITY, x) : static_cast<float>(hi))
                          : static_cast<float>(lo);
    ASSERT_EQ(std::bit_cast<std::uint32_t>(round_bf16(x)), std::bit_cast<std::uint32_t>(want)) << x;
  }
  EXPECT_TRUE(std::isnan(round_bf16(std::bit_cast<float>(0x7F800001u))));  // sNaN stays NaN, not inf
}

TEST(Fp16, MatchesTheCompilersConversionOnAStrideOfAllFloats) {
  std::int64_t differing = 0, total = 0;
  for (std::uint64_t b = 0; b < (1ull << 32); b += 4099) {
    const float x = std::bit_cast<float>(static_cast<std::uint32_t>(b));
    const _Float16 h = static_cast<_Float16>(x);
    const std::uint16_t want = std::bit_cast<std::uint16_t>(h);
    const std::uint16_t got = f32_to_f16(x);
    ++total;
    if (std::isnan(x)) differing += (got & 0x7C00u) != 0x7C00u || (got & 0x3FFu) == 0;
    else differing += got != want;
  }
  EXPECT_EQ(differing, 0) << differing << " differing of " << total;
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const float v = f16_to_f32(static_cast<std::uint16_t>(h));
    const float want = static_cast<float>(std::bit_cast<_Float16>(static_cast<std::uint16_t>(h)));
    if (std::isnan(want)) EXPECT_TRUE(std::isnan(v));
    else EXPECT_EQ(std::bit_cast<std::uint32_t>(v), std::bit_cast<std::uint32_t>(want)) << h;
  }
}

TEST(E8M0, DecodeAndRules) {
  EXPECT_EQ(e8m0_decode(127), 1.0f);
  EXPECT_EQ(e8m0_decode(0), std::ldexp(1.0f, -127));
  EXPECT_TRUE(std::isnan(e8m0_decode(255)));
  // floor: exponent of amax minus emax.
  EXPECT_EQ(e8m0_floor(448.0f, 8), 127);
  EXPECT_EQ(e8m0_floor(480.0f, 8), 127);
  EXPECT_EQ(e8m0_floor(0.0f, 8), 0);
  EXPECT_EQ(e8m0_floor(std::numeric_limits<float>::denorm_min(), 8), 0);
  EXPECT_EQ(e8m0_floor(std::numeric_limits<float>::max(), 8), 254 - 8);
  // rceil: 480/448 rounds up to 2 -> byte 128; 448/448 = 1 -> 127.
  EXPECT_EQ(e8m0_rceil(480.0f, 448.0f, true), 128);
  EXPECT_EQ(e8m0_rceil(448.0f, 448.0f, false), 127);
  EXPECT_EQ(e8m0_rceil(0.0f, 448.0f, true), 0);
  // ceil: 2^k stays, anything above moves up.
  EXPECT_EQ(e8m0_ceil(256.0f, 8), 127);
  EXPECT_EQ(e8m0_ceil(std::nextafter(256.0f, 1e9f), 8), 128);
  // even (E4M3, 3 mantissa bits): up from 1.9375 * 2^k.
  EXPECT_EQ(e8m0_even(256.0f * 1.9375f, 8, 3), 128);
  EXPECT_EQ(e8m0_even(std::nextafter(256.0f * 1.9375f, 0.0f), 8, 3), 127);
}

TEST(E8M0, FloorWithFp32Log2) {
  // The largest float below 256 has log2 = 8 - 8.6e-8, which rounds to 8.0 in fp32.
  const float below256 = std::nextafter(256.0f, 0.0f);
  EXPECT_EQ(e8m0_floor(below256, 8), 126);
  EXPECT_EQ(e8m0_floor_log2_fp32(below256, 8), 127);
  // Near 2 (k = 1) fp32 resolves log2 exactly enough: no change.
  EXPECT_EQ(e8m0_floor_log2_fp32(std::nextafter(2.0f, 0.0f), 0), 127);
  // bf16-valued amax is never affected.
  for (std::uint32_t b = 0x0080; b < 0x7F80; ++b) {
    const float a = bf16_to_f32(static_cast<std::uint16_t>(b));
    ASSERT_EQ(e8m0_floor_log2_fp32(a, 8), e8m0_floor(a, 8)) << a;
  }
  // Count the affected floats just below 2^8: the research count is 2 (k = 8).
  int affected = 0;
  float a = 256.0f;
  for (int i = 0; i < 16; ++i) {
    a = std::nextafter(a, 0.0f);
    affected += e8m0_floor_log2_fp32(a, 8) != e8m0_floor(a, 8);
  }
  EXPECT_EQ(affected, 2);
}

}  // namespace
}  // namespace qexact
