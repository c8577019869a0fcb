// The exported-case directory: what `qexact cases` writes and `compare` / `infer` read back.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "conformance/case_dir.hpp"
#include "conformance/cases.hpp"
#include "io/npy.hpp"
#include "qexact/error.hpp"
#include "qexact/quantize.hpp"

namespace qexact::conformance {
namespace {
namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("qexact_case_dir_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p;
}

void write_file(const fs::path& p, const std::vector<std::uint8_t>& bytes) {
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

TEST(CaseDir, RoundTripsManifestAndInputs) {
  const Contract c = make_contract("mxfp8.ascend");
  const std::vector<Case> cases = adversarial_cases(c, 7);
  std::vector<ExportCase> exported;
  for (const Case& k : cases) exported.push_back({&k, "adversarial"});
  const fs::path dir = fresh_dir("roundtrip");
  write_case_dir(dir, c, exported);

  const CaseDir d = read_case_dir(dir);
  EXPECT_EQ(d.contract.preset, "mxfp8.ascend");
  EXPECT_EQ(params(d.contract), params(c));
  ASSERT_EQ(d.cases.size(), cases.size());
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const CaseEntry& e = d.cases[i];
    EXPECT_EQ(e.name, cases[i].name);
    EXPECT_EQ(e.hits, cases[i].hits);
    EXPECT_EQ(e.predicate, cases[i].target ? cases[i].target->name : "");
    const Tensor x = read_case_input(d, e);
    ASSERT_EQ(x.dtype(), cases[i].input.dtype());
    ASSERT_EQ(x.shape(), cases[i].input.shape());
    EXPECT_EQ(npy::encode(x.view()), npy::encode(cases[i].input.view())) << e.name;
    EXPECT_FALSE(read_device_output(d, e).has_value());
  }
  fs::remove_all(dir);
}

TEST(CaseDir, RefusesAnExistingDirectoryAndLeavesNoStaging) {
  const Contract c = make_contract("int8.token.blaze");
  const std::vector<Case> cases = adversarial_cases(c, 1);
  const fs::path dir = fresh_dir("exists");
  fs::create_directories(dir);
  try {
    write_case_dir(dir, c, {{&cases[0], "adversarial"}});
    FAIL() << "an existing directory was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::bad_argument);
  }
  EXPECT_TRUE(fs::is_empty(dir));
  for (const auto& entry : fs::directory_iterator(dir.parent_path()))
    EXPECT_EQ(entry.path().filename().string().find("." + dir.filename().string() + ".staging"), std::string::npos);
  fs::remove_all(dir);
}

TEST(CaseDir, ATrailingSlashNamesTheSameDirectory) {
  const Contract c = make_contract("int8.token.blaze");
  const std::vector<Case> cases = adversarial_cases(c, 1);
  const fs::path dir = fresh_dir("slash");
  write_case_dir(dir.string() + "/", c, {{&cases[0], "adversarial"}});
  const CaseDir d = read_case_dir(dir);
  ASSERT_EQ(d.cases.size(), 1u);
  EXPECT_EQ(d.cases[0].name, cases[0].name);
  for (const auto& entry : fs::directory_iterator(dir))  // nothing staged inside it
    EXPECT_EQ(entry.path().filename().string().find(".staging"), std::string::npos) << entry.path();
  EXPECT_THROW(write_case_dir(dir.string() + "/", c, {{&cases[0], "adversarial"}}), Error);  // exists now
  fs::remove_all(dir);
}

TEST(CaseDir, ReadsDeviceOutputsAndNamesAMissingOne) {
  const Contract c = make_contract("int8.token.blaze");
  const std::vector<Case> cases = adversarial_cases(c, 3);
  const fs::path dir = fresh_dir("outputs");
  write_case_dir(dir, c, {{&cases[0], "adversarial"}});
  const CaseDir d = read_case_dir(dir);
  const Tensor x = read_case_input(d, d.cases[0]);
  const QuantResult q = quantize(c, x.view());
  write_file(dir / d.cases[0].name / "payload.npy", npy::encode(q.payload.view()));
  try {
    (void)read_device_output(d, d.cases[0]);
    FAIL() << "a missing scale.npy was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::bad_file);
    EXPECT_NE(std::string(e.what()).find("scale.npy"), std::string::npos) << e.what();
  }
  write_file(dir / d.cases[0].name / "scale.npy", npy::encode(q.scale.view()));
  const auto out = read_device_output(d, d.cases[0]);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(npy::encode(out->payload.view()), npy::encode(q.payload.view()));
  EXPECT_EQ(npy::encode(out->scale.view()), npy::encode(q.scale.view()));
  fs::remove_all(dir);
}

TEST(CaseDir, MalformedManifestsAreNamed) {
  const fs::path dir = fresh_dir("malformed");
  fs::create_directories(dir);
  const auto expect_bad = [&](const std::string& text, const std::string& needle) {
    std::ofstream(dir / kCaseManifest, std::ios::trunc) << text;
    try {
      (void)read_case_dir(dir);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_bad("{", "not valid JSON");
  expect_bad("[]", "not a JSON object");
  expect_bad(R"({"format": "other/1"})", "format");
  expect_bad(R"({"format": "qexact-cases/1", "preset": "mxfp8.ascend", "params": {}, "cases": [{"name": "../x"}]})",
             "not a plain directory name");
  expect_bad(R"({"format": "qexact-cases/1", "preset": "mxfp8.ascend", "params": {}, "cases": [{"name": "a", "kind": "probe",
              "description": "", "predicate": "", "expect_error": "", "hits": 0, "shape": [-1], "dtype": "f32"}]})",
             "non-negative");
  fs::remove_all(dir);
  try {
    (void)read_case_dir(dir);
    FAIL() << "a missing directory was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("manifest.json"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace qexact::conformance
