#include "kernels/cpu/pool/quotient_rounding.hpp"

#include <algorithm>

namespace qexact::kernels {
namespace {

struct Format {
  int precision;   // significand bits, the implicit one included
  int emin, emax;  // exponents of the normal numbers
  std::uint32_t sign_bit, infinity;
};

Format format_of(DType out) {
  switch (out) {
    case DType::bf16: return Format{8, -126, 127, 0x8000u, 0x7F80u};
    case DType::f16: return Format{11, -14, 15, 0x8000u, 0x7C00u};
    default: return Format{24, -126, 127, 0x80000000u, 0x7F800000u};
  }
}

int bit_width(UInt128 v) {
  const auto high = static_cast<std::uint64_t>(v >> 64);
  if (high != 0) return 128 - __builtin_clzll(high);
  const auto low = static_cast<std::uint64_t>(v);
  return low == 0 ? 0 : 64 - __builtin_clzll(low);
}

// magnitude * 2^exponent / n as (q + r) * 2^exponent' with 0 <= r < 1: q, whether r != 0,
// and exponent'. q carries at least 32 significant bits, more than any rounding below needs.
struct Quotient {
  UInt128 q;
  bool inexact;
  int exponent;
};

Quotient divide(UInt128 magnitude, int exponent, std::uint64_t n) {
  const int width = bit_width(magnitude);
  if (n < (std::uint64_t{1} << 32)) {
    // One 64-bit division of the top 64 bits (q >= 2^63 / n > 2^31). Dropping the low bits d of
    // the dividend keeps q: with D = q * n + rest, (D + d) / n = q + (rest + d) / n and
    // rest + d < n for 0 <= d < 1.
    const int drop = width - 64;
    const std::uint64_t top =
        drop > 0 ? static_cast<std::uint64_t>(magnitude >> drop) : static_cast<std::uint64_t>(magnitude) << -drop;
    const bool dropped = drop > 0 && (magnitude & ((UInt128{1} << drop) - 1u)) != 0;
    return Quotient{top / n, dropped || top % n != 0, exponent + drop};
  }
  // The dividend's top bit at 126: q >= 2^126 / n >= 2^62.
  const int shift = 127 - width;
  const UInt128 scaled = magnitude << shift;
  return Quotient{scaled / n, scaled % n != 0, exponent - shift};
}

}  // namespace

std::uint32_t rounded_quotient_bits(UInt128 magnitude, int exponent, std::uint64_t n, bool negative, DType out) {
  const Format f = format_of(out);
  if (magnitude == 0) return 0;
  const std::uint32_t sign = negative ? f.sign_bit : 0u;

  const auto [q, inexact, q_exponent] = divide(magnitude, exponent, n);
  const int value_exponent = bit_width(q) - 1 + q_exponent;  // floor(log2 |value|)
  const int ulp = std::max(value_exponent, f.emin) - (f.precision - 1);
  const int cut = ulp - q_exponent;  // the bit of q worth one ulp; >= 31 - 23
  if (cut > 127) return sign;        // below half an ulp of the smallest subnormal
  UInt128 kept = q >> cut;
  const bool round_bit = ((q >> (cut - 1)) & 1u) != 0;
  const bool sticky = inexact || (q & ((UInt128{1} << (cut - 1)) - 1u)) != 0;
  if (round_bit && (sticky || (kept & 1u) != 0)) ++kept;
  if (kept == 0) return sign;

  const int kept_lead = bit_width(kept) - 1;  // precision - 1, or precision after a carry
  if (kept_lead + ulp > f.emax) return sign | f.infinity;
  if (kept_lead < f.precision - 1) return sign | static_cast<std::uint32_t>(kept);  // subnormal
  const auto significand = static_cast<std::uint32_t>(kept >> (kept_lead - (f.precision - 1)));
  const auto field = static_cast<std::uint32_t>(kept_lead + ulp + 1 - f.emin);
  return sign | field << (f.precision - 1) | (significand - (1u << (f.precision - 1)));
}

}  // namespace qexact::kernels
