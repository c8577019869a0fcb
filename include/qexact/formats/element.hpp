// Low-precision element formats of the MX family: E4M3 ("fn": no inf, NaN = S.1111.111,
// max 448), E5M2 (IEEE-like: inf and NaN, max 57344), E2M3 (max 7.5), E3M2 (max 28) and E2M1
// (max 6); the last three have neither inf nor NaN. Codes are right-aligned in a byte with the
// sign in bit (bits-1).
//
// Encoding here is the *reference* codec: the nearest value is found by search over the
// format's value table (no bit tricks), ties broken by the named rounding rule.
// Rounding rules: rne (ties to even), half_away (ties away from zero, exact), half_away_fp32
// and even_fp32 (microxcaling's floor(fp32(u + 0.5)) on the grid unit u, which also rounds up
// values a hair below a midpoint, and its "even" variant), trunc (toward zero: the largest
// grid value <= |x|, as a device without rounding logic truncates), ties_zero (nearest, ties
// toward zero: a midpoint takes the smaller magnitude, as ModelOpt's and ggml's E2M1 tables
// compare |x| > midpoint strictly).
// Overflow: saturate (anything above max, inf included, gives +/-max), nan (values that round
// past max give NaN -- under trunc, values >= max + the top binade's step; a format without
// NaN cannot be asked this), inf (E5M2 only: gives +/-inf).
// NaN input: the format's NaN code with the input's sign; a format without NaN gives code 0.
// The sign of a value that rounds to zero is kept (-tiny -> sign bit set).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace qexact {

enum class ElemFormat : std::uint8_t { e4m3, e5m2, e2m3, e3m2, e2m1 };

enum class Rounding : std::uint8_t { rne, half_away, half_away_fp32, even_fp32, trunc, ties_zero };

enum class Overflow : std::uint8_t { saturate, nan, inf };

struct ElemTraits {
  const char* name;
  int bits;          // 8, 6 or 4 (sign included)
  int ebits, mbits;  // exponent and stored mantissa bits
  int bias;
  bool has_inf, has_nan;
  float max;         // largest finite magnitude
  int emax;          // exponent of max: floor(log2(max))
  std::uint8_t max_code;  // positive code of max
};

const ElemTraits& elem_traits(ElemFormat f);
ElemFormat parse_elem_format(const std::string& name);  // "e4m3", ...
const char* rounding_name(Rounding r);
Rounding parse_rounding(const std::string& name);
const char* overflow_name(Overflow o);
Overflow parse_overflow(const std::string& name);

// Value of a code (NaN/inf codes decode to NaN/inf).
float elem_decode(ElemFormat f, std::uint8_t code);

// Non-negative finite values of the format, indexed by positive code (0 .. max_code).
const std::vector<float>& elem_value_table(ElemFormat f);

// Reference encoder: nearest table value by search, see the header comment for the rules.
std::uint8_t elem_encode(ElemFormat f, float v, Rounding r, Overflow o);

}  // namespace qexact
