#include "qexact/formats/element.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "qexact/error.hpp"
#include "did_you_mean.hpp"

namespace qexact {
namespace {

constexpr ElemTraits kTraits[] = {
    {"e4m3", 8, 4, 3, 7, false, true, 448.0f, 8, 0x7E},
    {"e5m2", 8, 5, 2, 15, true, true, 57344.0f, 15, 0x7B},
    {"e2m3", 6, 2, 3, 1, false, false, 7.5f, 2, 0x1F},
    {"e3m2", 6, 3, 2, 3, false, false, 28.0f, 4, 0x1F},
    {"e2m1", 4, 2, 1, 1, false, false, 6.0f, 2, 0x7},
};

// Power of two as float without libm; k within the float range including subnormals.
float pow2(int k) { return std::ldexp(1.0f, k); }

std::vector<float> build_table(ElemFormat f) {
  const ElemTraits& t = elem_traits(f);
  std::vector<float> v;
  for (int c = 0; c <= t.max_code; ++c) v.push_back(elem_decode(f, static_cast<std::uint8_t>(c)));
  return v;
}

}  // namespace

const ElemTraits& elem_traits(ElemFormat f) { return kTraits[static_cast<int>(f)]; }

ElemFormat parse_elem_format(const std::string& name) {
  for (int i = 0; i < 5; ++i)
    if (name == kTraits[i].name) return static_cast<ElemFormat>(i);
  fail(ErrorKind::bad_argument, "unknown element format '" + name + "'" +
                                    did_you_mean(name, {"e4m3", "e5m2", "e2m3", "e3m2", "e2m1"}) +
                                    " (e4m3, e5m2, e2m3, e3m2, e2m1)");
}

const char* rounding_name(Rounding r) {
  switch (r) {
    case Rounding::rne: return "rne";
    case Rounding::half_away: return "half_away";
    case Rounding::half_away_fp32: return "half_away_fp32";
    case Rounding::even_fp32: return "even_fp32";
    case Rounding::trunc: return "trunc";
    case Rounding::ties_zero: return "ties_zero";
  }
  return "?";
}

Rounding parse_rounding(const std::string& n) {
  for (Rounding r : {Rounding::rne, Rounding::half_away, Rounding::half_away_fp32, Rounding::even_fp32, Rounding::trunc,
                     Rounding::ties_zero})
    if (n == rounding_name(r)) return r;
  if (n == "even") return Rounding::rne;
  fail(ErrorKind::bad_argument,
       "unknown rounding '" + n + "'" +
           did_you_mean(n, {"rne", "half_away", "half_away_fp32", "even_fp32", "trunc", "ties_zero", "even"}) +
           " (rne, half_away, half_away_fp32, even_fp32, trunc, ties_zero)");
}

const char* overflow_name(Overflow o) {
  switch (o) {
    case Overflow::saturate: return "saturate";
    case Overflow::nan: return "nan";
    case Overflow::inf: return "inf";
  }
  return "?";
}

Overflow parse_overflow(const std::string& n) {
  for (Overflow o : {Overflow::saturate, Overflow::nan, Overflow::inf})
    if (n == overflow_name(o)) return o;
  fail(ErrorKind::bad_argument,
       "unknown overflow rule '" + n + "'" + did_you_mean(n, {"saturate", "nan", "inf"}) + " (saturate, nan, inf)");
}

float elem_decode(ElemFormat f, std::uint8_t code) {
  const ElemTraits& t = elem_traits(f);
  const int sign = (code >> (t.bits - 1)) & 1;
  const int mag = code & ((1 << (t.bits - 1)) - 1);
  const int e = mag >> t.mbits;
  const int m = mag & ((1 << t.mbits) - 1);
  float v;
  if (f == ElemFormat::e4m3 && mag == 0x7F) {
    v = std::numeric_limits<float>::quiet_NaN();
  } else if (f == ElemFormat::e5m2 && e == 31) {
    v = m == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
  } else if (e == 0) {
    v = static_cast<float>(m) * pow2(1 - t.bias - t.mbits);
  } else {
    v = static_cast<float>((1 << t.mbits) + m) * pow2(e - t.bias - t.mbits);
  }
  return sign ? -v : v;
}

const std::vector<float>& elem_value_table(ElemFormat f) {
  static const std::array<std::vector<float>, 5> tables = {
      build_table(ElemFormat::e4m3), build_table(ElemFormat::e5m2), build_table(ElemFormat::e2m3),
      build_table(ElemFormat::e3m2), build_table(ElemFormat::e2m1)};
  return tables[static_cast<int>(f)];
}

std::uint8_t elem_encode(ElemFormat f, float v, Rounding r, Overflow o) {
  const ElemTraits& t = elem_traits(f);
  if ((o == Overflow::nan && !t.has_nan) || (o == Overflow::inf && !t.has_inf))
    fail(ErrorKind::bad_argument, std::string("overflow=") + overflow_name(o) + " is impossible for " + t.name);
  const std::uint8_t sign = std::signbit(v) ? static_cast<std::uint8_t>(1u << (t.bits - 1)) : 0;
  const std::uint8_t nan_code = static_cast<std::uint8_t>(sign | 0x7F);  // E4M3 and E5M2 alike
  if (std::isnan(v)) return t.has_nan ? nan_code : 0;
  const std::uint8_t sat_code = static_cast<std::uint8_t>(sign | t.max_code);
  const std::uint8_t ovf_code =
      o == Overflow::saturate ? sat_code
      : o == Overflow::nan    ? nan_code
                              : static_cast<std::uint8_t>(sign | 0x7C);
  const float a = std::fabs(v);
  if (std::isinf(a)) return ovf_code;
  if (o == Overflow::saturate && a >= t.max) return sat_code;

  // The table extended by one virtual step past max: landing there means overflow.
  const std::vector<float>& tab = elem_value_table(f);
  const float step_top = tab[t.max_code] - tab[t.max_code - 1];
  const float virt = tab[t.max_code] + step_top;
  // lo = index of the largest value <= a; the candidate above it is lo + 1 (virtual past max).
  const int n_codes = static_cast<int>(tab.size());
  int lo;
  if (a >= virt) {
    return ovf_code;
  } else {
    lo = static_cast<int>(std::upper_bound(tab.begin(), tab.end(), a) - tab.begin()) - 1;
  }
  const float lo_v = tab[lo];
  if (lo_v == a) return static_cast<std::uint8_t>(sign | lo);
  const float hi_v = lo + 1 < n_codes ? tab[lo + 1] : virt;
  const float ulp = hi_v - lo_v;  // the grid spacing of lo's binade: a power of two
  bool up;
  switch (r) {
    case Rounding::rne:
    case Rounding::half_away:
    case Rounding::ties_zero: {
      // Midpoint comparison in double: lo_v, hi_v and a are fp32, their sum and half are exact.
      const double mid = (static_cast<double>(lo_v) + static_cast<double>(hi_v)) / 2.0;
      const double ad = a;
      if (ad != mid) up = ad > mid;
      else up = r == Rounding::half_away || (r == Rounding::rne && (lo + 1) % 2 == 0);
      break;
    }
    case Rounding::half_away_fp32:
    case Rounding::even_fp32: {
      // u: a in grid units (exact: division by a power of two well inside the fp32 range).
      const float u = a / ulp;
      const float n = lo_v / ulp;
      // One fp32 addition, as the emulator performs it (the build forbids contraction).
      float q = std::floor(u + 0.5f);
      if (r == Rounding::even_fp32) {
        const float mm = u - 0.5f;
        if (mm == std::floor(mm) && std::fmod(mm, 2.0f) == 0.0f) q -= 1.0f;
      }
      up = q >= n + 1.0f;
      break;
    }
    case Rounding::trunc:
      up = false;  // the largest table value <= a; only a >= virt (handled above) overflows
      break;
    default:
      up = false;
  }
  if (!up) return static_cast<std::uint8_t>(sign | lo);
  if (lo + 1 >= n_codes) return ovf_code;
  return static_cast<std::uint8_t>(sign | (lo + 1));
}

}  // namespace qexact
