#include "conformance/cases.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>

#include "conformance/case_fill.hpp"
#include "qexact/formats/bf16.hpp"
#include "qexact/formats/element.hpp"

namespace qexact::conformance {
namespace {

std::uint64_t splitmix64(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

// Natural logarithm of x > 0 from frexp and the atanh series: +, -, *, / only, so the same
// bits on every platform (libm's log may differ in the last ulp between implementations).
double portable_log(double x) {
  int e = 0;
  double m = std::frexp(x, &e);  // x = m * 2^e, m in [0.5, 1)
  if (m < 0.70710678118654752440) {
    m *= 2.0;
    --e;
  }
  const double t = (m - 1.0) / (m + 1.0);  // |t| <= 0.1716: 20 odd terms reach 1e-30
  const double t2 = t * t;
  double term = t, sum = 0.0;
  for (int k = 1; k <= 39; k += 2) {
    sum += term / k;
    term *= t2;
  }
  return e * 0.69314718055994530942 + 2.0 * sum;
}

}  // namespace

Rng::Rng(std::uint64_t seed) {
  for (std::uint64_t& s : s_) s = splitmix64(seed);
}

std::uint64_t Rng::next() {
  const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() { return static_cast<double>(next() >> 11) * 0x1p-53; }
double Rng::uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
std::int64_t Rng::below(std::int64_t n) { return static_cast<std::int64_t>(next() % static_cast<std::uint64_t>(n)); }
double Rng::sign() { return (next() >> 63) ? -1.0 : 1.0; }

double Rng::normal() {
  for (;;) {
    const double u = uniform(-1.0, 1.0), v = uniform(-1.0, 1.0);
    const double s = u * u + v * v;
    if (s > 0.0 && s < 1.0) return u * std::sqrt(-2.0 * portable_log(s) / s);
  }
}

std::uint64_t case_seed(std::uint64_t seed, const std::string& name) {
  std::uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a
  for (unsigned char ch : name) h = (h ^ ch) * 0x100000001B3ull;
  std::uint64_t x = seed ^ h;
  return splitmix64(x);
}

void check_target(const Contract& c, Case& k) {
  if (!k.target) return;
  k.hits = k.target->count(c, k.input.view(), Observed{});
  if (k.hits < k.target->min_hits)
    fail(ErrorKind::bad_input, "case '" + k.name + "' misses its target '" + k.target->name + "' (" +
                                   k.target->description + "): " + std::to_string(k.hits) + " hits, needs >= " +
                                   std::to_string(k.target->min_hits));
}

// ---- the cases ---------------------------------------------------------------------------

namespace {

using Content = std::vector<float>;

// Every tie of the family's grid, both signs, at scale 2^k; and the anchor that pins the scale
// of a group to 2^k (MX: element max * 2^k; int8: 127 * 2^k).
Content tie_values(const Contract& c, int k) {
  Content out;
  if (c.family == Family::mx || c.family == Family::fp8_scaled || c.family == Family::nvfp4) {
    const std::vector<float>& table = elem_value_table(c.family == Family::nvfp4 ? ElemFormat::e2m1 : c.element);
    for (std::size_t i = 0; i + 1 < table.size(); ++i) {
      const double mid = (static_cast<double>(table[i]) + table[i + 1]) / 2.0;
      out.push_back(static_cast<float>(mid * pow2(k)));
      out.push_back(static_cast<float>(-mid * pow2(k)));
    }
  } else {
    for (int n = 0; n < 127; ++n) {
      out.push_back(static_cast<float>((n + 0.5) * pow2(k)));
      out.push_back(static_cast<float>(-(n + 0.5) * pow2(k)));
    }
  }
  return out;
}

// HiF4 blocks whose every element (but the anchor 7 * 2^k at index 0, which pins the E6M2
// scale to 2^k) is a tie of one micro-exponent level: type 0 (d8 = 0, d4 = 0), 1 (0, 1),
// 2 (1, 1) and 3 (d8 = 1 with one sub-group at d4 = 1, the other at d4 = 0).
Content hif4_tie_block(int type, int k) {
  const float level0[] = {0.125f, 0.375f, 0.625f, 0.875f, 1.125f, 1.375f, 1.625f};  // (c + 1/2) / 4
  const float small1[] = {0.25f, 0.75f, 1.25f, 1.75f}, big1[] = {2.25f, 2.75f, 3.25f};  // x 2
  const float small2[] = {0.5f, 1.5f, 2.5f, 3.5f}, big2[] = {4.5f, 5.5f, 6.5f};        // x 4
  const float all1[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.25f, 2.75f, 3.25f};
  int counter[4] = {};
  auto cycle = [&](const float* values, int n, int slot) {
    const int i = counter[slot]++;
    return (i % 2 ? -1.0f : 1.0f) * values[(i / 2) % n];
  };
  Content b(64, 0.0f);
  b[0] = 7.0f;
  for (int group = 1; group < 8; ++group)
    for (int half = 0; half < 2; ++half)
      for (int e = 0; e < 4; ++e) {
        float& x = b[static_cast<std::size_t>(group * 8 + half * 4 + e)];
        const bool big_slot = (type == 3 && half == 0) ? e == 0 : e == 3;
        switch (type) {
          case 0: x = cycle(level0, 7, 0); break;
          case 1: x = big_slot ? cycle(big1, 3, 1) : cycle(small1, 4, 0); break;
          case 2: x = big_slot ? cycle(big2, 3, 1) : cycle(small2, 4, 0); break;
          default:
            x = half == 1 ? cycle(all1, 7, 2) : big_slot ? cycle(big2, 3, 1) : cycle(small2, 4, 0);
            break;
        }
      }
  for (float& x : b) x = static_cast<float>(x * pow2(k));
  return b;
}

class Generator {
 public:
  Generator(const Contract& c, std::uint64_t seed) : c_(c), seed_(seed), dtype_(default_dtype(c)) {}

  std::vector<Case> all() {
    distributions();
    ties();
    amax_cases();
    degenerate_groups();
    tiny_values();
    non_finite();
    saturation_case();
    tail_case();
    max_outside_first16();
    amax_sweep_case();
    negative_zero_case();
    family_extras();
    for (Case& k : cases_) check_target(c_, k);
    return std::move(cases_);
  }

 private:
  using Fill = GroupFill;

  static DType default_dtype(const Contract& c) {
    return c.family == Family::mx && c.prequant == Prequant::bf16 ? DType::bf16 : DType::f32;
  }

  std::int64_t group_len() const { return case_group_len(c_); }
  Shape shape_for_groups(std::int64_t n) const { return case_shape_for_groups(c_, n); }

  // The int8 families, and the families whose nonfinite_input parameter says reject.
  bool finite_only() const {
    if (c_.family == Family::int8_block || c_.family == Family::int8_token || c_.family == Family::int8_group)
      return true;
    for (const auto& [key, value] : params(c_))
      if (key == "nonfinite_input") return value == "reject";
    return false;
  }

  // nvfp4: group 0 of a case holds amax 2688 = 448 * 6 (te: global_e4m3_max * 6), so that a
  // two-level contract's tensor scale is exactly 1 and every other block's E4M3 scale is what a
  // single-level one gives.
  bool pins_tensor_scale() const { return c_.family == Family::nvfp4; }
  float pin_amax() const {
    return c_.tensor_scale == TensorScale::te ? 6.0f * static_cast<float>(c_.global_e4m3_max) : 2688.0f;
  }
  Fill pinned(Fill fill) const {
    if (!pins_tensor_scale()) return fill;
    return [fill, pin = pin_amax()](Rng& r, std::int64_t size, std::int64_t g) {
      return g == 0 ? anchored_content(r, size, pin) : fill(r, size, g);
    };
  }

  Case& add(const std::string& name, const std::string& description, const Shape& shape, DType dtype,
            const Content& values, std::optional<Predicate> target) {
    Case k;
    k.name = name;
    k.description = description;
    k.input = from_f32_vector(values, shape, dtype);
    k.target = std::move(target);
    cases_.push_back(std::move(k));
    return cases_.back();
  }

  // A case of at least n groups, each filled by `fill` (for its actual size and index).
  Case& add_groups(const std::string& name, const std::string& description, std::int64_t n, const Fill& fill,
                   std::optional<Predicate> target, DType dtype) {
    const Shape shape = shape_for_groups(n);
    const Content values = fill_groups(c_, shape, case_seed(seed_, name), fill);
    return add(name, description, shape, dtype, values, std::move(target));
  }
  Case& add_groups(const std::string& name, const std::string& description, std::int64_t n, const Fill& fill,
                   std::optional<Predicate> target) {
    return add_groups(name, description, n, fill, std::move(target), dtype_);
  }

  // Enough groups for about 8192 elements.
  std::int64_t random_groups() const { return std::max<std::int64_t>(2, (8192 + group_len() - 1) / group_len()); }

  static Fill normal_fill(double scale) {
    return [scale](Rng& r, std::int64_t size, std::int64_t) {
      Content v(static_cast<std::size_t>(size));
      for (float& x : v) x = static_cast<float>(r.normal() * scale);
      return v;
    };
  }

  std::uint64_t stream(const std::string& name) const { return case_seed(seed_, name); }

  // ---- §8.4 ----

  void distributions() {
    add_groups("randn", "standard normal values", random_groups(), normal_fill(1.0), std::nullopt);
    add_groups("uniform", "uniform values in [-1, 1)", random_groups(),
               [](Rng& r, std::int64_t size, std::int64_t) { return uniform_content(r, size, 1.0); }, std::nullopt);
    Rng pick(stream("all_equal/value"));
    const float v = static_cast<float>(pick.uniform(-2.0, 2.0));
    Case& k = add_groups(
        "all_equal", "every element equal to one random value", 8,
        [v](Rng&, std::int64_t size, std::int64_t) { return Content(static_cast<std::size_t>(size), v); }, all_equal());
    k.target->min_hits = Groups(c_, k.input.shape()).count();
  }

  void ties() {
    std::vector<Content> groups;
    if (c_.family == Family::hif4) {
      for (int k : {0, -20})
        for (int type = 0; type < 4; ++type) groups.push_back(hif4_tie_block(type, k));
    } else {
      const std::int64_t slots = group_len() - 1;  // one element pins the scale
      if (pins_tensor_scale()) groups.push_back(Content(static_cast<std::size_t>(group_len()), 0.0f));
      const std::vector<int> domains = c_.family == Family::mx      ? std::vector<int>{0, -30}
                                       : c_.family == Family::nvfp4 ? std::vector<int>{0, -4}  // E4M3 scales 2^k
                                                                    : std::vector<int>{0, -12};
      for (int k : domains) {
        const Content ties = tie_values(c_, k);
        const auto n_ties = static_cast<std::int64_t>(ties.size());
        const double anchor = top_code(c_) * pow2(k);
        if (c_.family == Family::nvfp4 && c_.four_over_six != FourOverSix::off) {
          // 4over6 keeps the candidate of smaller error: a tie beside the anchor and 4s (exact
          // under map-to-6, 4 / 1.5 off by a third under map-to-4) stays under map-to-6's scale.
          for (float tie : ties) {
            Content g(static_cast<std::size_t>(group_len()), static_cast<float>(4.0 * pow2(k)));
            g[0] = static_cast<float>(anchor);
            g[1] = tie;
            groups.push_back(g);
          }
          continue;
        }
        for (std::int64_t first = 0; first < n_ties; first += slots) {
          Content g(static_cast<std::size_t>(group_len()));
          g[0] = static_cast<float>(anchor);
          for (std::int64_t i = 0; i < slots; ++i)
            g[static_cast<std::size_t>(i + 1)] = ties[static_cast<std::size_t>((first + i) % n_ties)];
          groups.push_back(g);
        }
      }
    }
    const std::string what = c_.family == Family::mx || c_.family == Family::fp8_scaled || c_.family == Family::nvfp4
                                 ? "every midpoint of the element format"
                             : c_.family == Family::hif4 ? "every midpoint of the S1P2 grid at each micro-exponent level"
                                                         : "every exact tie (n + 1/2) * scale";
    add_groups("ties", what + " and its negative, in two exponent domains, with an anchor pinning the scale",
               static_cast<std::int64_t>(groups.size()),
               [groups, pin = pins_tensor_scale(), pin_amax = pin_amax()](Rng&, std::int64_t size, std::int64_t g) {
                 Content v = groups[static_cast<std::size_t>(g) % groups.size()];
                 v.resize(static_cast<std::size_t>(size));
                 if (pin && g == 0) v[0] = pin_amax;
                 return v;
               },
               exact_ties());
  }

  void amax_cases() {
    add_groups("amax_pow2", "groups whose amax is exactly 2^k, k in [-10, 10]", 16,
               [](Rng& r, std::int64_t size, std::int64_t) {
                 return anchored_content(r, size, pow2(static_cast<int>(r.below(21)) - 10));
               },
               amax_pow2());
    const int p = working_fraction_bits(c_, dtype_);
    add_groups("amax_above_pow2", "groups whose amax is the next representable value above 2^k", 16,
               [p](Rng& r, std::int64_t size, std::int64_t) {
                 const int k = static_cast<int>(r.below(21)) - 10;
                 Content v = uniform_content(r, size, pow2(k) * (1.0 - 0x1p-6));
                 v[static_cast<std::size_t>(r.below(size))] = static_cast<float>(r.sign() * pow2(k) * (1.0 + pow2(-p)));
                 return v;
               },
               amax_above_pow2());
  }

  void degenerate_groups() {
    add_groups("all_zero", "every element +0", 8,
               [](Rng&, std::int64_t size, std::int64_t) { return Content(static_cast<std::size_t>(size), 0.0f); },
               all_zero_groups());
    Case& neg = add_groups(
        "all_negative", "every element negative: -(|randn| + 2^-8)", 16,
        [](Rng& r, std::int64_t size, std::int64_t) {
          Content v(static_cast<std::size_t>(size));
          for (float& x : v) x = static_cast<float>(-(std::fabs(r.normal()) + 0x1p-8));
          return v;
        },
        all_negative_groups());
    neg.target->min_hits = Groups(c_, neg.input.shape()).count();
    add_groups("big_small_mix", "alternating magnitudes around 1e3 and 1e-3 in every group", 16,
               [](Rng& r, std::int64_t size, std::int64_t) {
                 Content v(static_cast<std::size_t>(size));
                 for (std::size_t i = 0; i < v.size(); ++i)
                   v[i] = static_cast<float>(r.sign() * (i % 2 ? 1e-4 + 1e-3 * r.uniform() : 1e3 + 1e3 * r.uniform()));
                 return v;
               },
               big_small_mix());
  }

  void tiny_values() {
    add_groups("bf16_subnormal",
               "bf16 subnormals m * 2^-133; every other group also holds one normal 2^-100", 8,
               [](Rng& r, std::int64_t size, std::int64_t g) {
                 Content v(static_cast<std::size_t>(size));
                 for (float& x : v) x = static_cast<float>(r.sign() * static_cast<double>(1 + r.below(127)) * pow2(-133));
                 if (g % 2) v[static_cast<std::size_t>(r.below(size))] = static_cast<float>(pow2(-100));
                 return v;
               },
               bf16_subnormals());
    add_groups("tiny_1e-38", "groups of +/-1e-38; every other group also holds one +/-1.0", 4,
               [](Rng& r, std::int64_t size, std::int64_t g) {
                 Content v(static_cast<std::size_t>(size));
                 for (float& x : v) x = static_cast<float>(r.sign()) * 1e-38f;
                 if (g % 2) v[static_cast<std::size_t>(r.below(size))] = static_cast<float>(r.sign());
                 return v;
               },
               elements_equal("tiny_1e-38", 1e-38f));
    add_groups("tiny_2^-110", "groups whose amax is 2^-110", 4,
               [](Rng& r, std::int64_t size, std::int64_t) { return anchored_content(r, size, pow2(-110)); },
               group_amax_equals("tiny_2^-110", 0x1p-110f));
  }

  void non_finite() {
    for (NonFinite kind : {NonFinite::pos_inf, NonFinite::neg_inf, NonFinite::nan})
      for (Position pos : {Position::first, Position::middle, Position::last}) {
        const std::string name = std::string(non_finite_name(kind)) + "_" + position_name(pos);
        const float bad = kind == NonFinite::nan       ? std::numeric_limits<float>::quiet_NaN()
                          : kind == NonFinite::pos_inf ? std::numeric_limits<float>::infinity()
                                                       : -std::numeric_limits<float>::infinity();
        const std::int64_t n_groups = Groups(c_, shape_for_groups(4)).count();
        const std::int64_t host = Rng(stream(name + "/host")).below(n_groups);
        Case& k = add_groups(
            name,
            std::string(finite_only() ? "rejection: " : "") + "randn with one " + non_finite_name(kind) + " at the " +
                position_name(pos) + " position of one group",
            4,
            [=](Rng& r, std::int64_t size, std::int64_t g) {
              Content v = normal_fill(1.0)(r, size, g);
              if (g == host) {
                const std::int64_t i = pos == Position::first ? 0 : pos == Position::middle ? size / 2 : size - 1;
                v[static_cast<std::size_t>(i)] = bad;
              }
              return v;
            },
            non_finite_at(kind, pos));
        if (finite_only()) k.expect_error = ErrorKind::bad_input;
      }
  }

  void saturation_case() {
    Fill fill;
    std::string what;
    if (c_.family == Family::mx) {
      // amax in (max, 2^(emax+1)) * 2^k: the floor scale maps it past the element max.
      const ElemTraits& t = elem_traits(c_.element);
      const double hi = pow2(t.emax + 1);
      Content band;
      for (double f : {1.0 / 32, 1.0 / 8, 1.0 / 2, 7.0 / 8}) {
        float b = static_cast<float>(t.max + (hi - t.max) * f);
        if (working_fraction_bits(c_, dtype_) == 7) b = round_bf16(b);
        if (b > t.max && b < hi) band.push_back(b);
      }
      what = "groups with amax and three more elements in (element max, 2^(emax+1)) * 2^k";
      fill = [band, t](Rng& r, std::int64_t size, std::int64_t) {
        const int k = static_cast<int>(r.below(21)) - 10;
        Content v = uniform_content(r, size, pow2(t.emax + k) * 0.9);
        const auto n_band = static_cast<std::int64_t>(band.size());
        for (int j = 0; j < 4; ++j) {
          const double b = band[static_cast<std::size_t>(r.below(n_band))];
          v[static_cast<std::size_t>(r.below(size))] = static_cast<float>(r.sign() * b * pow2(k));
        }
        return v;
      };
    } else if (c_.family == Family::hif4) {
      what = "blocks with max in [7, 8) * 2^k, where the E6M2 scale rounds down and codes clamp at 7";
      fill = [](Rng& r, std::int64_t size, std::int64_t g) {
        const double k = pow2(static_cast<int>(r.below(21)) - 10);
        Content v = uniform_content(r, size, 3.0 * k);
        v[static_cast<std::size_t>(r.below(size))] = static_cast<float>(r.sign() * (7.0 + (g % 8 + 0.5) / 8.0) * k);
        return v;
      };
    } else if (c_.family == Family::nvfp4) {
      what = "blocks of amax 7 * 2^k: the E4M3 scale 1.125 * 2^k maps 7 to 6.22, saturated to 6 (group 0 pins the "
             "tensor scale to 1)";
      fill = pinned([](Rng& r, std::int64_t size, std::int64_t) {
        return anchored_content(r, size, 7.0 * pow2(static_cast<int>(r.below(9)) - 4));
      });
    } else if (c_.family == Family::fp8_scaled) {
      // amax whose scale rounds so that amax scaled by it passes the element max.
      const Contract c = c_;
      const float top = top_code(c);
      what = "groups with +/-amax where amax scaled by the group's fp32 scale passes the element max";
      auto passes = [c, top](float amax) {
        const float s = fp8_nominal_scale(c, amax);
        const float q = c.scale_kind == ScaleKind::multiplier        ? amax * s
                        : c.fp8_quotient == Fp8Quotient::reciprocal ? amax * (1.0f / s)
                                                                    : amax / s;
        return q > top;
      };
      auto draw = [top](Rng& r) {
        return static_cast<float>(r.uniform(0.5, 2.0) * pow2(static_cast<int>(r.below(9)) - 4) * top);
      };
      // Power-of-two scales rounded toward the safe side (scale_pow2) never let amax pass the
      // max: then there is no such group to build.
      Rng probe(stream("saturation/feasible"));
      bool feasible = false;
      for (int tries = 0; tries < 1000 && !feasible; ++tries) feasible = passes(draw(probe));
      if (!feasible) return;
      fill = [passes, draw](Rng& r, std::int64_t size, std::int64_t) {
        float amax = 1.0f;
        for (int tries = 0; tries < 1000; ++tries) {
          amax = draw(r);
          if (passes(amax)) break;
        }
        Content v = uniform_content(r, size, amax * 0.9);
        v[static_cast<std::size_t>(r.below(size))] = amax;
        v[static_cast<std::size_t>(r.below(size))] = -amax;
        return v;
      };
    } else {
      // amax whose stored scale rounds below amax / 127, so amax / scale > 127.
      const Contract c = c_;
      what = "groups with +/-amax where the stored scale < amax / 127 (quotient just above 127)";
      fill = [c](Rng& r, std::int64_t size, std::int64_t) {
        float amax = 1.0f;
        for (int tries = 0; tries < 1000; ++tries) {
          amax = static_cast<float>(r.uniform(0.5, 2.0) * pow2(static_cast<int>(r.below(9)) - 4));
          if (static_cast<double>(amax) > 127.0 * int8_nominal_scale(c, amax)) break;
        }
        Content v = uniform_content(r, size, amax * 0.9);
        v[static_cast<std::size_t>(r.below(size))] = amax;
        v[static_cast<std::size_t>(r.below(size))] = -amax;
        return v;
      };
    }
    add_groups("saturation", what, 8, fill, saturation());
  }

  void tail_case() {
    // The tail axis is 1 in every convention: K of [T, K] and S of (B, S, N, D).
    const Shape shape = lab_family(c_.family).tail_shape(c_);
    const std::int64_t len = group_len();
    const ScaleGrain& grain = c_.granularity;
    const bool fp8 = c_.family == Family::fp8_scaled;
    const std::int64_t period = c_.family == Family::int8_block                         ? c_.token_block
                                : fp8 && grain.kind == Granularity::head_block          ? grain.rows
                                : fp8 && grain.kind == Granularity::tile                ? grain.cols
                                : fp8 && grain.kind == Granularity::group               ? len
                                : c_.family == Family::int8_token || fp8                ? 16
                                                                                        : len;
    const std::int64_t tail_from = shape[1] / period * period;  // the partial part along axis 1
    Rng r(stream("tail"));
    Content v(static_cast<std::size_t>(shape_numel(shape)));
    const std::int64_t stride = contiguous_strides(shape)[1];
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::int64_t along = (static_cast<std::int64_t>(i) / stride) % shape[1];
      v[i] = static_cast<float>(r.normal() * (along >= tail_from ? 4.0 : 1.0));  // a tail with its own scale
    }
    const bool rejects = (c_.family == Family::mx && c_.tail == TailRule::reject) ||
                         c_.family == Family::int8_group || c_.family == Family::hif4 || c_.family == Family::nvfp4;
    std::string what = c_.family == Family::int8_block   ? "S % token_block != 0"
                       : c_.family == Family::int8_token ? "Q = 997 (prime: Q % 16 != 0)"
                                                         : "last dimension % group != 0";
    if (fp8) what = fp8_tail_words();
    Case& k = add("tail", std::string(rejects ? "rejection: " : "") + what + "; the partial part holds larger values",
                  shape, dtype_, v, tail());
    if (rejects) k.expect_error = ErrorKind::bad_argument;
  }

  // fp8.scaled tails (lab_family): domains cut short by the tensor's edge.
  std::string fp8_tail_words() const {
    switch (c_.granularity.kind) {
      case Granularity::group: return "last dimension % group != 0";
      case Granularity::tile: return "2-D tile tails: rows % M != 0 and columns % N != 0";
      case Granularity::head_block: return "head_block tails: S % T != 0";
      case Granularity::tensor:
      case Granularity::row: break;
    }
    return "C = 997 (prime: C % 16 != 0)";
  }

  void max_outside_first16() {
    Case& k = add_groups("max_outside_first16", "each group's max |x| (in [2, 3)) placed past its first 16 elements",
                         16,
                         [](Rng& r, std::int64_t size, std::int64_t) {
                           Content v = uniform_content(r, size, 1.0);
                           const std::int64_t threshold = size > 16 ? 16 : size / 2;
                           v[static_cast<std::size_t>(threshold + r.below(size - threshold))] =
                               static_cast<float>(r.sign() * (2.0 + r.uniform()));
                           return v;
                         },
                         max_outside_first_vector());
    k.target->min_hits = Groups(c_, k.input.shape()).count();
  }

  void amax_sweep_case() {
    const std::vector<double> amaxes = lab_family(c_.family).sweep_amaxes(c_);
    std::string list;
    for (double a : amaxes) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%s%g", list.empty() ? "" : ", ", a);
      list += buf;
    }
    add_groups("amax_sweep", "one group per amax: " + list, static_cast<std::int64_t>(amaxes.size()),
               [amaxes](Rng& r, std::int64_t size, std::int64_t g) {
                 return anchored_content(r, size, amaxes[static_cast<std::size_t>(g) % amaxes.size()]);
               },
               amax_sweep());
  }

  void negative_zero_case() {
    add_groups("negative_zero", "groups of -0.0, -2^-30 and uniform values under a +/-1 max", 4,
               [](Rng& r, std::int64_t size, std::int64_t) {
                 Content v = uniform_content(r, size, 0.5);
                 for (std::int64_t i = 1; i < size; i += 2) v[static_cast<std::size_t>(i)] = i % 4 == 1 ? -0.0f : -0x1p-30f;
                 v[0] = static_cast<float>(r.sign());
                 return v;
               },
               negative_zero());
  }

  void family_extras() {
    if (c_.family == Family::mx) marker();
    if (c_.family == Family::fp8_scaled) fp8_extras();
    if (c_.family == Family::nvfp4) nvfp4_extras();
    if (c_.family == Family::mx && c_.prequant == Prequant::bf16) {
      add_groups("randn_f32", "standard normal values given as f32 (the contract rounds them to bf16)",
                 random_groups(), normal_fill(1.0), std::nullopt, DType::f32);
      add_groups("f32_bf16_binade_cross",
                 "f32 groups whose amax 2^(k+1) * (1 - 2^-10) rounds up a binade under bf16 prequant", 8,
                 [](Rng& r, std::int64_t size, std::int64_t) {
                   const int k = static_cast<int>(r.below(21)) - 10;
                   Content v = uniform_content(r, size, pow2(k));
                   v[static_cast<std::size_t>(r.below(size))] = static_cast<float>(r.sign() * pow2(k + 1) * (1.0 - 0x1p-10));
                   return v;
                 },
                 bf16_binade_cross(), DType::f32);
    }
    if (c_.family == Family::int8_token) {
      add("empty_rows", "R = 0: a valid empty tensor", Shape{0, kRowLen}, dtype_, {}, empty_rows());
      add_groups("randn_f16", "standard normal values given as f16", random_groups(), normal_fill(1.0), std::nullopt,
                 DType::f16);
    }
    if (c_.family == Family::hif4) {
      add_groups("randn_bf16", "standard normal values given as bf16", random_groups(), normal_fill(1.0),
                 std::nullopt, DType::bf16);
      add_groups("randn_f16", "standard normal values given as f16", random_groups(), normal_fill(1.0), std::nullopt,
                 DType::f16);
    }
  }

  // contracts §9.1's check values and edges, in every scale domain.
  void fp8_extras() {
    const float top = top_code(c_);
    add_groups("amax_450", "groups of amax 450 (scale fp32(450 / 448) = 1.00446426868438720703125 for E4M3: not a "
                           "power of two)",
               4, [](Rng& r, std::int64_t size, std::int64_t) { return anchored_content(r, size, 450.0); },
               group_amax_equals("amax_450", 450.0f));
    // E4M3: amax 448, x = 1.0625 (between 1.0 and 1.125); E5M2: amax 57344, x = 1.125.
    const float tie = static_cast<float>(1.0 + pow2(-elem_traits(c_.element).mbits - 1));
    add_groups("amax_max_tie", "groups of amax = the element max (448 for E4M3: scale 1.0) whose other elements are "
                               "+/-(1 + half a step) (1.0625 for E4M3: a tie broken to even), +/-3 and -0.001",
               4,
               [top, tie](Rng& r, std::int64_t size, std::int64_t) {
                 const float pattern[] = {tie, -tie, 3.0f, -3.0f, -0.001f};
                 Content v(static_cast<std::size_t>(size));
                 for (std::size_t i = 0; i < v.size(); ++i) v[i] = pattern[i % 5];
                 v[static_cast<std::size_t>(r.below(size))] = top;
                 return v;
               },
               exact_ties());
    // Values on the element format's subnormal grid, its midpoints and the normal boundary,
    // under an anchor that makes the scale 2^k.
    const ElemTraits& t = elem_traits(c_.element);
    const double min_normal = pow2(1 - t.bias), step = min_normal / pow2(t.mbits);
    add_groups("subnormal_edge",
               "groups of amax max * 2^k whose other elements scale onto the element format's subnormal codes, their "
               "midpoints and the smallest normal +/- half a step",
               8,
               [top, min_normal, step](Rng& r, std::int64_t size, std::int64_t) {
                 const double k = pow2(static_cast<int>(r.below(9)) - 4);
                 Content v(static_cast<std::size_t>(size));
                 for (std::size_t i = 0; i < v.size(); ++i) {
                   const double m = static_cast<double>(i % 19) / 2.0;  // 0, 1/2, 1, ... 9 steps
                   const double y = i % 19 == 18 ? min_normal + step / 2.0 : m * step;
                   v[i] = static_cast<float>(r.sign() * y * k);
                 }
                 v[static_cast<std::size_t>(r.below(size))] = static_cast<float>(top * k);
                 return v;
               },
               scaled_subnormals());
  }

  // contracts §9.2's check values and edges. Group 0 pins the tensor scale (see pinned).
  void nvfp4_extras() {
    // With the tensor scale pinned (t = 1, te's S_enc = 1) a block's unrounded scale is amax / 6
    // (te: amax * fp32(1/6)): the amax whose unrounded scale is exactly the midpoint, found
    // among the floats next to 6 * mid.
    const Contract c = c_;
    auto tie_amax = [c, pin = pin_amax()](float mid) {
      const float t = nvfp4_nominal_tensor_scale(c, pin);
      float a = 6.0f * mid;
      for (int step = 0; step < 8 && nvfp4_unrounded_block_scale(c, a, t) != mid; ++step)
        a = std::nextafter(a, nvfp4_unrounded_block_scale(c, a, t) < mid ? INFINITY : 0.0f);
      return a;
    };
    add_groups("block_scale_ties", "blocks whose amax / 6 is the midpoint of two E4M3 values (the block scale's own tie)",
               16,
               pinned([tie_amax](Rng& r, std::int64_t size, std::int64_t) {
                 const std::vector<float>& e4m3 = elem_value_table(ElemFormat::e4m3);
                 // Normal E4M3 values from 2^-6 (code 8) to 256: their midpoints times 6 are exact.
                 const auto i = static_cast<std::size_t>(8 + r.below(112 - 8));
                 return anchored_content(r, size, tie_amax((e4m3[i] + e4m3[i + 1]) / 2.0f));
               }),
               block_scale_ties());
    add_groups("block_scale_clamp", "blocks of amax below 6 * 2^-6 (the scale clamps to 2^-6, code 0x08), all-zero "
                                    "blocks among them, and negative values that round to -0",
               16,
               pinned([](Rng& r, std::int64_t size, std::int64_t g) {
                 if (g % 4 == 1) return Content(static_cast<std::size_t>(size), 0.0f);
                 Content v = anchored_content(r, size, 0.09375 * pow2(-static_cast<int>(r.below(12))));
                 v[static_cast<std::size_t>(r.below(size))] = -0x1p-40f;
                 return v;
               }),
               block_scale_clamped());
    // The tensor scale at its extremes: amax / 2688 large, tiny, and subnormal in fp32 (whose
    // reciprocal overflows).
    struct Extreme {
      const char* name;
      double amax;
      const char* words;
    };
    for (const Extreme& e : {Extreme{"tensor_amax_huge", 3.0e38, "3e38 (t = 1.1e35)"},
                             Extreme{"tensor_amax_tiny", 1.0e-30, "1e-30 (t = 3.7e-34)"},
                             Extreme{"tensor_amax_subnormal", 1.0e-36, "1e-36 (t = 3.7e-40 is subnormal; 1 / t overflows)"}}) {
      const double amax = e.amax;
      add_groups(e.name, std::string("a tensor of max |x| ") + e.words + ", blocks spread over 2^-20 of it", 8,
                 [amax](Rng& r, std::int64_t size, std::int64_t g) {
                   return anchored_content(r, size, g == 0 ? amax : amax * pow2(-static_cast<int>(r.below(21))));
                 },
                 tensor_amax_between(e.name, static_cast<float>(amax), static_cast<float>(amax)));
    }
  }

  // Scale-layout probe: group g has amax 2^(emax + g - 12), so its scale byte 115 + g is unique
  // and must sit at the group's flat offset in the contract's layout.
  void marker() {
    const int emax = elem_traits(c_.element).emax;
    Case& k = add_groups("marker", "layout probe: group g has amax 2^(emax + g - 12), a unique scale byte 115 + g", 24,
                         [emax](Rng& r, std::int64_t size, std::int64_t g) {
                           return anchored_content(r, size, pow2(emax + static_cast<int>(g) - 12));
                         },
                         scale_marker());
    k.target->min_hits = Groups(c_, k.input.shape()).count();
  }

  static constexpr std::int64_t kRowLen = kCaseRowLen;
  static constexpr std::int64_t kHeadDim = kCaseHeadDim;

  const Contract& c_;
  std::uint64_t seed_;
  DType dtype_;
  std::vector<Case> cases_;
};

}  // namespace

std::vector<Case> adversarial_cases(const Contract& c, std::uint64_t seed) {
  validate(c);
  if (c.family == Family::hif4 && c.qdim != -1)
    fail(ErrorKind::bad_argument, "the conformance cases quantize HiF4 along the last axis (qdim = -1), got qdim " +
                                      std::to_string(c.qdim));
  if (c.family == Family::pool) return pool_cases(c, seed);
  return Generator(c, seed).all();
}

}  // namespace qexact::conformance
