#include "qexact/formats/e8m0.hpp"

#include <cmath>
#include <limits>

namespace qexact {
namespace {

std::uint8_t clamp_byte(int biased) { return static_cast<std::uint8_t>(biased < 0 ? 0 : biased > 254 ? 254 : biased); }

// e^y for |y| < 2^-20 in double: the series to y^3 is exact far below double precision.
double exp_tiny(double y) { return 1.0 + y + y * y / 2.0 + y * y * y / 6.0; }

// Half the spacing of fp32 values next to the integer k on the side where log2 values a
// hair below k lie (below k in magnitude for k > 0, above it for k < 0).
double half_fp32_spacing_below(int k) {
  const int a = k < 0 ? -k : k;
  int e = floor_log2_exact(static_cast<float>(a));  // a >= 1
  const bool below = k > 0;
  if (below && (1 << e) == a) e -= 1;  // just below a power of two: the binade beneath
  return std::ldexp(1.0, e - 23 - 1);
}

}  // namespace

float e8m0_decode(std::uint8_t byte) {
  if (byte == 255) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, static_cast<int>(byte) - 127);
}

int floor_log2_exact(float a) {
  int k = -149;
  while (k < 127 && std::ldexp(1.0f, k + 1) <= a) ++k;
  return k;
}

int ceil_log2_exact(float a) {
  int k = -149;
  while (k < 128 && static_cast<double>(std::ldexp(1.0, k)) < static_cast<double>(a)) ++k;
  return k;
}

std::uint8_t e8m0_floor(float amax, int emax_elem) {
  if (!(amax > 0.0f)) return 0;
  return clamp_byte(127 + floor_log2_exact(amax) - emax_elem);
}

std::uint8_t e8m0_floor_log2_fp32(float amax, int emax_elem) {
  if (!(amax > 0.0f)) return 0;
  return clamp_byte(127 + floor_of_fp32_log2(amax) - emax_elem);
}

int floor_of_fp32_log2(float amax) {
  int e = floor_log2_exact(amax);
  // log2(amax) in (e, e+1). Its fp32 rounding reaches k = e+1 iff log2(amax) >= k - h, h half
  // the fp32 spacing there (a tie rounds to k, whose significand is even), i.e. iff
  // amax >= 2^k * 2^-h. k = 0 cannot be reached: fp32 resolves log2 of 1 - 2^-24.
  const int k = e + 1;
  if (k != 0 && std::ldexp(1.0f, e) != amax) {
    const double h = half_fp32_spacing_below(k);
    const double threshold = std::ldexp(exp_tiny(-h * 0.69314718055994530942), k);
    if (static_cast<double>(amax) >= threshold) e = k;
  }
  return e;
}

std::uint8_t e8m0_rceil(float amax, float max_elem, bool reciprocal) {
  const float d = reciprocal ? amax * (1.0f / max_elem) : amax / max_elem;
  if (!(d > 0.0f)) return 0;
  return clamp_byte(127 + ceil_log2_exact(d));
}

std::uint8_t e8m0_rceil_bits(float amax, float max_elem, bool reciprocal) {
  const float d = reciprocal ? amax * (1.0f / max_elem) : amax / max_elem;
  if (!(d > 0.0f)) return 0;
  return clamp_byte(127 + std::max(ceil_log2_exact(d), -126));
}

std::uint8_t e8m0_rceil_log2_fp32(float amax, float max_elem, bool reciprocal) {
  const float d = reciprocal ? amax * (1.0f / max_elem) : amax / max_elem;
  if (!(d > 0.0f)) return 0;
  const int e = floor_log2_exact(d);
  if (std::ldexp(1.0f, e) == d) return clamp_byte(127 + e);
  // log2(d) in (e, e+1) rounds in fp32 to e iff log2(d) < e + h, h half the fp32 spacing just
  // above e (toward zero for e < 0: the spacing below |e|), i.e. iff d < 2^e * 2^h. Just above
  // e = 0 fp32 resolves every log2: always e + 1.
  int up = 1;
  if (e != 0) {
    const double h = half_fp32_spacing_below(-e);
    const double threshold = std::ldexp(exp_tiny(h * 0.69314718055994530942), e);
    if (static_cast<double>(d) < threshold) up = 0;
  }
  return clamp_byte(127 + e + up);
}

std::uint8_t e8m0_ceil(float amax, int emax_elem) {
  if (!(amax > 0.0f)) return 0;
  return clamp_byte(127 + ceil_log2_exact(amax) - emax_elem);
}

std::uint8_t e8m0_even(float amax, int emax_elem, int mbits_elem) {
  if (!(amax > 0.0f)) return 0;
  int k = floor_log2_exact(amax);
  // 2^k * (2 - 2^-(m+1)) is exact in double for every float k.
  const double up_at = std::ldexp(2.0 - std::ldexp(1.0, -(mbits_elem + 1)), k);
  if (static_cast<double>(amax) >= up_at) ++k;
  return clamp_byte(127 + k - emax_elem);
}

}  // namespace qexact
