// `qexact conform`: the reference quantizers agree with themselves on every preset, over every
// adversarial case and the activation set, byte for byte.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <stdexcept>
#include <sstream>
#include <string>
#include <vector>

#include "conformance/cases.hpp"
#include "conformance/conform.hpp"
#include "conformance/predicates.hpp"
#include "qexact/contract.hpp"
#include "qexact/quantize.hpp"

namespace qexact::conformance {
namespace {

// The table row of a preset, split into whitespace-separated fields.
std::vector<std::string> row_fields(const std::string& report, const std::string& preset) {
  std::istringstream lines(report);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::vector<std::string> out;
    std::string f;
    while (fields >> f) out.push_back(f);
    const bool counted = out.size() > 1 && out[1].find_first_not_of("0123456789") == std::string::npos;
    if (counted && out[0] == preset) return out;
  }
  return {};
}

TEST(Conform, ReferenceAgreesWithItselfOnEveryPreset) {
  const ConformOptions opts;
  std::cout << "seed " << opts.seed << "\n";
  std::ostringstream out;
  const int rc = run_conform(opts, out);
  const std::string report = out.str();
  std::cout << report;
  EXPECT_EQ(rc, 0);
  EXPECT_NE(report.find("seed " + std::to_string(opts.seed)), std::string::npos);
  EXPECT_NE(report.find("0 /"), std::string::npos);
  for (const std::string& preset : preset_names()) {
    SCOPED_TRACE(preset);
    // preset cases hit / n rejected / n payload-diff / checked scale-diff / checked sqnr sqnr path
    const std::vector<std::string> f = row_fields(report, preset);
    ASSERT_GE(f.size(), 17u) << "no table row";
    // pool.mean is not a quantizer: undirected cases, one output (counted as payload), no scale.
    const bool pool = make_preset(preset).family == Family::pool;
    EXPECT_EQ(f[2], f[4]) << "targets hit";
    if (!pool) {
      EXPECT_GT(std::stoll(f[4]), 0) << "directed cases";
    }
    EXPECT_EQ(f[5], f[7]) << "rejections";
    EXPECT_EQ(f[8], "0") << "payload bytes differing";
    EXPECT_GT(std::stoll(f[10]), 0) << "payload bytes checked";
    EXPECT_EQ(f[11], "0") << "scale bytes differing";
    if (pool) {
      EXPECT_GT(std::stoll(f[7]), 0) << "its non-finite inputs are rejected";
      EXPECT_EQ(f[13], "0") << "pool.mean has no scale";
    } else {
      EXPECT_GT(std::stoll(f[13]), 0) << "scale bytes checked";
    }
  }
  for (const char* preset : {"int8.token.blaze", "int8.token.vllm"}) {
    const std::vector<std::string> f = row_fields(report, preset);
    ASSERT_FALSE(f.empty()) << preset;
    EXPECT_EQ(f.back(), "single_pass+two_pass_chunked") << preset;
  }
}

const Case& find_case(const std::vector<Case>& cases, const std::string& name) {
  for (const Case& k : cases)
    if (k.name == name) return k;
  throw std::runtime_error("no case " + name);
}

// Targets read the reference's scales: the same hits as the nominal scales on cases built to
// pin them, and a miss when the scale bytes are disturbed.
TEST(ConformTargets, MarkerIsFoundAtItsLayoutOffsetAndLostWhenBytesMove) {
  std::cout << "seed 20261130\n";
  for (const char* preset : {"mxfp8.ascend", "mxfp8.te", "mx.ocp.e2m1"}) {
    SCOPED_TRACE(preset);
    const Contract c = make_preset(preset);
    const std::vector<Case> cases = adversarial_cases(c, 20261130);
    const Case& k = find_case(cases, "marker");
    QuantResult r = quantize(c, k.input.view());
    EXPECT_EQ(k.target->count(c, k.input.view(), Observed{&r, nullptr}), k.target->min_hits);
    auto* bytes = r.scale.data<std::uint8_t>();
    std::reverse(bytes, bytes + r.scale.nbytes());
    EXPECT_LT(k.target->count(c, k.input.view(), Observed{&r, nullptr}), k.target->min_hits);
  }
}

TEST(ConformTargets, TiesOnTheReferenceScalesMatchTheNominalOnes) {
  std::cout << "seed 20261130\n";
  for (const char* preset : {"mxfp8.ascend", "mx.ocp.e5m2", "int8.block.ascend", "int8.token.vllm", "q8_0.ggml"}) {
    SCOPED_TRACE(preset);
    const Contract c = make_preset(preset);
    const std::vector<Case> cases = adversarial_cases(c, 20261130);
    const Case& k = find_case(cases, "ties");
    QuantResult r = quantize(c, k.input.view());
    EXPECT_EQ(k.target->count(c, k.input.view(), Observed{&r, nullptr}), k.hits);
    if (c.family != Family::mx) {
      // A scale one ulp off leaves no exact tie.
      if (r.scale.dtype() == DType::f32) {
        for (std::int64_t i = 0; i < r.scale.numel(); ++i) r.scale.data<float>()[i] *= 1.0f + 0x1p-23f;
      } else {
        for (std::int64_t i = 0; i < r.scale.numel(); ++i) ++r.scale.data<std::uint16_t>()[i];
      }
      EXPECT_EQ(k.target->count(c, k.input.view(), Observed{&r, nullptr}), 0);
    }
  }
}

TEST(ConformTargets, Hif4GridFromThePackedBytesMatchesTheNominalGrid) {
  std::cout << "seed 20261130\n";
  const Contract c = make_preset("hif4");
  for (const Case& k : adversarial_cases(c, 20261130)) {
    if (k.expect_error || !k.target) continue;
    SCOPED_TRACE(k.name);
    Hif4Packed p = hif4_pack(k.input.view());
    EXPECT_EQ(k.target->count(c, k.input.view(), Observed{nullptr, &p}), k.hits);
    for (const Predicate& pred : {exact_ties(), saturation()})
      EXPECT_EQ(pred.count(c, k.input.view(), Observed{nullptr, &p}), pred.count(c, k.input.view(), Observed{}))
          << pred.name;
  }
  // Clearing the L2 bits moves the tie grid of every d8 = 1 group.
  const std::vector<Case> cases = adversarial_cases(c, 20261130);
  const Case& ties = find_case(cases, "ties");
  Hif4Packed p = hif4_pack(ties.input.view());
  for (std::int64_t b = 0; b < p.scale.numel(); b += 4) p.scale.data<std::uint8_t>()[b + 1] = 0;
  EXPECT_LT(ties.target->count(c, ties.input.view(), Observed{nullptr, &p}), ties.hits);
}

}  // namespace
}  // namespace qexact::conformance
