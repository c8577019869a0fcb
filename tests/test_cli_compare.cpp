// `qexact compare`, run as a process (its path comes from QEXACT_CLI) in a fresh temporary
// directory: files and exported case directories, text and JSON, exit status 0 (every byte
// matches), 1 (bytes differ), 2 (bad input, one "qexact: error: " line). Expected counts are
// computed here from the library's outputs of the two contracts, never copied from the report.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_test_util.hpp"
#include "conformance/case_dir.hpp"
#include "tensor_test_util.hpp"
#include "conformance/contract_output.hpp"
#include "io/npy.hpp"
#include "qexact/contract.hpp"
#include "qexact/formats/bf16.hpp"

namespace qexact {
namespace {
namespace fs = std::filesystem;
using Json = nlohmann::json;

const RunOptions kRef{Engine::reference, 1};

using test::RunResult;

std::int64_t differing(const Tensor& a, const Tensor& b) {
  const auto* pa = static_cast<const std::uint8_t*>(a.raw());
  const auto* pb = static_cast<const std::uint8_t*>(b.raw());
  std::int64_t n = 0;
  for (std::size_t i = 0; i < std::min(a.nbytes(), b.nbytes()); ++i) n += pa[i] != pb[i] ? 1 : 0;
  return n;
}

// An f32 input whose bf16 rounding lifts one group maximum per row into the next binade.
Tensor binade_input(std::int64_t rows) {
  std::vector<float> v = test::normal_values(rows * 64, 3.0f, 101);
  for (std::int64_t r = 0; r < rows; ++r) v[static_cast<std::size_t>(r * 64 + 3)] = std::ldexp(0.99999f, 8);
  return from_f32_vector(v, {rows, 64}, DType::f32);
}

class CompareCli : public test::CliTest {
 protected:
  CompareCli() : CliTest("qexact_cli_compare_") {}

  // Device outputs of contract `device` for x, beside `prefix`.
  void put_device(const std::string& prefix, const Contract& device, const Tensor& x) const {
    const conformance::ContractOutput o = conformance::run_contract(device, x.view(), kRef);
    if (conformance::output_kind(device) == conformance::OutputKind::single) {
      put_npy(prefix + "output.npy", o.output);
    } else {
      put_npy(prefix + "payload.npy", o.payload);
      put_npy(prefix + "scale.npy", o.scale);
    }
  }

