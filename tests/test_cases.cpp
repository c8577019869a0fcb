// The adversarial case generator (contracts §8.4): the full list per family, every directed
// case hitting its target (recounted from the input, and key properties re-derived here by
// hand), determinism across runs and seeds, and detection of a missed target.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <iostream>
#include <set>

#include "conformance/cases.hpp"
#include "conformance/predicates.hpp"
#include "qexact/contract.hpp"
#include "qexact/formats/element.hpp"
#include "qexact/pool.hpp"

namespace qexact::conformance {
namespace {

constexpr std::uint64_t kSeed = 20261130;

bool finite_only(const Contract& c) {
  if (c.family == Family::fp8_scaled || c.family == Family::nvfp4) return c.nonfinite_input == NonFiniteInput::reject;
  return c.family == Family::int8_block || c.family == Family::int8_token || c.family == Family::int8_group;
}

std::set<std::string> expected_names(const Contract& c) {
  std::set<std::string> names = {"randn",        "uniform",        "all_equal",     "ties",
                                 "amax_pow2",    "amax_above_pow2", "all_zero",     "all_negative",
                                 "big_small_mix", "bf16_subnormal", "tiny_1e-38",    "tiny_2^-110",
                                 "saturation",   "tail",           "max_outside_first16", "amax_sweep",
                                 "negative_zero"};
  for (const char* kind : {"pos_inf", "neg_inf", "nan"})
    for (const char* pos : {"first", "middle", "last"}) names.insert(std::string(kind) + "_" + pos);
  if (c.family == Family::mx) names.insert("marker");
  if (c.family == Family::mx && c.prequant == Prequant::bf16) {
    names.insert("randn_f32");
    names.insert("f32_bf16_binade_cross");
  }
  if (c.family == Family::int8_token) {
    names.insert("empty_rows");
    names.insert("randn_f16");
  }
  if (c.family == Family::hif4) {
    names.insert("randn_bf16");
    names.insert("randn_f16");
  }
  if (c.family == Family::fp8_scaled)
    for (const char* n : {"amax_450", "amax_max_tie", "subnormal_edge"}) names.insert(n);
  // A descale rounded up to a power of two never lets amax pass the element max: no group can
  // saturate, and the case is left out rather than built without its target.
  if (c.family == Family::fp8_scaled && c.scale_kind == ScaleKind::descale && c.scale_pow2 == ScalePow2::up)
    names.erase("saturation");
  if (c.family == Family::nvfp4)
    for (const char* n : {"block_scale_ties", "block_scale_clamp", "tensor_amax_huge", "tensor_amax_tiny",
                          "tensor_amax_subnormal"})
      names.insert(n);
  return names;
}

const Case& find_case(const std::vector<Case>& cases, const std::string& name) {
  for (const Case& k : cases)
    if (k.name == name) return k;
  throw std::runtime_error("no case " + name);
}

bool same_input(const Case& a, const Case& b) {
  return a.input.dtype() == b.input.dtype() && a.input.shape() == b.input.shape() &&
         (a.input.nbytes() == 0 || std::memcmp(a.input.raw(), b.input.raw(), a.input.nbytes()) == 0);
}

// The (row, group) groups of a [T, K] MX input, by hand: values and their group amax.
std::vector<std::vector<float>> row_groups(const Tensor& t, std::int64_t block) {
  const std::vector<float> v = to_f32_vector(t.view());
  const std::int64_t k = t.shape()[1];
  std::vector<std::vector<float>> out;
  for (std::int64_t row = 0; row < t.shape()[0]; ++row)
    for (std::int64_t j = 0; j < k; j += block)
      out.emplace_back(v.begin() + row * k + j, v.begin() + row * k + std::min(k, j + block));
  return out;
}

float amax_of(const std::vector<float>& g) {
  float m = 0.0f;
  for (float x : g) m = std::max(m, std::fabs(x));
  return m;
}

TEST(Cases, EveryPresetHasTheFullListOfSection84) {
  std::cout << "seed " << kSeed << "\n";
  for (const std::string& preset : preset_names()) {
    SCOPED_TRACE(preset);
    const Contract c = make_preset(preset);
    if (c.family == Family::pool) continue;  // not a quantizer: its own cases, PoolCases below
    const std::vector<Case> cases = adversarial_cases(c, kSeed);
    std::set<std::string> names;
    for (const Case& k : cases) EXPECT_TRUE(names.insert(k.name).second) << "duplicate case " << k.name;
    EXPECT_EQ(names, expected_names(c));
    for (const Case& k : cases) {
      const bool undirected = k.name.rfind("randn", 0) == 0 || k.name == "uniform";
      EXPECT_EQ(k.target.has_value(), !undirected) << k.name;
      EXPECT_FALSE(k.description.empty()) << k.name;
    }
  }
}

TEST(Cases, EveryDirectedCaseHitsItsTargetRecountedFromItsInput) {
  std::cout << "seed " << kSeed << "\n";
  for (const std::string& preset : preset_names()) {
    SCOPED_TRACE(preset);
    const Contract c = make_preset(preset);
    for (const Case& k : adversarial_cases(c, kSeed)) {
      if (!k.target) continue;
      const std::int64_t hits = k.target->count(c, k.input.view(), Observed{});
      EXPECT_EQ(hits, k.hits) << k.name;
      EXPECT_GE(hits, k.target->min_hits) << k.name << ": " << k.target->description;
      EXPECT_GE(k.target->min_hits, 1) << k.name;
    }
  }
}

TEST(Cases, RejectionCasesFollowTheContract) {
  for (const std::string& preset : preset_names()) {
    SCOPED_TRACE(preset);
    const Contract c = make_preset(preset);
    if (c.family == Family::pool) continue;  // PoolCases below
    for (const Case& k : adversarial_cases(c, kSeed)) {
      const bool non_finite = k.name.rfind("pos_inf", 0) == 0 || k.name.rfind("neg_inf", 0) == 0 ||
                              k.name.rfind("nan_", 0) == 0;
      const bool tail_rejected = k.name == "tail" && ((c.family == Family::mx && c.tail == TailRule::reject) ||
                                                      c.family == Family::int8_group || c.family == Family::hif4 ||
                                                      c.family == Family::nvfp4);
      if (non_finite && finite_only(c)) {
        ASSERT_TRUE(k.expect_error.has_value()) << k.name;
        EXPECT_EQ(*k.expect_error, ErrorKind::bad_input) << k.name;
      } else if (tail_rejected) {
        ASSERT_TRUE(k.expect_error.has_value()) << k.name;
        EXPECT_EQ(*k.expect_error, ErrorKind::bad_argument) << k.name;
      } else {
        EXPECT_FALSE(k.expect_error.has_value()) << k.name;
      }
    }
  }
}

// Properties re-derived by hand from the raw input, independent of predicates.cpp.
TEST(Cases, KeyPropertiesHoldByIndependentCheck) {
  std::cout << "seed " << kSeed << "\n";
  {
    const Contract c = make_preset("mxfp8.ascend");
    const std::vector<Case> cases = adversarial_cases(c, kSeed);
    EXPECT_EQ(find_case(cases, "ties").input.dtype(), DType::bf16);
    EXPECT_EQ(find_case(cases, "randn_f32").input.dtype(), DType::f32);

    // Max outside the first 16 elements in every group.
    for (const auto& g : row_groups(find_case(cases, "max_outside_first16").input, 32)) {
      const auto arg = std::max_element(g.begin(), g.end(), [](float a, float b) { return std::fabs(a) < std::fabs(b); });
      EXPECT_GE(arg - g.begin(), 16);
    }
    // Marker: distinct power-of-two amaxes, one per group.
    std::set<float> amaxes;
    const auto marker = row_groups(find_case(cases, "marker").input, 32);
    for (const auto& g : marker) {
      int e = 0;
      EXPECT_EQ(std::frexp(amax_of(g), &e), 0.5f);
      amaxes.insert(amax_of(g));
    }
    EXPECT_EQ(amaxes.size(), marker.size());
    // The seed's discriminating amaxes are all swept.
    std::set<float> swept;
    for (const auto& g : row_groups(find_case(cases, "amax_sweep").input, 32)) swept.insert(amax_of(g));
    for (float a : {0.4375f, 3.5f, 224.0f, 448.0f, 896.0f, 7168.0f, 458752.0f, 450.0f, 1000.0f, 230.0f})
      EXPECT_TRUE(swept.count(a)) << a;
    // Every E4M3 midpoint appears with both signs in two exponent domains, by brute force
    // over the codes: y is a tie when it lies exactly halfway between consecutive codes.
    std::set<double> ties;
    for (const auto& g : row_groups(find_case(cases, "ties").input, 32)) {
      int e = 0;
      std::frexp(amax_of(g), &e);
      const double scale = std::ldexp(1.0, e - 1 - 8);
      for (float x : g)
        for (int code = 0; code < 0x7E; ++code) {
          const double lo = elem_decode(ElemFormat::e4m3, static_cast<std::uint8_t>(code));
          const double hi = elem_decode(ElemFormat::e4m3, static_cast<std::uint8_t>(code + 1));
          if (std::fabs(x) / scale == (lo + hi) / 2) ties.insert(x);
        }
    }
    EXPECT_EQ(ties.size(), 2u * 2u * 126u);  // 126 midpoints, two signs, two domains
    // Saturation: elements of (448, 512) * 2^k in their group's binade.
    int saturating = 0;
    for (const auto& g : row_groups(find_case(cases, "saturation").input, 32)) {
      int e = 0;
      std::frexp(amax_of(g), &e);
      for (float x : g) saturating += std::fabs(x) / std::ldexp(1.0, e - 1 - 8) > 448.0 ? 1 : 0;
    }
    EXPECT_GE(saturating, 8);
    // Tail: not a multiple of the block, the partial group with its own (larger) values.
    EXPECT_NE(find_case(cases, "tail").input.shape()[1] % 32, 0);
    // Non-finite positions: the NaN sits at index 0 / 16 / 31 of its group.
    for (const auto& [name, index] : {std::pair{"nan_first", 0}, {"nan_middle", 16}, {"nan_last", 31}}) {
      int found = 0;
      for (const auto& g : row_groups(find_case(cases, name).input, 32))
        for (std::size_t i = 0; i < g.size(); ++i)
          if (std::isnan(g[i])) found += static_cast<int>(i) == index ? 1 : 1000;
      EXPECT_EQ(found, 1) << name;
    }
  }
  {
    // int8: exact .5 ties of x / (amax / 127), both signs, two domains.
    const Contract c = make_preset("int8.token.blaze");
    const std::vector<Case> cases = adversarial_cases(c, kSeed);
    const Tensor& t = find_case(cases, "ties").input;
    const std::vector<float> v = to_f32_vector(t.view());
    const std::int64_t q = t.shape()[1];
    std::set<float> ties;
    for (std::int64_t row = 0; row < t.shape()[0]; ++row) {
      float amax = 0.0f;
      for (std::int64_t j = 0; j < q; ++j) amax = std::max(amax, std::fabs(v[static_cast<std::size_t>(row * q + j)]));
      const float scale = amax / 127.0f;
      for (std::int64_t j = 0; j < q; ++j) {
        const double twice = 2.0 * v[static_cast<std::size_t>(row * q + j)] / scale;
        if (twice == std::floor(twice) && std::fmod(std::fabs(twice), 2.0) == 1.0)
          ties.insert(v[static_cast<std::size_t>(row * q + j)]);
      }
    }
    EXPECT_EQ(ties.size(), 2u * 2u * 127u);
    EXPECT_NE(find_case(cases, "tail").input.shape()[1] % 16, 0);
    EXPECT_EQ(find_case(cases, "empty_rows").input.shape()[0], 0);
  }
  {
    const Contract c = make_preset("int8.block.ascend");
    const std::vector<Case> cases = adversarial_cases(c, kSeed);
    const Shape& s = find_case(cases, "tail").input.shape();
    ASSERT_EQ(s.size(), 4u);
    EXPECT_NE(s[1] % 64, 0);
    EXPECT_TRUE(find_case(cases, "nan_middle").expect_error.has_value());
  }
}

TEST(Cases, SameSeedGivesTheSameBytes) {
  std::cout << "seed " << kSeed << "\n";
  for (const std::string& preset : preset_names()) {
    SCOPED_TRACE(preset);
    const Contract c = make_preset(preset);
    const std::vector<Case> a = adversarial_cases(c, kSeed), b = adversarial_cases(c, kSeed);
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(same_input(a[i], b[i])) << a[i].name;
    const std::vector<Case> x = activation_set(c), y = activation_set(c);
    ASSERT_EQ(x.size(), y.size());
    for (std::size_t i = 0; i < x.size(); ++i) EXPECT_TRUE(same_input(x[i], y[i])) << x[i].name;
  }
}

TEST(Cases, DifferentSeedsGiveDifferentInputs) {
  std::cout << "seeds " << kSeed << ", " << kSeed + 1 << "\n";
  for (const std::string& preset : preset_names()) {
    SCOPED_TRACE(preset);
    const Contract c = make_preset(preset);
    const std::vector<Case> a = adversarial_cases(c, kSeed), b = adversarial_cases(c, kSeed + 1);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_FALSE(same_input(find_case(a, "randn"), find_case(b, "randn")));
    std::size_t differing = 0;
    for (std::size_t i = 0; i < a.size(); ++i) differing += same_input(a[i], b[i]) ? 0 : 1;
    EXPECT_GE(differing, a.size() / 2);
  }
}

TEST(Cases, AMissedTargetIsReported) {
  for (const char* preset : {"mxfp8.ascend", "int8.block.ascend", "int8.token.blaze", "q8_0.ggml", "hif4"}) {
    SCOPED_TRACE(preset);
    const Contract c = make_preset(preset);
    std::vector<Case> cases = adversarial_cases(c, kSeed);
    for (const char* name : {"ties", "amax_pow2", "saturation", "max_outside_first16", "bf16_subnormal"}) {
      Case k = find_case(cases, name);
      // Same shape and dtype, every element one value that is no tie, no 2^k, not past the
      // largest code (E4M3: 1.25 -> 320 at scale 2^-8; int8: 127 -> scale 1; HiF4: 127 -> code 6),
      // so the max is at index 0 and there is no subnormal.
      const float v = c.family == Family::mx ? 1.25f : 127.0f;
      k.input = from_f32_vector(std::vector<float>(static_cast<std::size_t>(k.input.numel()), v), k.input.shape(),
                                k.input.dtype());
      try {
        check_target(c, k);
        ADD_FAILURE() << name << ": a case missing its target was not reported";
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::bad_input);
        EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
        EXPECT_EQ(k.hits, 0) << name;
      }
    }
    // A target above what the input holds is a miss too.
    Case k = find_case(cases, "amax_pow2");
    k.target->min_hits = k.hits + 1;
    EXPECT_THROW(check_target(c, k), Error);
    // Undirected cases have nothing to miss.
    Case plain = find_case(cases, "randn");
    EXPECT_NO_THROW(check_target(c, plain));
  }
}

TEST(Cases, ActivationSetIsFiniteAndShapedPerFamily) {
  for (const std::string& preset : preset_names()) {
    SCOPED_TRACE(preset);
    const Contract c = make_preset(preset);
    const std::vector<Case> acts = activation_set(c);
    ASSERT_GE(acts.size(), 3u);
    for (const Case& k : acts) {
      EXPECT_FALSE(k.target.has_value());
      const std::vector<float> v = to_f32_vector(k.input.view());
      EXPECT_TRUE(std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); })) << k.name;
      const Shape& s = k.input.shape();
      if (c.family == Family::int8_block) {
        ASSERT_EQ(s.size(), 4u);
        EXPECT_EQ(s[1] % c.token_block, 0);
      } else if (c.family == Family::fp8_scaled && c.granularity.kind == Granularity::head_block) {
        ASSERT_EQ(s.size(), 4u);
        EXPECT_EQ(s[1] % c.granularity.rows, 0);
      } else {
        ASSERT_EQ(s.size(), 2u);
        EXPECT_EQ(s[1] % 64, 0);
      }
      // Heavy tails and outliers: the largest value is far above the typical one.
      float amax = 0.0f;
      for (float x : v) amax = std::max(amax, std::fabs(x));
      EXPECT_GT(amax, 10.0f) << k.name;
    }
  }
}

