#include "qexact/formats/e6m2.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "qexact/error.hpp"

namespace qexact {
namespace {

constexpr int kExponentOffset = 48;

// floor(log2 v) of a positive normal fp32 value, read from its exponent field.
int exponent_of_normal(float v) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(v);
  return static_cast<int>((bits >> 23) & 0xFFu) - 127;
}

// Round to the nearest integer, ties to even, of a value in [4, 8). floor and the fraction are
// exact for such a value, so the comparison with 0.5 is exact too.
int round_half_even(float v) {
  const float whole = std::floor(v);
  const float fraction = v - whole;
  int r = static_cast<int>(whole);
  if (fraction > 0.5f || (fraction == 0.5f && (r & 1) != 0)) ++r;
  return r;
}

}  // namespace

E6M2 e6m2_round(float sf) {
  if (std::isnan(sf)) fail(ErrorKind::bad_argument, "E6M2 scale factor is NaN");
  const float clamped = std::clamp(sf, kE6M2Min, kE6M2Max);
  int e = exponent_of_normal(clamped);
  int m = round_half_even(std::ldexp(clamped, 2 - e));
  if (m == 8) {
    m = 4;
    ++e;
  }
  return E6M2{e, m};
}

float e6m2_value(E6M2 s) { return std::ldexp(static_cast<float>(s.mantissa), s.exponent - 2); }

std::uint8_t e6m2_byte(E6M2 s) {
  return static_cast<std::uint8_t>(((s.exponent + kExponentOffset) << 2) | (s.mantissa - 4));
}

std::uint8_t e6m2_encode(float sf) { return e6m2_byte(e6m2_round(sf)); }

E6M2 e6m2_fields(std::uint8_t byte) {
  if (byte == kE6M2NonFinite) fail(ErrorKind::bad_argument, "E6M2 byte 0xFF is reserved for non-finite blocks");
  return E6M2{(byte >> 2) - kExponentOffset, (byte & 3) + 4};
}

float e6m2_decode(std::uint8_t byte) {
  if (byte == kE6M2NonFinite) return std::numeric_limits<float>::quiet_NaN();
  return e6m2_value(e6m2_fields(byte));
}

}  // namespace qexact
