#include "qexact/formats/int8.hpp"

#include <cmath>

namespace qexact {
namespace {

// 1.5 * 2^23: adding it puts the units digit of any |v| < 2^22 in the last mantissa bit, so the
// addition itself rounds to nearest even; subtracting it back is exact.
constexpr float kRneMagic = 12582912.0f;

float round_rne(float v) { return (v + kRneMagic) - kRneMagic; }

float round_half_away(float v) { return std::round(v); }

float round_half_away_fp32(float v) {
  const float shifted = v + std::copysign(0.5f, v);  // rounds in fp32: the artefact is the contract
  return std::trunc(shifted);
}

}  // namespace

float int8_round(float v, IntRounding r) {
  switch (r) {
    case IntRounding::rne:
      return round_rne(v);
    case IntRounding::half_away:
      return round_half_away(v);
    case IntRounding::half_away_fp32:
      return round_half_away_fp32(v);
    case IntRounding::trunc:
      return std::trunc(v);
  }
  return round_rne(v);
}

std::int8_t int8_saturate(float rounded, int range) {
  if (std::isnan(rounded)) return 0;
  const float lo = range == 128 ? -128.0f : -127.0f;
  const float clamped = rounded < lo ? lo : (rounded > 127.0f ? 127.0f : rounded);
  return static_cast<std::int8_t>(static_cast<int>(clamped));
}

std::int8_t int8_encode(float v, IntRounding r, int range) { return int8_saturate(int8_round(v, r), range); }

float int8_decode(std::int8_t q, float scale) { return static_cast<float>(q) * scale; }

}  // namespace qexact