  Json run_json(const std::vector<std::string>& args, int status) const {
    const RunResult r = run(args);
    EXPECT_EQ(r.status, status) << r.err << r.out;
    EXPECT_EQ(r.err, "");
    const Json j = Json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.out;
    return j;
  }
};

TEST_F(CompareCli, IdenticalOutputsExitZero) {
  const Tensor x = binade_input(4);
  put_npy("x.npy", x);
  const RunResult q = run({"quantize", "--preset", "mxfp8.ascend", "x.npy", "--out", "dev"});
  ASSERT_EQ(q.status, 0) << q.err;
  const RunResult r = run({"compare", "--preset", "mxfp8.ascend", "--input", "x.npy", "--payload", "dev/payload.npy",
                           "--scale", "dev/scale.npy"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("identical: every payload and scale byte matches"), std::string::npos) << r.out;
  const Json j = run_json({"compare", "--preset", "mxfp8.ascend", "--input", "x.npy", "--payload",
                           "dev/payload.npy", "--scale", "dev/scale.npy", "--json"},
                          0);
  EXPECT_EQ(j["payload_bytes_differing"], 0);
  EXPECT_EQ(j["payload_bytes_total"], 4 * 64);
  EXPECT_EQ(j["scale_bytes_differing"], 0);
  EXPECT_EQ(j["scale_bytes_total"], 4 * 2);
  EXPECT_TRUE(j["diagnoses"].empty());
}

TEST_F(CompareCli, Fp32AmaxDeviceIsDiagnosedInJsonAndText) {
  const Tensor x = binade_input(6);
  put_npy("x.npy", x);
  const Contract c = make_preset("mxfp8.ascend");
  const Contract device = make_contract("mxfp8.ascend", {"prequant_round=none"});
  put_device("", device, x);
  const conformance::ContractOutput ref = conformance::run_contract(c, x.view(), kRef);
  const conformance::ContractOutput dev = conformance::run_contract(device, x.view(), kRef);
  const std::vector<std::string> args{"compare", "--preset", "mxfp8.ascend", "--input", "x.npy",
                                      "--payload", "payload.npy", "--scale", "scale.npy"};
  std::vector<std::string> json_args = args;
  json_args.push_back("--json");
  const Json j = run_json(json_args, 1);
  EXPECT_EQ(j["payload_bytes_differing"], differing(ref.payload, dev.payload));
  EXPECT_EQ(j["scale_bytes_differing"], differing(ref.scale, dev.scale));
  EXPECT_EQ(j["scale_bytes_differing"], 6);
  EXPECT_EQ(j["scales_differing"], 6);  // pairs layout: one byte per scale
  EXPECT_EQ(j["scale_delta_histogram"], Json({{"-1", 6}}));
  EXPECT_EQ(j["max_scale_delta"], 1);
  ASSERT_EQ(j["diagnoses"].size(), 1u);
  EXPECT_EQ(j["diagnoses"][0]["signature"], "amax_fp32_not_bf16");
  EXPECT_TRUE(j["diagnoses"][0]["evidence"].is_object());
  EXPECT_EQ(j["cases"].size(), 1u);
  const RunResult text = run(args);
  EXPECT_EQ(text.status, 1);
  EXPECT_NE(text.out.find("all 6 differing scale bytes are exactly one binade low"), std::string::npos) << text.out;
}

TEST_F(CompareCli, CaseDirectoryPerCaseAndOverride) {
  const Contract c = make_preset("mxfp8.ascend");
  std::vector<conformance::Case> cases(2);
  cases[0].name = "lifted";
  cases[0].description = "maxima that bf16 rounding lifts";
  cases[0].input = binade_input(4);
  cases[1].name = "plain";
  cases[1].description = "bf16-exact values";
  cases[1].input = from_f32_vector(std::vector<float>(4 * 64, 1.5f), {4, 64}, DType::f32);
  std::vector<conformance::ExportCase> exported{{&cases[0], "adversarial"}, {&cases[1], "adversarial"}};
  conformance::write_case_dir(work() / "cases", c, exported);
  const Contract device = make_contract("mxfp8.ascend", {"prequant_round=none"});
  for (const conformance::Case& k : cases) put_device("cases/" + k.name + "/", device, k.input);

  const Json j = run_json({"compare", "cases", "--json"}, 1);
  ASSERT_EQ(j["cases"].size(), 2u);
  EXPECT_EQ(j["cases"][1]["name"], "plain");
  EXPECT_EQ(j["cases"][1]["payload_bytes_differing"], 0);
  EXPECT_EQ(j["cases"][1]["scale_bytes_differing"], 0);
  const conformance::ContractOutput ref = conformance::run_contract(c, cases[0].input.view(), kRef);
  const conformance::ContractOutput dev = conformance::run_contract(device, cases[0].input.view(), kRef);
  EXPECT_EQ(j["payload_bytes_differing"], differing(ref.payload, dev.payload));
  EXPECT_EQ(j["scale_bytes_differing"], differing(ref.scale, dev.scale));
  ASSERT_EQ(j["diagnoses"].size(), 1u);
  EXPECT_EQ(j["diagnoses"][0]["signature"], "amax_fp32_not_bf16");
  EXPECT_EQ(j["diagnoses"][0]["cases"], Json({"lifted"}));

  // Checked against the device's own contract, every byte matches.
  const RunResult same = run({"compare", "cases", "--param", "prequant_round=none"});
  EXPECT_EQ(same.status, 0) << same.err << same.out;
}

TEST_F(CompareCli, PooledMeanOutputAndTailDivisor) {
  const Tensor x = from_f32_vector(test::normal_values(2 * 100 * 4, 1.0f, 5), {2, 100, 4}, DType::f32);
  put_npy("x.npy", x);
  put_device("", make_contract("pool.mean", {"divisor=uniform"}), x);
  const Json j = run_json({"compare", "--preset", "pool.mean", "--input", "x.npy", "--output", "output.npy", "--json"}, 1);
  const Tensor ref = conformance::run_contract(make_preset("pool.mean"), x.view(), kRef).output;
  const Tensor dev = conformance::run_contract(make_contract("pool.mean", {"divisor=uniform"}), x.view(), kRef).output;
  EXPECT_EQ(j["payload_bytes_differing"], differing(ref, dev));
  ASSERT_EQ(j["diagnoses"].size(), 1u);
  EXPECT_EQ(j["diagnoses"][0]["signature"], "tail_rule");
  const RunResult ok = run({"compare", "--preset", "pool.mean", "--param", "divisor=uniform", "--input", "x.npy",
                            "--output", "output.npy"});
  EXPECT_EQ(ok.status, 0) << ok.err;
}

TEST_F(CompareCli, Bf16InputAsBitPatterns) {
  const std::vector<float> v = test::normal_values(4 * 64, 2.0f, 9);
  std::vector<std::uint16_t> bits(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) bits[i] = f32_to_bf16(v[i]);
  Tensor u16(DType::u16, {4, 64});
  std::memcpy(u16.raw(), bits.data(), bits.size() * 2);
  put_npy("x.npy", u16);
  ASSERT_EQ(run({"quantize", "--preset", "mxfp8.ascend", "--dtype", "bf16", "x.npy", "--out", "dev"}).status, 0);
  const RunResult r = run({"compare", "--preset", "mxfp8.ascend", "--dtype", "bf16", "--input", "x.npy", "--payload",
                           "dev/payload.npy", "--scale", "dev/scale.npy"});
  EXPECT_EQ(r.status, 0) << r.err << r.out;
}

TEST_F(CompareCli, ListedInHelp) {
  const RunResult h = run({"--help"});
  EXPECT_EQ(h.status, 0);
  EXPECT_NE(h.out.find("compare"), std::string::npos) << h.out;
  const RunResult sub = run({"compare", "--help"});
  EXPECT_EQ(sub.status, 0);
  for (const char* option : {"--preset", "--param", "--input", "--payload", "--scale", "--output", "--json"})
    EXPECT_NE(sub.out.find(option), std::string::npos) << option;
}

TEST_F(CompareCli, BadInputExitsTwoWithOneLine) {
  const Tensor x = binade_input(4);
  put_npy("x.npy", x);
  put_device("", make_preset("mxfp8.ascend"), x);
  put_npy("short.npy", Tensor(DType::u8, {4, 32}));
  put_npy("f32scale.npy", Tensor(DType::f32, {4, 1, 2}));
  put_npy("odd.npy", Tensor(DType::u8, {5}));
  const std::vector<std::string> base{"compare", "--preset", "mxfp8.ascend", "--input", "x.npy"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  expect_rejected(with({"--payload", "missing.npy", "--scale", "scale.npy"}), "missing.npy: no such file");
  expect_rejected(with({"--payload", "short.npy", "--scale", "scale.npy"}),
                  "payload has shape (4, 32), the contract gives (4, 64)");
  expect_rejected(with({"--payload", "payload.npy", "--scale", "f32scale.npy"}), "scale holds f32 values");
  expect_rejected(with({"--payload", "payload.npy", "--scale", "odd.npy"}),
                  "scale has shape (5,), the contract gives (4, 1, 2)");
  expect_rejected(with({"--output", "payload.npy"}), "takes --payload and --scale");
  expect_rejected({"compare", "--preset", "mxfp8.ascend", "--payload", "payload.npy", "--scale", "scale.npy"},
                  "--input is required");
  expect_rejected({"compare", "--preset", "nope", "--input", "x.npy"}, "unknown preset 'nope'");
  expect_rejected({"compare", "--input", "x.npy"}, "--preset is required");
  expect_rejected({"compare", "nodir"}, "not an exported case directory");
  // A model folder handed to the lab: the error names the commands that take one.
  std::filesystem::create_directories(work() / "model");
  std::ofstream(work() / "model" / "config.json") << "{}";
  expect_rejected({"compare", "model"}, "`qexact verify model --source ORIGINAL` compares its quantized tensors");
  expect_rejected({"infer", "model"}, "`qexact infer model --source ORIGINAL` names their recipe");

  std::vector<conformance::Case> cases(1);
  cases[0].name = "only";
  cases[0].input = x;
  conformance::write_case_dir(work() / "cases", make_preset("mxfp8.ascend"), {{&cases[0], "adversarial"}});
  expect_rejected({"compare", "cases"}, "no device outputs (payload.npy, scale.npy)");
}

}  // namespace
}  // namespace qexact
