// The conformance-lab commands run as a process (QEXACT_CLI): `qexact cases` exports the suite,
// `qexact emulate` plays a device, `qexact infer` names the device's contract. Exit statuses:
// 0 success / exact, 1 closest only, 2 bad input with one "qexact: error: " line.
#include <gtest/gtest.h>
#include <unistd.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_test_util.hpp"
#include "conformance/cases.hpp"
#include "conformance/probes.hpp"
#include "io/npy.hpp"
#include "qexact/contract.hpp"
#include "qexact/quantize.hpp"

namespace qexact {
namespace {
namespace fs = std::filesystem;
using test::RunResult;
using test::slurp;

std::string encoded(const TensorView& t) {
  const auto b = npy::encode(t);
  return std::string(b.begin(), b.end());
}

class LabCli : public test::CliTest {
 protected:
  LabCli() : CliTest("qexact_lab_") {}

  fs::path dir(const std::string& name) const { return work() / name; }

  void expect_bad_input(const RunResult& r, const std::string& word) const {
    EXPECT_EQ(r.status, 2) << r.out << r.err;
    EXPECT_EQ(r.err.rfind("qexact: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(word), std::string::npos) << "expected '" << word << "' in: " << r.err;
  }

};

TEST_F(LabCli, CasesExportsTheSuiteWithItsManifest) {
  const fs::path d = dir("asc");
  const RunResult r = run({"cases", "--preset", "mxfp8.ascend", "--out", d.string(), "--seed", "5"});
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json m = nlohmann::json::parse(slurp(d / "manifest.json"));
  EXPECT_EQ(m["format"], "qexact-cases/1");
  EXPECT_EQ(m["preset"], "mxfp8.ascend");
  for (const auto& [k, v] : params(make_preset("mxfp8.ascend"))) EXPECT_EQ(m["params"][k], v) << k;
  EXPECT_EQ(m["outputs"], nlohmann::json::array({"payload.npy", "scale.npy"}));

  const Contract c = make_preset("mxfp8.ascend");
  const std::vector<conformance::Case> adversarial = conformance::adversarial_cases(c, 5);
  const std::vector<conformance::Case> probes = conformance::discriminating_probes(c);
  std::size_t n_adv = 0, n_probe = 0, n_act = 0;
  for (const auto& e : m["cases"]) {
    const std::string name = e["name"], kind = e["kind"];
    SCOPED_TRACE(name);
    for (const char* key : {"description", "predicate", "hits", "shape", "dtype", "expect_error"}) EXPECT_TRUE(e.contains(key)) << key;
    if (!e["predicate"].get<std::string>().empty()) {
      EXPECT_GT(e["hits"].get<std::int64_t>(), 0);
    }
    const std::string input = slurp(d / name / "input.npy");
    if (kind == "adversarial") {
      ASSERT_LT(n_adv, adversarial.size());
      EXPECT_EQ(name, adversarial[n_adv].name);
      EXPECT_EQ(input, encoded(adversarial[n_adv].input.view()));  // the very bytes of adversarial_cases()
      ++n_adv;
    } else if (kind == "probe") {
      ASSERT_LT(n_probe, probes.size());
      EXPECT_EQ(name, probes[n_probe].name);
      EXPECT_EQ(input, encoded(probes[n_probe].input.view()));
      EXPECT_EQ(e["hits"], probes[n_probe].hits);
      ++n_probe;
    } else {
      EXPECT_EQ(kind, "activation");
      ++n_act;
    }
  }
  EXPECT_EQ(n_adv, adversarial.size());
  EXPECT_EQ(n_probe, probes.size());
  EXPECT_EQ(n_act, 3u);
}

TEST_F(LabCli, CasesFlagsRejectionCases) {
  const fs::path d = dir("tok");
  ASSERT_EQ(run({"cases", "--preset", "int8.token.blaze", "--out", d.string()}).status, 0);
  const nlohmann::json m = nlohmann::json::parse(slurp(d / "manifest.json"));
  int flagged = 0;
  for (const auto& e : m["cases"])
    if (e["name"] == "nan_middle") {
      EXPECT_EQ(e["expect_error"], "bad_input");
      EXPECT_TRUE(fs::exists(d / "nan_middle" / "input.npy"));
      ++flagged;
    }
  EXPECT_EQ(flagged, 1);
}

TEST_F(LabCli, CasesRefusesAnExistingDirectory) {
  const fs::path d = dir("exists");
  fs::create_directories(d);
  expect_bad_input(run({"cases", "--preset", "hif4", "--out", d.string()}), "already exists");
  EXPECT_TRUE(fs::is_empty(d));
}

TEST_F(LabCli, EmulateWritesWhatQuantizeWritesAndListsRefusals) {
  const fs::path d = dir("dev");
  ASSERT_EQ(run({"cases", "--preset", "int8.token.blaze", "--out", d.string()}).status, 0);
  const RunResult r = run({"emulate", "--preset", "int8.token.blaze", "--param", "int_rounding=trunc", d.string()});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("nan_middle"), std::string::npos) << r.out;  // listed as refused
  EXPECT_FALSE(fs::exists(d / "nan_middle" / "payload.npy"));
  const Contract c = make_contract("int8.token.blaze", {"int_rounding=trunc"});
  const Tensor x = npy::read(d / "randn" / "input.npy");
  const QuantResult q = quantize(c, x.view());
  EXPECT_EQ(slurp(d / "randn" / "payload.npy"), encoded(q.payload.view()));
  EXPECT_EQ(slurp(d / "randn" / "scale.npy"), encoded(q.scale.view()));
  // A second device into the same directory would mix outputs.
  expect_bad_input(run({"emulate", "--preset", "int8.token.blaze", d.string()}), "already exists");
}

TEST_F(LabCli, InferNamesThePresetOfAnUnalteredDevice) {
  const fs::path d = dir("ascend");
  ASSERT_EQ(run({"cases", "--preset", "mxfp8.ascend", "--out", d.string()}).status, 0);
  ASSERT_EQ(run({"emulate", "--preset", "mxfp8.ascend", d.string()}).status, 0);
  const RunResult r = run({"infer", d.string(), "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["exact"], true);
  EXPECT_EQ(j["preset"], "mxfp8.ascend");
  EXPECT_TRUE(j["overrides"].empty());
  for (const auto& [k, v] : params(make_preset("mxfp8.ascend"))) EXPECT_EQ(j["params"][k], v) << k;
  EXPECT_EQ(j["residual"]["payload_bytes_differing"], 0);
  EXPECT_EQ(j["residual"]["scale_bytes_differing"], 0);
  EXPECT_TRUE(j["residual"]["cases"].empty());
  EXPECT_TRUE(j["undetermined"].is_array());
}

TEST_F(LabCli, InferRecoversATruncatingDeviceAndItsOverride) {
  const fs::path d = dir("trunc");
  ASSERT_EQ(run({"cases", "--preset", "mxfp8.ascend", "--out", d.string()}).status, 0);
  ASSERT_EQ(run({"emulate", "--preset", "mxfp8.ascend", "--param", "rounding=trunc", d.string()}).status, 0);
  const RunResult r = run({"infer", d.string(), "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["exact"], true);
  EXPECT_EQ(j["preset"], "mxfp8.ascend");
  EXPECT_EQ(j["overrides"], nlohmann::json({{"rounding", "trunc"}}));
  EXPECT_EQ(j["params"]["rounding"], "trunc");
  const RunResult text = run({"infer", d.string()});
  EXPECT_EQ(text.status, 0);
  EXPECT_EQ(text.out.rfind("exact: mxfp8.ascend rounding=trunc\n", 0), 0u) << text.out;
}

TEST_F(LabCli, InferExitsOneWithTheClosestContract) {
  const fs::path d = dir("closest");
  ASSERT_EQ(run({"cases", "--preset", "int8.block.ascend", "--out", d.string()}).status, 0);
  ASSERT_EQ(run({"emulate", "--preset", "int8.block.ascend", d.string()}).status, 0);
  Tensor s = npy::read(d / "randn" / "scale.npy");
  s.data<float>()[0] *= 2.0f;  // one scale no contract gives
  std::ofstream(d / "randn" / "scale.npy", std::ios::binary) << encoded(s.view());
  const RunResult r = run({"infer", d.string(), "--json"});
  EXPECT_EQ(r.status, 1) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["exact"], false);
  EXPECT_EQ(j["preset"], "int8.block.ascend");
  EXPECT_GE(j["residual"]["scale_bytes_differing"].get<int>(), 1);
  EXPECT_TRUE(j["residual"]["cases"].contains("randn"));
  EXPECT_EQ(j["residual"]["cases"].size(), 1u);
  ASSERT_TRUE(j["residual"]["diagnoses"].is_array());
  for (const auto& d : j["residual"]["diagnoses"]) {
    for (const char* key : {"signature", "evidence", "explanation", "confirmed", "cases"}) EXPECT_TRUE(d.contains(key)) << key;
    EXPECT_EQ(d["cases"], nlohmann::json::array({"randn"}));
  }
  const RunResult text = run({"infer", d.string()});
  EXPECT_EQ(text.status, 1);
  EXPECT_EQ(text.out.rfind("closest: int8.block.ascend", 0), 0u) << text.out;
  EXPECT_NE(text.out.find("  residual: "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(" scale bytes in 1 case(s), diagnosis:"), std::string::npos) << text.out;
}

TEST_F(LabCli, InferDiagnosesTheResidualOfAHandAlteredDevice) {
  // Truncated payload codes in one case of a rounding device: no single contract reproduces
  // both cases, and the residual of the closest is named by compare's diagnosis.
  const fs::path d = dir("flipped");
  ASSERT_EQ(run({"cases", "--preset", "mxfp8.ascend", "--out", d.string()}).status, 0);
  ASSERT_EQ(run({"emulate", "--preset", "mxfp8.ascend", d.string()}).status, 0);
  const Contract trunc = make_contract("mxfp8.ascend", {"rounding=trunc"});
  Tensor x = npy::read(d / "randn" / "input.npy");
  if (x.dtype() == DType::u16) x = npy::reinterpret_u16_as_bf16(x);  // bf16 inputs are stored as bit patterns
  const QuantResult q = quantize(trunc, x.view());
  std::ofstream(d / "randn" / "payload.npy", std::ios::binary) << encoded(q.payload.view());
  std::ofstream(d / "randn" / "scale.npy", std::ios::binary) << encoded(q.scale.view());
  const QuantResult ref = quantize(make_preset("mxfp8.ascend"), x.view());
  std::int64_t differing = 0;
  for (std::size_t i = 0; i < q.payload.nbytes(); ++i)
    differing += static_cast<const std::uint8_t*>(q.payload.raw())[i] != static_cast<const std::uint8_t*>(ref.payload.raw())[i];
  ASSERT_GT(differing, 0);

  const RunResult r = run({"infer", d.string(), "--json"});
  EXPECT_EQ(r.status, 1) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["exact"], false);
  EXPECT_EQ(j["preset"], "mxfp8.ascend");
  EXPECT_EQ(j["params"]["rounding"], "rne");
  EXPECT_EQ(j["residual"]["payload_bytes_differing"], differing);
  EXPECT_EQ(j["residual"]["scale_bytes_differing"], 0);
  ASSERT_EQ(j["residual"]["diagnoses"].size(), 1u);
  EXPECT_EQ(j["residual"]["diagnoses"][0]["signature"], "rounding_mode");
  EXPECT_EQ(j["residual"]["diagnoses"][0]["cases"], nlohmann::json::array({"randn"}));
  const RunResult text = run({"infer", d.string()});
  EXPECT_EQ(text.status, 1);
  EXPECT_NE(text.out.find("  residual: " + std::to_string(differing) + " payload bytes, 0 scale bytes in 1 case(s), "
                          "diagnosis: rounding_mode\n"),
            std::string::npos)
      << text.out;
}

TEST_F(LabCli, InferRefusesBadInput) {
  expect_bad_input(run({"infer", dir("missing").string()}), "manifest.json");
  const fs::path d = dir("no_outputs");
  ASSERT_EQ(run({"cases", "--preset", "hif4", "--out", d.string()}).status, 0);
  expect_bad_input(run({"infer", d.string()}), "no device outputs");
  expect_bad_input(run({"infer", d.string(), "--family", "int9"}), "unknown family");
}

TEST_F(LabCli, InferAndCompareRefuseAWrongShapedPayloadAlike) {
  // A payload of another shape is bad input to both (exit 2, the case named), not a closest
  // contract whose residual is every byte.
  const fs::path d = dir("short_payload");
  ASSERT_EQ(run({"cases", "--preset", "mxfp8.ascend", "--out", d.string()}).status, 0);
  ASSERT_EQ(run({"emulate", "--preset", "mxfp8.ascend", d.string()}).status, 0);
  const Tensor p = npy::read(d / "randn" / "payload.npy");
  ASSERT_EQ(p.shape().size(), 2u);
  std::ofstream(d / "randn" / "payload.npy", std::ios::binary)
      << encoded(Tensor(p.dtype(), {p.shape()[0], p.shape()[1] / 2}).view());
  expect_bad_input(run({"compare", d.string()}), "the device's payload has shape (32, 128), the contract gives (32, 256)");
  expect_bad_input(run({"infer", d.string()}), "case randn: the device's payload has shape (32, 128) of u8, and no contract gives that");
}

}  // namespace
}  // namespace qexact
