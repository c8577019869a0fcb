// The discriminating probes (conformance/probes.hpp): every probe hits its target under its
// contract, the expected probes exist per family, they are deterministic, and the parameters
// they discriminate really change bytes where they say.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <set>

#include "conformance/emulate.hpp"
#include "conformance/contract_output.hpp"
#include "conformance/probes.hpp"
#include "fast_test_util.hpp"
#include "io/npy.hpp"
#include "preset_param.hpp"
#include "qexact/formats/bf16.hpp"
#include "qexact/formats/e8m0.hpp"
#include "qexact/formats/element.hpp"

namespace qexact::conformance {
namespace {

std::set<std::string> names_of(const std::vector<Case>& probes) {
  std::set<std::string> out;
  for (const Case& k : probes) out.insert(k.name);
  return out;
}

class ProbesOfEveryPreset : public ::testing::TestWithParam<std::string> {};

TEST_P(ProbesOfEveryPreset, EveryProbeHitsItsTarget) {
  const std::string& preset = GetParam();
  const Contract c = make_preset(preset);
  const std::vector<Case> probes = discriminating_probes(c);
  EXPECT_FALSE(probes.empty()) << preset;
  for (const Case& k : probes) {
    ASSERT_TRUE(k.target.has_value()) << preset << " " << k.name;
    EXPECT_EQ(k.name.rfind("probe_", 0), 0u) << k.name;
    EXPECT_EQ(k.target->name.rfind("discriminates:", 0), 0u) << k.target->name;
    EXPECT_GT(k.hits, 0) << preset << " " << k.name;
    EXPECT_EQ(k.target->count(c, k.input.view(), Observed{}), k.hits) << preset << " " << k.name;
    // A probe is a rejection case exactly when the contract itself refuses its input (non-finite
    // values under nonfinite_input=reject): what the variants differ in is refusing it.
    bool refused = false;
    try {
      run_contract(c, k.input.view(), RunOptions{Engine::reference, 1});
    } catch (const Error&) {
      refused = true;
    }
    EXPECT_EQ(k.expect_error.has_value(), refused) << preset << " " << k.name;
  }
}

TEST(Probes, EachFamilyGetsItsProbes) {
  const std::set<std::string> mx = names_of(discriminating_probes(make_preset("mxfp8.ascend")));
  for (const char* n : {"probe_amax_sweep", "probe_log2_fp32", "probe_rounding", "probe_overflow", "probe_byte0",
                        "probe_signed_zero", "probe_nonfinite", "probe_prequant", "probe_layout", "probe_block"})
    EXPECT_TRUE(mx.count(n)) << n;
  const std::set<std::string> blk = names_of(discriminating_probes(make_preset("int8.block.ascend")));
  for (const char* n : {"probe_rounding", "probe_quotient", "probe_scale_min", "probe_scale_mode", "probe_granularity"})
    EXPECT_TRUE(blk.count(n)) << n;
  const std::set<std::string> grp = names_of(discriminating_probes(make_preset("q8_0.ggml")));
  EXPECT_TRUE(grp.count("probe_granularity"));
  const std::set<std::string> tok = names_of(discriminating_probes(make_preset("int8.token.blaze")));
  for (const char* n : {"probe_rounding", "probe_quotient", "probe_scale_min", "probe_scale_mode"})
    EXPECT_TRUE(tok.count(n)) << n;
  EXPECT_FALSE(tok.count("probe_granularity"));  // one scale per complete row: no size to probe
  EXPECT_EQ(names_of(discriminating_probes(make_preset("hif4"))), std::set<std::string>{"probe_qdim"});
}

TEST(Probes, AreDeterministic) {
  for (const char* preset : {"mxfp8.ascend", "int8.block.sage.cuda", "hif4"}) {
    const std::vector<Case> a = discriminating_probes(make_preset(preset));
    const std::vector<Case> b = discriminating_probes(make_preset(preset));
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(npy::encode(a[i].input.view()), npy::encode(b[i].input.view()));
  }
}

TEST(Probes, LayoutMarkerSpansATileAndFiveGroups) {
  for (const Case& k : discriminating_probes(make_preset("mxfp8.ascend")))
    if (k.name == "probe_layout") {
      ASSERT_EQ(k.input.shape().size(), 2u);
      EXPECT_GE(k.input.shape()[0], 129);
      EXPECT_GE(k.input.shape()[1] / 32, 5);
      return;
    }
  FAIL() << "no probe_layout";
}

TEST(Probes, AmaxSweepHoldsTheSeedsDiscriminatingAmaxes) {
  for (const Case& k : discriminating_probes(make_preset("mxfp8.ascend")))
    if (k.name == "probe_amax_sweep") {
      const std::vector<float> v = to_f32_vector(k.input.view());
      for (float want : {450.0f, 1000.0f, 230.0f, 448.0f, 896.0f})
        EXPECT_TRUE(std::any_of(v.begin(), v.end(), [&](float x) { return std::fabs(x) == want; })) << want;
      return;
    }
  FAIL() << "no probe_amax_sweep";
}

TEST(Probes, DiscriminatesCountsOnlyBytesThatChange) {
  // Under RNE vs trunc, an input of exact codes changes nothing; one value between codes does.
  const Contract c = make_preset("mx.ocp");
  std::vector<float> v(32, 1.0f);
  const Tensor exact = from_f32_vector(v, Shape{1, 32}, DType::f32);
  const Predicate p = discriminates("rounding", {"rne", "trunc"});
  EXPECT_EQ(p.count(c, exact.view(), Observed{}), 0);
  v[5] = 1.2f;  // between 1.125 and 1.25: RNE goes up, trunc down
  const Tensor one = from_f32_vector(v, Shape{1, 32}, DType::f32);
  EXPECT_EQ(p.count(c, one.view(), Observed{}), 1);
  // Values the family cannot take are left out: one valid variant cannot disagree.
  EXPECT_EQ(discriminates("rounding", {"rne", "no_such_rounding"}).count(c, one.view(), Observed{}), 0);
}

// Every value of nonfinite and signed_zero (torchao's and microxcaling's included) gives bytes
// of its own on its probe, for an element with NaN: infer can name each of them.
TEST(Probes, NonFiniteAndSignedZeroProbesTellEveryValueApart) {
  const Contract c = make_preset("mxfp8.torchao.floor");
  for (const char* key : {"nonfinite", "signed_zero"}) {
    const std::vector<Case> probes = discriminating_probes(c);
    const auto k = std::find_if(probes.begin(), probes.end(),
                                [&](const Case& p) { return p.name == std::string("probe_") + key; });
    ASSERT_NE(k, probes.end()) << key;
    std::vector<std::pair<std::string, QuantResult>> outs;
    for (const std::string& v : param_choices(key)) {
      Contract variant = c;
      set_param(variant, key, v);
      outs.emplace_back(v, quantize(variant, k->input.view()));
    }
    for (std::size_t i = 0; i < outs.size(); ++i)
      for (std::size_t j = i + 1; j < outs.size(); ++j)
        EXPECT_GT(test::differing_bytes(outs[i].second.payload, outs[j].second.payload) +
                      test::differing_bytes(outs[i].second.scale, outs[j].second.scale),
                  0)
            << key << ": " << outs[i].first << " vs " << outs[j].first;
  }
}

// The probes hold ties, values a hair below them and tiny groups: the kernels' hard inputs.
void expect_fast_engine_matches_the_reference_on_every_probe(const Contract& c) {
  for (const Case& k : discriminating_probes(c)) {
    const ContractRun ref = try_contract(c, k.input.view(), RunOptions{Engine::reference, 1});
    const ContractRun fast = try_contract(c, k.input.view(), RunOptions{Engine::fast, 2});
    ASSERT_EQ(ref.output.has_value(), fast.output.has_value()) << c.preset << " " << k.name;
    if (!ref.output) continue;
    for (auto [a, b] : {std::pair{&ref.output->payload, &fast.output->payload},
                        std::pair{&ref.output->scale, &fast.output->scale},
                        std::pair{&ref.output->output, &fast.output->output}}) {
      ASSERT_EQ(a->nbytes(), b->nbytes());
      std::int64_t differing = 0;
      for (std::size_t i = 0; i < a->nbytes(); ++i)
        differing += static_cast<const std::uint8_t*>(a->raw())[i] != static_cast<const std::uint8_t*>(b->raw())[i];
      EXPECT_EQ(differing, 0) << c.preset << " " << k.name << ": " << differing << " differing of " << a->nbytes();
    }
  }
}

TEST_P(ProbesOfEveryPreset, FastEngineMatchesTheReference) {
  expect_fast_engine_matches_the_reference_on_every_probe(make_preset(GetParam()));
}

TEST(Probes, FastEngineMatchesTheReferenceUnderTruncation) {
  for (const Contract& c : {make_contract("mxfp8.ascend", {"rounding=trunc"}), make_contract("mx.ocp.e2m1", {"rounding=trunc"}),
                            make_contract("int8.block.ascend", {"int_rounding=trunc"}),
                            make_contract("q8_0.ggml", {"int_rounding=trunc"})})
    expect_fast_engine_matches_the_reference_on_every_probe(c);
}

QEXACT_INSTANTIATE_FOR_EVERY_PRESET(ProbesOfEveryPreset);

// Why there is no ratio probe (probes.hpp): rceil's two ratios can only round to different sides
// of a power of two next to max * 2^k, and there they never do, for any element format and k.
TEST(Probes, RceilRatioNeverChangesAScaleByte) {
  std::int64_t checked = 0, differing = 0;
  for (ElemFormat f : {ElemFormat::e4m3, ElemFormat::e5m2, ElemFormat::e2m3, ElemFormat::e3m2, ElemFormat::e2m1}) {
    const float max = elem_traits(f).max;
    for (int k = -149; k <= 127; ++k) {
      const float centre = std::ldexp(max, k);
      if (centre == 0.0f || !std::isfinite(centre)) continue;
      float lo = centre, hi = centre;
      for (int i = 0; i < 64; ++i) {
        for (float a : {lo, hi}) {
          ++checked;
          differing += e8m0_rceil(a, max, false) != e8m0_rceil(a, max, true);
        }
        lo = std::nextafter(lo, 0.0f);
        hi = std::nextafter(hi, std::numeric_limits<float>::infinity());
      }
    }
  }
  std::cout << "rceil divide vs reciprocal: " << differing << " differing of " << checked << "\n";
  EXPECT_GT(checked, 100000);
  EXPECT_EQ(differing, 0);
}

}  // namespace
}  // namespace qexact::conformance
