// Contract inference (conformance/infer.hpp): a device made by emulate from a preset, or from
// a deliberately altered contract, is recognised byte for byte; a device no contract explains
// gets the closest contract and its residual.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "conformance/emulate.hpp"
#include "conformance/infer.hpp"
#include "conformance/suite.hpp"
#include "io/npy.hpp"
#include "preset_param.hpp"

namespace qexact::conformance {
namespace {
namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("qexact_infer_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p;
}

// Exports `preset`'s cases and plays the device `device` + overrides on them.
fs::path device_dir(const std::string& name, const std::string& preset, const std::string& device,
                    const std::vector<std::string>& overrides) {
  const fs::path dir = fresh_dir(name);
  export_suite(dir, make_contract(preset), 1);
  emulate_case_dir(dir, make_contract(device, overrides), RunOptions{Engine::fast, 1});
  return dir;
}

std::string param(const InferResult& r, const std::string& key) {
  for (const auto& [k, v] : params(r.contract))
    if (k == key) return v;
  return "";
}

class InferEveryPreset : public ::testing::TestWithParam<std::string> {};

TEST_P(InferEveryPreset, RecognisesThePresetFromItsOwnOutputs) {
  const std::string& preset = GetParam();
  const fs::path dir = device_dir("self", preset, preset, {});
  const InferResult r = infer_contract(read_case_dir(dir));
  EXPECT_TRUE(r.exact);
  EXPECT_EQ(r.preset, preset);
  EXPECT_TRUE(r.overrides.empty());
  EXPECT_EQ(r.payload_bytes_differing, 0);
  EXPECT_EQ(r.scale_bytes_differing, 0);
  EXPECT_TRUE(r.cases.empty());
  EXPECT_EQ(params(r.contract), params(make_preset(preset)));
  fs::remove_all(dir);
}

QEXACT_INSTANTIATE_FOR_EVERY_PRESET(InferEveryPreset);

struct Altered {
  std::string exported, device;
  std::vector<std::string> overrides;
  std::vector<std::pair<std::string, std::string>> want;  // parameters the result must have
  std::string family = "";                                // "" = the exported one
};

TEST(Infer, RecoversEachAlteredParameter) {
  const std::vector<Altered> devices = {
      {"mxfp8.ascend", "mxfp8.ascend", {"prequant_round=none"}, {{"prequant_round", "none"}}},  // amax on fp32
      {"mxfp8.ascend", "mxfp8.ascend", {"rounding=trunc"}, {{"rounding", "trunc"}}},
      {"mxfp8.ascend", "mxfp8.ascend", {"rounding=half_away"}, {{"rounding", "half_away"}}},
      {"mxfp8.ascend", "mxfp8.ascend", {"overflow=nan"}, {{"overflow", "nan"}}},
      {"mxfp8.ascend", "mxfp8.ascend", {"block=16"}, {{"block", "16"}}},
      {"mxfp8.ascend", "mxfp8.ascend", {"layout=rowmajor"}, {{"layout", "rowmajor"}}},
      {"mxfp8.ascend", "mxfp8.ascend", {"layout=swizzled", "tail=reject"}, {{"layout", "swizzled"}, {"tail", "reject"}}},
      {"mxfp8.ascend", "mxfp8.ascend", {"byte0=quantize"}, {{"byte0", "quantize"}}},
      {"mxfp8.ascend", "mxfp8.ascend", {"nonfinite=nan"}, {{"nonfinite", "nan"}}},
      {"mx.ocp", "mx.ocp", {"scale_rule=rceil"}, {{"scale_rule", "rceil"}}},
      // torchao 0.18's non-finite rules and microxcaling's signed zero, from an OCP export
      {"mx.ocp", "mx.ocp", {"nonfinite=torchao"}, {{"nonfinite", "torchao"}}},
      {"mx.ocp", "mx.ocp", {"signed_zero=underflow"}, {{"signed_zero", "underflow"}}},
      {"mxfp8.torchao.rceil", "mxfp8.torchao.rceil", {"nonfinite=torchao_rceil_compiled"},
       {{"nonfinite", "torchao_rceil_compiled"}}},
      {"mx.ocp", "mx.ocp", {"log2_fp32=true"}, {{"log2_fp32", "true"}}},
      {"int8.token.blaze", "int8.token.blaze", {"quotient=reciprocal", "scale_mode=before"},
       {{"quotient", "reciprocal"}, {"scale_mode", "before"}}},
      {"int8.token.blaze", "int8.token.blaze", {"quotient=inv_scale"}, {{"quotient", "inv_scale"}}},
      {"int8.token.blaze", "int8.token.blaze", {"scale_min=3e-06"}, {{"scale_min", "3e-06"}}},  // read from the data
      {"int8.block.ascend", "int8.block.ascend", {"int_rounding=trunc"}, {{"int_rounding", "trunc"}}},
      {"int8.block.ascend", "int8.block.ascend", {"token_block=128"}, {{"token_block", "128"}}},
      {"int8.block.ascend", "int8.block.ascend", {"scale_store=f16"}, {{"scale_store", "f16"}}},
      // the torch stacks' int8 from a seed export: the divisor 127.5, the zero rules
      {"int8.token.blaze", "int8.token.blaze", {"qmax=127.5", "range=128"}, {{"qmax", "127.5"}, {"range", "128"}}},
      {"int8.token.blaze", "int8.token.blaze", {"zero_group=eps"}, {{"zero_group", "eps"}}},
      {"int8.token.blaze", "int8.ct.token", {}, {{"qmax", "127.5"}, {"scale_arith", "input"}, {"quotient_arith", "input"}}},
      // per-tile scales [R, Q/64] instead of one per row
      {"int8.token.blaze", "q8_0.ggml", {"group=64", "scale_store=f32", "quotient=divide", "int_rounding=rne"},
       {{"group", "64"}, {"quotient", "divide"}, {"int_rounding", "rne"}}, "int8.group"},
  };
  for (const Altered& a : devices) {
    std::string label = a.device;
    for (const auto& o : a.overrides) label += " " + o;
    const fs::path dir = device_dir("altered", a.exported, a.device, a.overrides);
    const InferResult r = infer_contract(read_case_dir(dir));
    EXPECT_TRUE(r.exact) << label << ": " << r.payload_bytes_differing << " payload, " << r.scale_bytes_differing
                         << " scale bytes differ";
    for (const auto& [k, v] : a.want) EXPECT_EQ(param(r, k), v) << label << ": " << k;
    EXPECT_EQ(family_name(r.contract.family), a.family.empty() ? family_name(make_preset(a.exported).family) : a.family)
        << label;
    fs::remove_all(dir);
  }
}

TEST(Infer, NamesTheAlteredPresetWithItsOverrides) {
  const fs::path dir = device_dir("named", "mxfp8.ascend", "mxfp8.ascend", {"rounding=trunc"});
  const InferResult r = infer_contract(read_case_dir(dir));
  EXPECT_TRUE(r.exact);
  EXPECT_EQ(r.preset, "mxfp8.ascend");
  EXPECT_EQ(r.overrides, (std::vector<std::pair<std::string, std::string>>{{"rounding", "trunc"}}));
  fs::remove_all(dir);
}

TEST(Infer, ReportsWhatTheBytesCannotDecide) {
  // rceil's divide and reciprocal ratios give the same bytes for E4M3 (probes.hpp); with
  // scale_min = 0 the two scale modes coincide.
  fs::path dir = device_dir("undetermined", "mxfp8.torchao.rceil", "mxfp8.torchao.rceil", {"ratio=divide"});
  InferResult r = infer_contract(read_case_dir(dir));
  EXPECT_TRUE(r.exact);
  EXPECT_TRUE(r.undetermined.count("ratio"));
  fs::remove_all(dir);
  dir = device_dir("undetermined", "int8.token.blaze", "int8.token.blaze", {});
  r = infer_contract(read_case_dir(dir));
  EXPECT_TRUE(r.undetermined.count("scale_mode"));
  EXPECT_TRUE(r.undetermined.count("budget"));
  EXPECT_FALSE(r.undetermined.count("int_rounding"));
  EXPECT_FALSE(r.undetermined.count("quotient"));
  fs::remove_all(dir);
}

TEST(Infer, ReportsTheClosestContractAndItsResidual) {
  const fs::path dir = device_dir("closest", "mxfp8.ascend", "mxfp8.ascend", {});
  // One flipped payload byte in one case: no contract reproduces it.
  const fs::path payload = dir / "randn" / "payload.npy";
  Tensor t = npy::read(payload);
  t.data<std::uint8_t>()[7] ^= 0x01;
  const auto bytes = npy::encode(t.view());
  std::ofstream(payload, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                 static_cast<std::streamsize>(bytes.size()));
  const InferResult r = infer_contract(read_case_dir(dir));
  EXPECT_FALSE(r.exact);
  EXPECT_EQ(r.preset, "mxfp8.ascend");
  EXPECT_EQ(r.payload_bytes_differing, 1);
  EXPECT_EQ(r.scale_bytes_differing, 0);
  ASSERT_EQ(r.cases.size(), 1u);
  EXPECT_EQ(r.cases[0].name, "randn");
  EXPECT_EQ(r.cases[0].payload_bytes_differing, 1);
  EXPECT_EQ(r.cases[0].undiagnosed, "");
  for (const MergedDiagnosis& d : r.diagnoses) EXPECT_EQ(d.cases, std::vector<std::string>{"randn"}) << d.diagnosis.signature;
  fs::remove_all(dir);
}

TEST(Infer, AttributesTheResidualOfAWrappingDevice) {
  // No contract wraps int8 conversions: the device's scales are half the contract's and its
  // quotients wrap mod 256 in one case. The closest contract's residual is diagnosed by compare.
  const fs::path dir = device_dir("wrap", "int8.token.blaze", "int8.token.blaze", {});
  const CaseDir d = read_case_dir(dir);
  const CaseEntry& randn = *std::find_if(d.cases.begin(), d.cases.end(), [](const CaseEntry& e) { return e.name == "randn"; });
  const std::vector<float> x = to_f32_vector(read_case_input(d, randn).view());
  DeviceOutput out = *read_device_output(d, randn);
  const std::int64_t rows = out.scale.numel(), k = out.payload.numel() / rows;
  std::int64_t wrapped = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float s = out.scale.data<float>()[r] / 2.0f;
    out.scale.data<float>()[r] = s;
    for (std::int64_t i = r * k; i < (r + 1) * k; ++i) {
      const float q = std::nearbyint(x[static_cast<std::size_t>(i)] / s);
      wrapped += std::fabs(q) > 127.0f ? 1 : 0;
      out.payload.data<std::int8_t>()[i] = static_cast<std::int8_t>(static_cast<std::uint8_t>(static_cast<std::int64_t>(q) & 0xFF));
    }
  }
  ASSERT_GT(wrapped, 0);
  for (const auto& [file, t] : {std::pair<const char*, const Tensor*>{"payload.npy", &out.payload}, {"scale.npy", &out.scale}}) {
    const auto bytes = npy::encode(t->view());
    std::ofstream(dir / "randn" / file, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  const InferResult r = infer_contract(read_case_dir(dir));
  EXPECT_FALSE(r.exact);
  EXPECT_EQ(family_name(r.contract.family), std::string("int8.token"));
  ASSERT_EQ(r.cases.size(), 1u);
  EXPECT_EQ(r.cases[0].name, "randn");
  ASSERT_EQ(r.diagnoses.size(), 1u);
  EXPECT_EQ(r.diagnoses[0].diagnosis.signature, "wraparound");
  EXPECT_EQ(r.diagnoses[0].cases, std::vector<std::string>{"randn"});
  std::int64_t saturation = -1;
  for (const auto& [name, n] : r.diagnoses[0].diagnosis.evidence)
    if (name == "saturation") saturation = n;
  EXPECT_EQ(saturation, wrapped);
  fs::remove_all(dir);
}

TEST(Infer, AnExactResultHasNoResidualDiagnoses) {
  const fs::path dir = device_dir("exact_no_diag", "mxfp8.ascend", "mxfp8.ascend", {"rounding=trunc"});
  const InferResult r = infer_contract(read_case_dir(dir));
  EXPECT_TRUE(r.exact);
  EXPECT_TRUE(r.diagnoses.empty());
  fs::remove_all(dir);
}

TEST(Infer, ARefusedCaseMustBeRefusedToo) {
  // The device rejects partial groups: only tail=reject explains the missing outputs.
  const fs::path dir = device_dir("refused", "mx.ocp", "mx.ocp", {"tail=reject"});
  const InferResult r = infer_contract(read_case_dir(dir));
  EXPECT_TRUE(r.exact);
  EXPECT_EQ(param(r, "tail"), "reject");
  fs::remove_all(dir);
}

TEST(Infer, RefusesADirectoryWithoutDeviceOutputs) {
  const fs::path dir = fresh_dir("empty");
  export_suite(dir, make_preset("hif4"), 1);
  try {
    infer_contract(read_case_dir(dir));
    FAIL() << "no outputs accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::bad_input);
    EXPECT_NE(std::string(e.what()).find("no device outputs"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

TEST(Infer, EmulateRefusesADirectoryThatHasOutputs) {
  const fs::path dir = device_dir("twice", "int8.token.blaze", "int8.token.blaze", {});
  EXPECT_THROW(emulate_case_dir(dir, make_preset("int8.token.vllm"), RunOptions{}), Error);
  fs::remove_all(dir);
}

TEST(Infer, CandidateValuesCoverEveryParameter) {
  for (const std::string& preset : preset_names()) {
    const Contract c = make_preset(preset);
    for (const auto& [key, value] : params(c)) {
      const std::vector<std::string> v = candidate_values(c, key);
      EXPECT_NE(std::find(v.begin(), v.end(), value), v.end()) << preset << " " << key;
      EXPECT_GE(v.size(), 2u) << preset << " " << key;
      for (const std::string& s : v) {
        Contract n = c;
        EXPECT_NO_THROW(set_param(n, key, s)) << key << "=" << s;
      }
    }
  }
}

}  // namespace
}  // namespace qexact::conformance
