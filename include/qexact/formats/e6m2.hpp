// E6M2: HiFloat4's level-1 block scale (contracts §5). A value is m * 2^(e-2) with a 2-bit
// mantissa under an implicit leading one (m in 4..7) and e in [-48, 15]; the range is
// [2^-48, 49152]. The byte is (e + 48) << 2 | (m - 4); 0xFF (e = 15, m = 7 = 57344) lies above
// the range and is reserved for a block holding NaN or +/-inf.
#pragma once
#include <cstdint>

namespace qexact {

inline constexpr float kE6M2Min = 0x1p-48f;
inline constexpr float kE6M2Max = 49152.0f;
inline constexpr std::uint8_t kE6M2NonFinite = 0xFF;

struct E6M2 {
  int exponent;  // e in [-48, 15]
  int mantissa;  // m in 4..7: the value is m * 2^(e-2)
};

// The contract's rounding of a scale factor sf: clamp to [2^-48, 49152], e = floor(log2 sf)
// from the exponent bits, m = rne(sf * 2^(2-e)), and m = 8 carries into e + 1. Every non-NaN
// sf is accepted (the clamp takes care of 0, negatives and inf); NaN throws bad_argument.
E6M2 e6m2_round(float sf);

float e6m2_value(E6M2 s);            // m * 2^(e-2), exact
std::uint8_t e6m2_byte(E6M2 s);      // (e + 48) << 2 | (m - 4)
std::uint8_t e6m2_encode(float sf);  // e6m2_byte(e6m2_round(sf))
// The fields of a byte other than the reserved 0xFF (which throws bad_argument).
E6M2 e6m2_fields(std::uint8_t byte);
// The value of a byte; the reserved 0xFF decodes to NaN.
float e6m2_decode(std::uint8_t byte);

}  // namespace qexact
