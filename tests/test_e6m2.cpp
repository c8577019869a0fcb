// E6M2, HiFloat4's level-1 scale: every byte, the rounding rule, the carry and the clamp.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>

#include "qexact/error.hpp"
#include "qexact/formats/e6m2.hpp"

namespace {

using qexact::E6M2;

std::uint32_t bits(float v) { return std::bit_cast<std::uint32_t>(v); }

// The value of byte b built from its fp32 bit pattern: m * 2^(e-2) = (m/4) * 2^e has the
// exponent field e + 127 and the mantissa field (m - 4) << 21.
float value_from_bits(int byte) {
  const int e = (byte >> 2) - 48;
  const int m = (byte & 3) + 4;
  return std::bit_cast<float>(static_cast<std::uint32_t>(e + 127) << 23 | static_cast<std::uint32_t>(m - 4) << 21);
}

TEST(E6M2, EveryValidByteDecodesToItsValueAndEncodesBack) {
  int checked = 0;
  for (int byte = 0; byte < 0xFF; ++byte) {
    const auto b = static_cast<std::uint8_t>(byte);
    const float v = qexact::e6m2_decode(b);
    EXPECT_EQ(bits(v), bits(value_from_bits(byte))) << "byte " << byte;
    EXPECT_EQ(qexact::e6m2_encode(v), b) << "byte " << byte;
    const E6M2 f = qexact::e6m2_fields(b);
    EXPECT_EQ(qexact::e6m2_byte(f), b);
    EXPECT_EQ(bits(qexact::e6m2_value(f)), bits(v));
    ++checked;
  }
  EXPECT_EQ(checked, 255);
}

TEST(E6M2, ByteOrderIsValueOrderAndSpansTheRange) {
  for (int byte = 1; byte < 0xFF; ++byte)
    EXPECT_LT(qexact::e6m2_decode(static_cast<std::uint8_t>(byte - 1)),
              qexact::e6m2_decode(static_cast<std::uint8_t>(byte)));
  EXPECT_EQ(qexact::e6m2_decode(0x00), 0x1p-48f);
  EXPECT_EQ(qexact::e6m2_decode(0xFE), 49152.0f);
  EXPECT_EQ(qexact::kE6M2Min, 0x1p-48f);
  EXPECT_EQ(qexact::kE6M2Max, 49152.0f);
}

TEST(E6M2, ReservedByteIsNaNAndHasNoFields) {
  EXPECT_TRUE(std::isnan(qexact::e6m2_decode(0xFF)));
  EXPECT_THROW(qexact::e6m2_fields(0xFF), qexact::Error);
}

TEST(E6M2, RoundsToNearestWithTiesToEven) {
  // Between 4 and 5 (x 2^-2 at e = 0): 1.125 is the tie and goes to m = 4 (even).
  EXPECT_EQ(qexact::e6m2_encode(1.125f), 0xC0);  // (0 + 48) << 2 | 0
  EXPECT_EQ(qexact::e6m2_encode(std::nextafter(1.125f, 2.0f)), 0xC1);
  // 5.5 / 4 = 1.375 ties between m = 5 and m = 6: goes to 6.
  EXPECT_EQ(qexact::e6m2_encode(1.375f), 0xC2);
  EXPECT_EQ(qexact::e6m2_encode(std::nextafter(1.375f, 0.0f)), 0xC1);
  // 6.5 / 4 = 1.625 ties between 6 and 7: goes to 6.
  EXPECT_EQ(qexact::e6m2_encode(1.625f), 0xC2);
  EXPECT_EQ(qexact::e6m2_encode(std::nextafter(1.625f, 2.0f)), 0xC3);
}

TEST(E6M2, MantissaEightCarriesIntoTheExponent) {
  // 1.875 = 7.5 * 2^-2 ties between m = 7 and m = 8; 8 is even, so it becomes e = 1, m = 4.
  const E6M2 s = qexact::e6m2_round(1.875f);
  EXPECT_EQ(s.exponent, 1);
  EXPECT_EQ(s.mantissa, 4);
  EXPECT_EQ(qexact::e6m2_encode(1.875f), 0xC4);  // (1 + 48) << 2 | 0
  EXPECT_EQ(qexact::e6m2_value(s), 2.0f);
  EXPECT_EQ(qexact::e6m2_encode(1.8671875f), 0xC3);  // bf16 just below: 7.46875 -> 7
  // The largest carry: just below 2^15 rounds up to 2^15 = byte (15 + 48) << 2.
  EXPECT_EQ(qexact::e6m2_encode(32640.0f), 0xFC);
  EXPECT_EQ(qexact::e6m2_decode(0xFC), 32768.0f);
}

TEST(E6M2, ClampsToTheRange) {
  EXPECT_EQ(qexact::e6m2_encode(0.0f), 0x00);
  EXPECT_EQ(qexact::e6m2_encode(0x1p-149f), 0x00);
  EXPECT_EQ(qexact::e6m2_encode(std::nextafter(0x1p-48f, 0.0f)), 0x00);
  EXPECT_EQ(qexact::e6m2_encode(-1.0f), 0x00);
  EXPECT_EQ(qexact::e6m2_encode(49152.0f), 0xFE);
  EXPECT_EQ(qexact::e6m2_encode(49153.0f), 0xFE);
  EXPECT_EQ(qexact::e6m2_encode(1e30f), 0xFE);
  EXPECT_EQ(qexact::e6m2_encode(INFINITY), 0xFE);
  EXPECT_THROW(qexact::e6m2_encode(NAN), qexact::Error);
}

TEST(E6M2, GoldenScaleOfAllTwoBlock) {
  // contracts §5 golden: sf = 0.28515625 -> e = -2, m = rne(4.5625) = 5, scale 0.3125.
  const E6M2 s = qexact::e6m2_round(0.28515625f);
  EXPECT_EQ(s.exponent, -2);
  EXPECT_EQ(s.mantissa, 5);
  EXPECT_EQ(qexact::e6m2_value(s), 0.3125f);
  EXPECT_EQ(qexact::e6m2_byte(s), 0xB9);  // (-2 + 48) << 2 | 1 = 185
}

}  // namespace
