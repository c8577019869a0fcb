#include "reference/exact_sum.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <string>

namespace qexact::ref {
namespace {

constexpr int kLimbs = ExactSum::kLimbs;
constexpr int kBits = 64 * kLimbs;
using Limbs = std::array<std::uint64_t, kLimbs>;
__extension__ typedef unsigned __int128 Wide;

// The quotient is formed in units of 2^-150: one bit below the smallest fp32 subnormal, so
// that even a result whose ulp is 2^-149 has its round bit in the quotient.
constexpr int kQuotientUnitExponent = -150;

// A target dtype's rounding grid: significand bits (implicit one included) and the exponent
// range of its normal numbers; below emin the grid spacing stays 2^(emin - precision + 1).
struct TargetFormat {
  int precision;
  int emin;
  int emax;
};

TargetFormat target_format(DType out) {
  switch (out) {
    case DType::f32: return TargetFormat{24, -126, 127};
    case DType::bf16: return TargetFormat{8, -126, 127};
    case DType::f16: return TargetFormat{11, -14, 15};
    default: break;
  }
  fail(ErrorKind::bad_argument, std::string("a mean is rounded to f32, bf16 or f16, not ") + dtype_name(out));
}

void add_in_place(Limbs& a, const Limbs& b) {
  std::uint64_t carry = 0;
  for (int i = 0; i < kLimbs; ++i) {
    const std::uint64_t partial = a[i] + b[i];
    const std::uint64_t total = partial + carry;
    carry = static_cast<std::uint64_t>(partial < a[i]) | static_cast<std::uint64_t>(total < partial);
    a[i] = total;
  }
}

Limbs negated(const Limbs& a) {
  Limbs r{};
  for (int i = 0; i < kLimbs; ++i) r[i] = ~a[i];
  add_in_place(r, Limbs{1});
  return r;
}

bool is_negative(const Limbs& a) { return (a[kLimbs - 1] >> 63) != 0; }

// |v| in units of 2^-149: the significand (implicit bit included) shifted by the exponent.
Limbs magnitude_units(float v) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(v);
  const std::uint32_t field = (bits >> 23) & 0xFFu;
  const std::uint32_t fraction = bits & 0x7FFFFFu;
  const std::uint64_t significand = field == 0 ? fraction : (fraction | 0x800000u);
  const int shift = field == 0 ? 0 : static_cast<int>(field) - 1;
  Limbs r{};
  const int limb = shift / 64;
  const int offset = shift % 64;
  r[limb] = significand << offset;
  if (offset != 0) r[limb + 1] = significand >> (64 - offset);
  return r;
}

Limbs shifted_left_one(const Limbs& a) {
  Limbs r{};
  for (int i = 0; i < kLimbs; ++i) r[i] = (a[i] << 1) | (i > 0 ? a[i - 1] >> 63 : 0);
  return r;
}

// Long division by n, one 64-bit limb at a time from the top; returns the remainder.
std::uint64_t divide_in_place(Limbs& a, std::uint64_t n) {
  Wide remainder = 0;
  for (int i = kLimbs - 1; i >= 0; --i) {
    const Wide current = (remainder << 64) | a[i];
    a[i] = static_cast<std::uint64_t>(current / n);
    remainder = current % n;
  }
  return static_cast<std::uint64_t>(remainder);
}

bool bit(const Limbs& a, int i) { return ((a[i / 64] >> (i % 64)) & 1u) != 0; }

int highest_bit(const Limbs& a) {
  for (int i = kBits - 1; i >= 0; --i)
    if (bit(a, i)) return i;
  return -1;
}

bool any_bit_below(const Limbs& a, int end) {
  for (int i = 0; i < end; ++i)
    if (bit(a, i)) return true;
  return false;
}

// a >> first, for a result known to fit in 64 bits.
std::uint64_t bits_from(const Limbs& a, int first) {
  std::uint64_t r = 0;
  for (int i = kBits - 1; i >= first; --i) r = (r << 1) | static_cast<std::uint64_t>(bit(a, i));
  return r;
}

}  // namespace

void ExactSum::add(float v) {
  if (!std::isfinite(v)) fail(ErrorKind::bad_argument, "an exact sum takes finite values only");
  const Limbs units = magnitude_units(v);
  add_in_place(limbs_, std::signbit(v) ? negated(units) : units);
}

void ExactSum::merge(const ExactSum& other) { add_in_place(limbs_, other.limbs_); }

float ExactSum::mean(std::uint64_t n, DType out) const {
  if (n == 0) fail(ErrorKind::bad_argument, "the mean of zero elements is undefined");
  const TargetFormat target = target_format(out);
  const bool negative = is_negative(limbs_);
  const float zero = negative ? -0.0f : 0.0f;

  Limbs quotient = shifted_left_one(negative ? negated(limbs_) : limbs_);  // units of 2^-150
  const std::uint64_t remainder = divide_in_place(quotient, n);
  const int lead = highest_bit(quotient);
  // Below 2^-150: less than half the smallest subnormal of every target.
  if (lead < 0) return zero;

  const int exponent = lead + kQuotientUnitExponent;  // floor(log2 |sum / n|)
  const int ulp = std::max(exponent, target.emin) - (target.precision - 1);
  const int cut = ulp - kQuotientUnitExponent;  // quotient bit worth one ulp; >= 1
  std::uint64_t kept = bits_from(quotient, cut);
  const bool round_bit = bit(quotient, cut - 1);
  const bool sticky = remainder != 0 || any_bit_below(quotient, cut - 1);
  if (round_bit && (sticky || (kept & 1u) != 0)) ++kept;
  if (kept == 0) return zero;

  const int value_exponent = static_cast<int>(std::bit_width(kept)) - 1 + ulp;
  if (value_exponent > target.emax)
    return negative ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  const float magnitude = std::ldexp(static_cast<float>(kept), ulp);  // kept <= 2^24: exact
  return negative ? -magnitude : magnitude;
}

}  // namespace qexact::ref