TEST(Rng, PortableSequence) {
  // Golden values of xoshiro256** seeded by splitmix64 and of the polar normal sampler with the
  // portable log, computed independently (Python, IEEE doubles).
  Rng zero(0);
  EXPECT_EQ(zero.next(), 0x99ec5f36cb75f2b4ull);
  EXPECT_EQ(zero.next(), 0xbf6e1f784956452aull);
  EXPECT_EQ(zero.next(), 0x1a5f849d4933e6e0ull);
  Rng r(20261130);
  EXPECT_EQ(std::bit_cast<std::uint64_t>(r.normal()), 13828521203533556586ull);
  EXPECT_EQ(std::bit_cast<std::uint64_t>(r.normal()), 4597707749169158618ull);
  EXPECT_EQ(std::bit_cast<std::uint64_t>(r.normal()), 13830368174497742729ull);
  // The sampler is a standard normal (moments over 200000 draws).
  Rng s(1);
  double sum = 0.0, sum2 = 0.0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double z = s.normal();
    sum += z;
    sum2 += z * z;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sum2 / n, 1.0, 0.02);
}

// The pooled mean's cases: undirected, every one a valid (B, S, F...) input with a tail cell,
// and exactly the non-finite ones rejected, by both engines, as bad input.
TEST(PoolCases, ShapesTailsAndRejections) {
  const Contract c = make_preset("pool.mean");
  const std::vector<Case> cases = adversarial_cases(c, kSeed);
  std::set<std::string> names;
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    EXPECT_TRUE(names.insert(k.name).second);
    EXPECT_FALSE(k.description.empty());
    EXPECT_FALSE(k.target.has_value());
    ASSERT_GE(k.input.shape().size(), 2u);
    const bool non_finite = k.name == "nan_middle" || k.name == "inf_last";
    EXPECT_EQ(k.expect_error.has_value(), non_finite);
    for (const RunOptions& o : {RunOptions{Engine::reference, 1}, RunOptions{Engine::fast, 2}}) {
      if (non_finite) {
        try {
          pooled_block_mean(k.input.view(), c.pool, c.pool_out, o);
          ADD_FAILURE() << "accepted by " << engine_name(o.engine);
        } catch (const Error& e) {
          EXPECT_EQ(e.kind(), ErrorKind::bad_input);
        }
      } else {
        EXPECT_NO_THROW(pooled_block_mean(k.input.view(), c.pool, c.pool_out, o));
      }
    }
  }
  EXPECT_EQ(cases.size(), 14u);
  std::int64_t with_tail = 0;
  for (const Case& k : cases) with_tail += k.input.shape()[1] % c.pool != 0 ? 1 : 0;
  EXPECT_GE(with_tail, 10);
}

}  // namespace
}  // namespace qexact::conformance
