// The conformance lab on the families of contracts §9 (fp8.scaled, nvfp4): scale domains of
// every granularity (Groups, ScaleGrid, tails), the §9 cases and their targets, compare's scale
// deltas in each scale's own encoding and the tensor scale, and diagnoses of synthetic devices
// made with one deliberately wrong parameter (with no diagnosis at all on correct output).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "conformance/cases.hpp"
#include "conformance/compare.hpp"
#include "conformance/contract_output.hpp"
#include "conformance/predicates.hpp"
#include "conformance/probes.hpp"
#include "conformance/scale_grid.hpp"
#include "qexact/contract.hpp"
#include "qexact/error.hpp"
#include "qexact/formats/element.hpp"
#include "qexact/quantize.hpp"
#include "reference/with_scales_ref.hpp"
#include "tensor_test_util.hpp"

namespace qexact::conformance {
namespace {

const RunOptions kRef{Engine::reference, 1};

Tensor normal_tensor(const Shape& shape, unsigned seed, float scale = 1.0f) {
  return from_f32_vector(test::normal_values(shape_numel(shape), scale, seed), shape, DType::f32);
}

DeviceOutput device_from(const Contract& c, const Tensor& x) {
  const ContractOutput o = run_contract(c, x.view(), kRef);
  return DeviceOutput{o.payload, o.scale, o.output, o.tensor_scale};
}

std::set<std::string> signatures(const CompareReport& r) {
  std::set<std::string> s;
  for (const Diagnosis& d : r.diagnoses) s.insert(d.signature);
  return s;
}

// ---- scale domains ----------------------------------------------------------------------

struct GrainCase {
  const char* grain;
  Shape shape;
  std::int64_t whole;  // elements of an uncut domain (0: no tails possible)
};

// Every element in exactly one group, each group's members mapped to it by ScaleGrid (which
// uses contracts/scale_grain's element -> scale map), and tails exactly the cut domains.
TEST(LabScaled, GroupsCoverEveryGranularityWithTails) {
  const GrainCase grains[] = {
      {"tensor", Shape{5, 37}, 0},
      {"row", Shape{3, 4, 37}, 0},
      {"group:16", Shape{3, 37}, 16},
      {"group:128", Shape{2, 256}, 128},
      {"tile:4x8", Shape{3, 3, 21}, 32},  // R = 9 rows: a row tail and a column tail
      {"tile:128x128", Shape{130, 260}, 128 * 128},
      {"head_block:64", Shape{2, 150, 3, 8}, 64 * 8},
      {"head_block:4", Shape{1, 8, 2, 4}, 16},
  };
  for (const GrainCase& gc : grains) {
    SCOPED_TRACE(gc.grain);
    const Contract c = make_contract("fp8.ascend.token", {std::string("granularity=") + gc.grain});
    const Groups groups(c, gc.shape);
    const ScaleGrid grid(c, gc.shape);
    ASSERT_EQ(groups.count(), shape_numel(scale_shape(c, gc.shape)));
    ASSERT_EQ(groups.count(), grid.groups());
    std::vector<int> seen(static_cast<std::size_t>(shape_numel(gc.shape)), 0);
    std::int64_t tails = 0, expected_tails = 0;
    for (std::int64_t g = 0; g < groups.count(); ++g) {
      for (std::int64_t i = 0; i < groups.size(g); ++i) {
        const std::int64_t e = groups.member(g, i);
        ++seen[static_cast<std::size_t>(e)];
        ASSERT_EQ(grid.group_of(e), g);
      }
      expected_tails += gc.whole > 0 && groups.size(g) < gc.whole ? 1 : 0;
      tails += grid.is_tail_group(g) ? 1 : 0;
    }
    for (int n : seen) ASSERT_EQ(n, 1);
    EXPECT_EQ(tails, expected_tails);
    EXPECT_EQ(grid.has_tail(), expected_tails > 0);
  }
  // nvfp4: blocks of 16 along the last axis.
  const Contract nv = make_preset("nvfp4.torchao");
  const Groups blocks(nv, Shape{3, 64});
  ASSERT_EQ(blocks.count(), 12);
  EXPECT_EQ(blocks.member(5, 3), 1 * 64 + 16 + 3);
}

TEST(LabScaled, TailCasesCutEveryBlockedAxis) {
  for (const char* grain : {"group:128", "tile:128x128", "tile:4x8", "head_block:64", "tensor", "row"}) {
    SCOPED_TRACE(grain);
    const Contract c = make_contract("fp8.torchao.rowwise", {std::string("granularity=") + grain});
    for (const Case& k : adversarial_cases(c, 3)) {
      if (k.name != "tail") continue;
      EXPECT_FALSE(k.expect_error);
      EXPECT_GE(k.hits, 1);
      const Shape& s = k.input.shape();
      const ScaleGrain g = c.granularity;
      if (g.kind == Granularity::tile) {
        EXPECT_NE(s[0] % g.rows, 0);
        EXPECT_NE(s[1] % g.cols, 0);
      }
      if (g.kind == Granularity::head_block) {
        EXPECT_NE(s[1] % g.rows, 0);
      }
    }
  }
  // nvfp4 takes whole blocks only: its tail is a rejection case.
  for (const Case& k : adversarial_cases(make_preset("nvfp4.torchao"), 3))
    if (k.name == "tail") {
      EXPECT_EQ(k.expect_error, ErrorKind::bad_argument);
    }
}

// ---- the §9 cases ---------------------------------------------------------------------------

std::set<std::string> case_names(const Contract& c) {
  std::set<std::string> names;
  for (const Case& k : adversarial_cases(c, 1)) names.insert(k.name);
  return names;
}

TEST(LabScaled, Section9CasesArePresentAndHitTheirTargets) {
  for (const std::string& preset : preset_names()) {
    const Contract c = make_preset(preset);
    if (c.family != Family::fp8_scaled && c.family != Family::nvfp4) continue;
    SCOPED_TRACE(preset);
    const std::set<std::string> names = case_names(c);  // adversarial_cases throws on a missed target
    // "saturation" too, where a group can saturate (test_cases.cpp checks the whole list).
    for (const char* n : {"ties", "all_zero", "negative_zero", "tail", "nan_middle"}) EXPECT_TRUE(names.count(n)) << n;
    if (c.family == Family::fp8_scaled)
      for (const char* n : {"amax_450", "amax_max_tie", "subnormal_edge"}) EXPECT_TRUE(names.count(n)) << n;
    else
      for (const char* n : {"block_scale_ties", "block_scale_clamp", "tensor_amax_huge", "tensor_amax_tiny",
                            "tensor_amax_subnormal"})
        EXPECT_TRUE(names.count(n)) << n;
    // The seed presets reject non-finite input; the peers propagate it.
    for (const Case& k : adversarial_cases(c, 1))
      if (k.name == "nan_middle") {
        EXPECT_EQ(k.expect_error.has_value(), c.nonfinite_input == NonFiniteInput::reject);
      }
  }
}

TEST(LabScaled, NominalScalesFollowTheContract) {
  const Contract ascend = make_preset("fp8.ascend.token");
  EXPECT_EQ(fp8_nominal_scale(ascend, 450.0f), 1.00446426868438720703125f);
  EXPECT_EQ(fp8_nominal_scale(ascend, 448.0f), 1.0f);
  EXPECT_EQ(fp8_nominal_scale(ascend, 0.0f), 0.0f);
  const Contract torchao = make_preset("fp8.torchao.tensorwise");
  EXPECT_EQ(fp8_nominal_scale(torchao, 450.0f), 0.995555579662323f);
  EXPECT_EQ(fp8_nominal_scale(torchao, 0.0f), 447999985582080.0f);  // 448 / 1e-12: the amax floor
  EXPECT_EQ(fp8_nominal_scale(make_contract("fp8.torchao.tensorwise", {"scale_pow2=down"}), 450.0f), 0.5f);
  const Contract nv = make_preset("nvfp4.torchao");
  EXPECT_EQ(nvfp4_nominal_block_scale(nv, 7.0f, 0.0f), 1.125f);
  EXPECT_EQ(nvfp4_nominal_block_scale(nv, 0.0f, 0.0f), 0x1p-6f);  // the clamp
  const Contract two = make_contract("nvfp4.torchao", {"tensor_scale=amax"});
  EXPECT_EQ(nvfp4_nominal_tensor_scale(two, 2688.0f), 1.0f);
}

// ---- compare: deltas in the scale's own encoding ---------------------------------------------

TEST(LabScaled, Nvfp4ScaleDeltasAreE4M3Codes) {
  const Contract c = make_preset("nvfp4.torchao");
  const Tensor x = normal_tensor(Shape{8, 64}, 7);
  DeviceOutput dev = device_from(c, x);
  EXPECT_TRUE(compare_device(c, x.view(), dev).identical());
  EXPECT_TRUE(compare_device(c, x.view(), dev).diagnoses.empty());
  dev.scale.data<std::uint8_t>()[3] += 2;
  dev.scale.data<std::uint8_t>()[9] -= 1;
  const CompareReport r = compare_device(c, x.view(), dev);
  EXPECT_EQ(r.scale_delta_unit, "E4M3 codes");
  EXPECT_EQ(r.scales_differing, 2);
  EXPECT_EQ(r.max_scale_delta, 2);
  EXPECT_EQ(r.scale_delta_histogram, (std::map<std::int64_t, std::int64_t>{{-1, 1}, {2, 1}}));
  EXPECT_EQ(r.tensor_scale_bytes_total, 0);
  // MX keeps its E8M0 steps.
  const Contract mx = make_preset("mx.ocp.e4m3");
  DeviceOutput m = device_from(mx, x);
  m.scale.data<std::uint8_t>()[0] += 1;
  EXPECT_EQ(compare_device(mx, x.view(), m).scale_delta_unit, "E8M0 steps");
}

// ---- diagnoses ---------------------------------------------------------------------------------

TEST(LabScaled, TensorScaleMissingOrExtraIsNamed) {
  const Contract single = make_preset("nvfp4.torchao");
  const Contract two = make_contract("nvfp4.torchao", {"tensor_scale=amax"});
  const Tensor x = normal_tensor(Shape{16, 64}, 11, 3.0f);
  // A device quantizing two level where the contract is single level, and the converse.
  for (const auto& [contract, device] : {std::pair{single, two}, std::pair{two, single}}) {
    const DeviceOutput dev = device_from(device, x);
    const CompareReport r = compare_device(contract, x.view(), dev);
    EXPECT_FALSE(r.identical());
    EXPECT_EQ(r.tensor_scale_bytes_total, 4);
    EXPECT_EQ(r.tensor_scale_bytes_differing, 4);
    ASSERT_EQ(signatures(r), std::set<std::string>{"tensor_scale"});
    EXPECT_TRUE(r.diagnoses[0].confirmed);
    EXPECT_NE(r.diagnoses[0].explanation.find("tensor_scale=" + std::string(device.tensor_scale == TensorScale::amax ? "amax" : "none")),
              std::string::npos)
        << r.diagnoses[0].explanation;
    // Correct output: nothing to diagnose.
    EXPECT_TRUE(compare_device(device, x.view(), dev).identical());
  }
}

// A device that rounds the E4M3 block scale up instead of to nearest even: its payload follows
// its own scales (ref::quantize_with_scales).
TEST(LabScaled, Nvfp4BlockScaleRoundedUpIsAScaleRule) {
  const Contract c = make_preset("nvfp4.torchao");
  const Tensor x = normal_tensor(Shape{32, 64}, 13, 2.0f);
  const ContractOutput ref = run_contract(c, x.view(), kRef);
  Tensor scale = ref.scale;
  const std::vector<float> v = to_f32_vector(x.view());
  std::int64_t bumped = 0;
  for (std::int64_t b = 0; b < scale.numel(); ++b) {
    float amax = 0.0f;
    for (std::int64_t i = 0; i < 16; ++i) amax = std::max(amax, std::fabs(v[static_cast<std::size_t>(b * 16 + i)]));
    const float s = std::clamp(amax / 6.0f, 0x1p-6f, 448.0f);
    std::uint8_t& code = scale.data<std::uint8_t>()[b];
    if (elem_decode(ElemFormat::e4m3, code) < s) {
      ++code;
      ++bumped;
    }
  }
  ASSERT_GT(bumped, 0);
  const QuantResult q = ref::quantize_with_scales(c, x.view(), scale.view());
  const DeviceOutput dev{q.payload, q.scale, {}, q.tensor_scale};
  const CompareReport r = compare_device(c, x.view(), dev);
  EXPECT_EQ(r.scales_differing, bumped);
  EXPECT_EQ(r.scale_delta_histogram, (std::map<std::int64_t, std::int64_t>{{1, bumped}}));
  ASSERT_EQ(signatures(r), std::set<std::string>{"scale_rule"});
  EXPECT_FALSE(r.diagnoses[0].confirmed);  // no parameter of the contract rounds the block scale up
  EXPECT_NE(r.diagnoses[0].explanation.find("E4M3"), std::string::npos);
}

// fp8.scaled devices made with one wrong parameter, diagnosed against the contract: the
// expected signature, confirmed by a re-run that names the parameter and value.
struct WrongFp8 {
  const char* preset;
  std::vector<std::string> device_overrides;
  const char* signature;
  const char* named;  // must appear in the explanation
};

// [256, 256] values whose magnitude changes every row and every 64 columns, so that every
// granularity gives other scales, and non-power-of-two amaxes everywhere.
Tensor fp8_input() {
  const Shape shape{256, 256};
  std::vector<float> v = test::normal_values(shape_numel(shape), 1.0f, 17);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] *= std::ldexp(1.0f + static_cast<float>(i / 256 % 7) / 8.0f, static_cast<int>((i / 256 + i % 256 / 64) % 9) - 4);
  return from_f32_vector(v, shape, DType::f32);
}

// The contract's discriminating probe for `param` (probes.hpp), whose input is built so that the
// parameter's values give other bytes: x near the midpoints of the element grid where x / s and
// x * fp32(1 / s) round apart, for the quotient.
Tensor probe_input(const Contract& c, const std::string& param) {
  for (const Case& k : discriminating_probes(c))
    if (k.target && k.target->name == "discriminates:" + param) return k.input;
  ADD_FAILURE() << "no probe for " << param;
  return fp8_input();
}

TEST(LabScaled, Fp8SignaturesAreNamedFromWrongDevices) {
  const WrongFp8 cases[] = {
      {"fp8.ascend.token", {"quotient=reciprocal"}, "reciprocal_divisor", "quotient=reciprocal"},
      {"fp8.ascend.token", {"stored=inverse"}, "stored_scale", "stored=inverse"},
      {"fp8.ascend.token", {"scale_kind=multiplier", "quotient=multiply"}, "stored_scale", "scale_kind=multiplier"},
      {"fp8.torchao.rowwise", {"scale_kind=descale", "quotient=divide"}, "stored_scale", "scale_kind=descale"},
      {"fp8.torchao.tensorwise", {"scale_pow2=down"}, "scale_pow2", "scale_pow2=down"},
      {"fp8.torchao.rowwise", {"scale_pow2=up"}, "scale_pow2", "scale_pow2=up"},
      {"fp8.ascend.token", {"granularity=tensor"}, "granularity", "granularity=tensor"},
      {"fp8.ascend.token", {"granularity=group:128"}, "granularity", "granularity=group:128"},
      {"fp8.ascend.token", {"granularity=tile:128x128"}, "granularity", "granularity=tile:128x128"},
      {"fp8.torchao.tensorwise", {"granularity=row"}, "granularity", "granularity=row"},
  };
  for (const WrongFp8& w : cases) {
    const Contract c = make_preset(w.preset);
    // Random values almost never meet a quotient's 2-ulp difference at an E4M3 midpoint.
    const Tensor x = std::string(w.named).rfind("quotient", 0) == 0 ? probe_input(c, "quotient") : fp8_input();
    const Contract device = make_contract(w.preset, w.device_overrides);
    SCOPED_TRACE(std::string(w.preset) + " device " + w.named);
    const DeviceOutput dev = device_from(device, x);
    const CompareReport r = compare_device(c, x.view(), dev);
    ASSERT_FALSE(r.identical());
    EXPECT_EQ(r.scale_delta_unit, "ulps of f32");
    ASSERT_FALSE(r.diagnoses.empty());
    EXPECT_EQ(r.diagnoses[0].signature, w.signature) << r.diagnoses[0].explanation;
    EXPECT_TRUE(r.diagnoses[0].confirmed) << r.diagnoses[0].explanation;
    EXPECT_NE(r.diagnoses[0].explanation.find(w.named), std::string::npos) << r.diagnoses[0].explanation;
  }
}

// The stacks' arithmetic on a bf16 input: a device that divides in fp32 where the contract rounds
// the quotient (or the scale) to bf16, or keeps the sign of a zero quotient, is named by the
// parameter a re-run confirms.
TEST(LabScaled, InputDtypeArithmeticAndZeroSignsAreNamed) {
  const Tensor f = fp8_input();
  std::vector<float> v = to_f32_vector(f.view());
  for (std::size_t i = 0; i < v.size(); i += 97) v[i] = -0.0f;  // zero quotients for the sign
  const Tensor x = from_f32_vector(v, f.shape(), DType::bf16);
  const WrongFp8 cases[] = {
      {"fp8.ct.channel", {"quotient_arith=fp32"}, "quotient_arith", "quotient_arith=fp32"},
      {"fp8.ct.channel", {"signed_zero=true"}, "signed_zero", "signed_zero=true"},
      {"fp8.modelopt.tensor", {"scale_arith=fp32"}, "scale_rule", "scale_arith=fp32"},
  };
  for (const WrongFp8& w : cases) {
    SCOPED_TRACE(std::string(w.preset) + " device " + w.named);
    const CompareReport r = compare_device(make_preset(w.preset), x.view(), device_from(make_contract(w.preset, w.device_overrides), x));
    ASSERT_FALSE(r.identical());
    ASSERT_FALSE(r.diagnoses.empty());
    EXPECT_EQ(r.diagnoses[0].signature, w.signature) << r.diagnoses[0].explanation;
    EXPECT_TRUE(r.diagnoses[0].confirmed) << r.diagnoses[0].explanation;
    EXPECT_NE(r.diagnoses[0].explanation.find(w.named), std::string::npos) << r.diagnoses[0].explanation;
  }
}

// The converse directions: a contract with power-of-two scales against a device without, and
// a device with another element format.
TEST(LabScaled, Fp8Pow2OffAndElementAreNamed) {
  const Tensor x = fp8_input();
  struct Pair {
    std::vector<std::string> contract, device;
    const char* signature;
    const char* named;
  };
  const Pair pairs[] = {
      {{"scale_pow2=down"}, {}, "scale_pow2", "scale_pow2=none"},
      {{}, {"element=e5m2"}, "element", "element=e5m2"},
  };
  for (const Pair& p : pairs) {
    SCOPED_TRACE(p.named);
    const Contract c = make_contract("fp8.torchao.tensorwise", p.contract);
    const CompareReport r = compare_device(c, x.view(), device_from(make_contract("fp8.torchao.tensorwise", p.device), x));
    ASSERT_FALSE(r.diagnoses.empty());
    EXPECT_EQ(r.diagnoses[0].signature, p.signature) << r.diagnoses[0].explanation;
    EXPECT_TRUE(r.diagnoses[0].confirmed);
    EXPECT_NE(r.diagnoses[0].explanation.find(p.named), std::string::npos) << r.diagnoses[0].explanation;
  }
}

// The reciprocal divisor flips few bytes (§9.1: "about 2 ulp, under 0.1% of bytes"): none to a
// handful of 1M random values, and on the quotient probe only one-code steps with equal scales.
TEST(LabScaled, Fp8ReciprocalDivisorFlipsFewBytes) {
  const Contract c = make_preset("fp8.ascend.token");
  const Contract device = make_contract("fp8.ascend.token", {"quotient=reciprocal"});
  const Tensor x = normal_tensor(Shape{1024, 1024}, 23);
  const QuantResult a = quantize(c, x.view()), b = quantize(device, x.view());
  std::int64_t flips = 0;
  for (std::int64_t i = 0; i < a.payload.numel(); ++i) flips += a.payload.data<std::uint8_t>()[i] != b.payload.data<std::uint8_t>()[i];
  std::cout << "quotient=reciprocal vs divide on 1M normal values: " << flips << " payload bytes differ\n";
  EXPECT_LT(flips * 1000, a.payload.numel());
  EXPECT_EQ(std::memcmp(a.scale.raw(), b.scale.raw(), a.scale.nbytes()), 0);

  const Tensor p = probe_input(c, "quotient");
  const CompareReport r = compare_device(c, p.view(), device_from(device, p));
  std::cout << "on the quotient probe: " << r.payload_bytes_differing << " of " << r.payload_bytes_total << "\n";
  EXPECT_EQ(r.scale_bytes_differing, 0);
  EXPECT_GT(r.payload_bytes_differing, 0);
}

// Correct output of every fp8.scaled and nvfp4 preset on its own adversarial cases: identical,
// nothing diagnosed.
TEST(LabScaled, NoDiagnosisOnCorrectOutput) {
  for (const std::string& preset : preset_names()) {
    const Contract c = make_preset(preset);
    if (c.family != Family::fp8_scaled && c.family != Family::nvfp4) continue;
    SCOPED_TRACE(preset);
    for (const Case& k : adversarial_cases(c, 5)) {
      if (k.expect_error) continue;
      const CompareReport r = compare_device(c, k.input.view(), device_from(c, k.input));
      EXPECT_TRUE(r.identical()) << k.name;
      EXPECT_TRUE(r.diagnoses.empty()) << k.name;
    }
  }
}

// The seed presets reject non-finite input naming the first offending element: every rejection
// case of every finite-only fp8.scaled / nvfp4 contract, on both engines.
TEST(LabScaled, NonFiniteRejectionsNameTheFirstIndex) {
  std::vector<Contract> contracts;
  for (const std::string& preset : preset_names()) {
    const Contract c = make_preset(preset);
    if ((c.family == Family::fp8_scaled || c.family == Family::nvfp4) && c.nonfinite_input == NonFiniteInput::reject)
      contracts.push_back(c);
  }
  contracts.push_back(make_contract("nvfp4.torchao", {"nonfinite_input=reject"}));
  for (const Contract& c : contracts) {
    SCOPED_TRACE(c.preset);
    int checked = 0;
    for (const Case& k : adversarial_cases(c, 9)) {
      if (k.expect_error != ErrorKind::bad_input) continue;
      const std::vector<float> v = to_f32_vector(k.input.view());
      const auto first = static_cast<std::int64_t>(
          std::find_if(v.begin(), v.end(), [](float f) { return !std::isfinite(f); }) - v.begin());
      ASSERT_LT(first, static_cast<std::int64_t>(v.size())) << k.name;
      const Shape& s = k.input.shape();
      std::string where;
      if (s.size() == 4) {
        const std::int64_t d = first % s[3], n = first / s[3] % s[2], t = first / (s[3] * s[2]) % s[1],
                           b = first / (s[3] * s[2] * s[1]);
        where = "(b " + std::to_string(b) + ", s " + std::to_string(t) + ", n " + std::to_string(n) + ", d " +
                std::to_string(d) + ")";
      } else {
        where = "(row " + std::to_string(first / s.back()) + ", column " + std::to_string(first % s.back()) + ")";
      }
      for (const Engine e : {Engine::reference, Engine::fast}) {
        try {
          quantize(c, k.input.view(), RunOptions{e, 2});
          ADD_FAILURE() << k.name << " was not rejected";
        } catch (const Error& err) {
          EXPECT_EQ(err.kind(), ErrorKind::bad_input) << k.name;
          EXPECT_NE(std::string(err.what()).find(where), std::string::npos) << k.name << ": " << err.what() << " vs " << where;
        }
      }
      ++checked;
    }
    EXPECT_EQ(checked, 9);  // +inf, -inf, NaN at the first, middle and last position of a group
  }
}

}  // namespace
}  // namespace qexact::conformance
