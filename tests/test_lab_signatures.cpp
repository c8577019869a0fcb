// The signatures of contracts §8 end to end from the CLI: for each, `qexact cases` exports a
// preset's suite, a synthetic device is played on it (`qexact emulate` with a deliberately
// altered contract, or the contract's outputs altered by hand where no contract gives them),
// then `qexact compare DIR` must name the cause (exit 1) and `qexact infer DIR` must recover
// the altered parameters (exit 0), or, for the hand-made device, report the closest contract
// with the cause among its residual's diagnoses (exit 1).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_test_util.hpp"
#include "conformance/case_dir.hpp"
#include "io/npy.hpp"
#include "qexact/contract.hpp"
#include "qexact/quantize.hpp"
#include "qexact/tensor.hpp"

namespace qexact {
namespace {
namespace fs = std::filesystem;
using Json = nlohmann::json;
using test::RunResult;

// An int8 device without saturation: its scales are half the contract's, and its 8-bit
// conversion wraps the rounded quotient mod 256 (the device of test_compare's
// WrapAroundInsteadOfSaturation, over a whole case directory). Cases with non-finite inputs or
// a zero scale keep the contract's outputs. Returns the number of altered cases.
int wrap_int8_device(const fs::path& dir) {
  const conformance::CaseDir d = conformance::read_case_dir(dir);
  int altered = 0;
  for (const conformance::CaseEntry& e : d.cases) {
    const std::optional<conformance::DeviceOutput> out = conformance::read_device_output(d, e);
    if (!out) continue;
    const std::vector<float> x = to_f32_vector(conformance::read_case_input(d, e).view());
    Tensor scale = out->scale, payload = out->payload;
    const std::int64_t rows = scale.numel(), k = rows > 0 ? static_cast<std::int64_t>(x.size()) / rows : 0;
    bool usable = rows > 0 && scale.dtype() == DType::f32;
    for (std::int64_t r = 0; r < rows && usable; ++r)
      usable = std::isfinite(scale.data<float>()[r]) && scale.data<float>()[r] > 0.0f;
    for (float v : x) usable = usable && std::isfinite(v);
    if (!usable) continue;
    bool wraps = false;
    for (std::int64_t r = 0; r < rows; ++r) {
      const float s = scale.data<float>()[r] / 2.0f;
      scale.data<float>()[r] = s;
      for (std::int64_t i = r * k; i < (r + 1) * k; ++i) {
        const float q = std::nearbyint(x[static_cast<std::size_t>(i)] / s);
        wraps = wraps || std::fabs(q) > 127.0f;
        payload.data<std::int8_t>()[i] =
            static_cast<std::int8_t>(static_cast<std::uint8_t>(static_cast<std::int64_t>(q) & 0xFF));
      }
    }
    if (!wraps) continue;
    const auto p = npy::encode(payload.view()), s = npy::encode(scale.view());
    std::ofstream(dir / e.name / "payload.npy", std::ios::binary)
        .write(reinterpret_cast<const char*>(p.data()), static_cast<std::streamsize>(p.size()));
    std::ofstream(dir / e.name / "scale.npy", std::ios::binary)
        .write(reinterpret_cast<const char*>(s.data()), static_cast<std::streamsize>(s.size()));
    ++altered;
  }
  return altered;
}

// An int8.token device that reports one scale per row but quantized each 64 columns of a row
// with its own scale: the payload of int8.group group=64 under the row scales of int8.token.
// Rows of 64 columns or fewer, or not a multiple of 64, keep the contract's outputs. Returns
// the number of cases whose payload changed.
int chunked_int8_token_device(const fs::path& dir) {
  const conformance::CaseDir d = conformance::read_case_dir(dir);
  Contract chunked = d.contract;
  chunked.family = Family::int8_group;
  chunked.group = 64;
  int altered = 0;
  for (const conformance::CaseEntry& e : d.cases) {
    const std::optional<conformance::DeviceOutput> out = conformance::read_device_output(d, e);
    if (!out) continue;
    const Tensor x = conformance::read_case_input(d, e);
    const std::int64_t k = x.shape().empty() ? 0 : x.shape().back();
    if (k <= 64 || k % 64 != 0) continue;
    const QuantResult q = quantize(chunked, x.view());
    if (same_contents(q.payload, out->payload)) continue;
    const auto p = npy::encode(q.payload.view());
    std::ofstream(dir / e.name / "payload.npy", std::ios::binary)
        .write(reinterpret_cast<const char*>(p.data()), static_cast<std::streamsize>(p.size()));
    ++altered;
  }
  return altered;
}

struct Device {
  std::string label;
  std::string exported;                 // the preset whose cases are exported
  std::vector<std::string> emulate;     // `qexact emulate` arguments: --preset P [--param k=v]...
  std::function<int(const fs::path&)> by_hand;  // alters the emulated outputs (returns cases altered)
  std::set<std::string> signatures;     // compare's diagnoses, exactly
  std::vector<std::pair<std::string, std::string>> recovered;  // infer's parameters (exact)
  std::string family;                   // infer's family ("" = the exported preset's)
  std::string residual_signature;       // "" = infer is exact; else a residual diagnosis of the closest
  std::string explained = "";           // words compare's explanation must contain ("" = any)
};

std::vector<Device> devices() {
  return {
      {"fp32 amax", "mxfp8.ascend", {"--preset", "mxfp8.ascend", "--param", "prequant_round=none"}, {},
       {"amax_fp32_not_bf16"}, {{"prequant_round", "none"}}, "", ""},
      {"reciprocal multiply", "int8.token.blaze",
       {"--preset", "int8.token.blaze", "--param", "quotient=reciprocal", "--param", "scale_mode=before"}, {},
       {"reciprocal_divisor"}, {{"quotient", "reciprocal"}}, "", ""},
      {"MX truncation", "mxfp8.ascend", {"--preset", "mxfp8.ascend", "--param", "rounding=trunc"}, {},
       {"rounding_mode"}, {{"rounding", "trunc"}}, "", ""},
      {"int8 truncation", "int8.token.blaze", {"--preset", "int8.token.blaze", "--param", "int_rounding=trunc"}, {},
       {"rounding_mode"}, {{"int_rounding", "trunc"}}, "", ""},
      {"half-away rounding", "mxfp8.ascend", {"--preset", "mxfp8.ascend", "--param", "rounding=half_away"}, {},
       {"rounding_mode"}, {{"rounding", "half_away"}}, "", ""},
      {"MX NaN instead of saturation", "mxfp8.ascend", {"--preset", "mxfp8.ascend", "--param", "overflow=nan"}, {},
       {"wraparound"}, {{"overflow", "nan"}}, "", ""},
      {"int8 wrap-around", "int8.token.blaze", {"--preset", "int8.token.blaze"}, wrap_int8_device, {"wraparound"},
       {}, "", "wraparound"},
      {"per-tile instead of per-row", "int8.token.blaze",
       {"--preset", "q8_0.ggml", "--param", "group=64", "--param", "scale_store=f32", "--param", "quotient=divide",
        "--param", "int_rounding=rne"},
       {}, {"granularity"}, {{"group", "64"}}, "int8.group", ""},
      {"per-64-column scales reported per row", "int8.token.blaze", {"--preset", "int8.token.blaze"},
       chunked_int8_token_device, {"granularity"}, {}, "", "granularity",
       "the device reports one scale per complete row (scale shape (32,)) but its payload is, in all 8192 bytes, the "
       "payload of one scale per 64 elements of a row (int8.group, group=64)"},
      {"uniform tail divisor", "pool.mean", {"--preset", "pool.mean", "--param", "divisor=uniform"}, {},
       {"tail_rule"}, {{"divisor", "uniform"}}, "", ""},
      {"rowmajor layout", "mxfp8.ascend", {"--preset", "mxfp8.ascend", "--param", "layout=rowmajor"}, {},
       {"scale_layout"}, {{"layout", "rowmajor"}}, "", ""},
      // The swizzled layout takes whole blocks only: the device refuses the tail case.
      {"swizzled layout", "mxfp8.ascend",
       {"--preset", "mxfp8.ascend", "--param", "layout=swizzled", "--param", "tail=reject"}, {},
       {"scale_layout", "tail_rule"}, {{"layout", "swizzled"}, {"tail", "reject"}}, "", ""},
      // contracts §9: the porting mistakes of fp8.scaled and nvfp4.
      {"fp8 recomputed divisor", "fp8.ascend.token", {"--preset", "fp8.ascend.token", "--param", "quotient=reciprocal"},
       {}, {"reciprocal_divisor"}, {{"quotient", "reciprocal"}}, "", ""},
      {"fp8 1/s stored", "fp8.ascend.token", {"--preset", "fp8.ascend.token", "--param", "stored=inverse"}, {},
       {"stored_scale"}, {{"stored", "inverse"}}, "", ""},
      {"fp8 per-tensor instead of per-row", "fp8.ascend.token",
       {"--preset", "fp8.ascend.token", "--param", "granularity=tensor"}, {}, {"granularity"},
       {{"granularity", "tensor"}}, "", ""},
      {"fp8 power-of-two scales", "fp8.torchao.rowwise", {"--preset", "fp8.torchao.rowwise", "--param", "scale_pow2=up"},
       {}, {"scale_pow2"}, {{"scale_pow2", "up"}}, "", ""},
      {"nvfp4 two level", "nvfp4.torchao", {"--preset", "nvfp4.torchao", "--param", "tensor_scale=amax"}, {},
       {"tensor_scale"}, {{"tensor_scale", "amax"}}, "", ""},
  };
}

class LabSignatures : public test::CliTest {
 protected:
  LabSignatures() : CliTest("qexact_signatures_") {}

  Json json_of(const RunResult& r) const {
    const Json j = Json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.out << r.err;
    return j;
  }
};

std::set<std::string> signatures_of(const Json& diagnoses) {
  std::set<std::string> s;
  for (const Json& d : diagnoses) s.insert(d["signature"].get<std::string>());
  return s;
}

TEST_F(LabSignatures, CompareNamesTheCauseAndInferRecoversIt) {
  int n = 0;
  for (const Device& dev : devices()) {
    SCOPED_TRACE(dev.label);
    const std::string dir = "device" + std::to_string(n++);
    ASSERT_EQ(run({"cases", "--preset", dev.exported, "--out", dir}).status, 0);
    std::vector<std::string> emulate{"emulate"};
    emulate.insert(emulate.end(), dev.emulate.begin(), dev.emulate.end());
    emulate.push_back(dir);
    const RunResult e = run(emulate);
    ASSERT_EQ(e.status, 0) << e.err;
    if (dev.by_hand) {
      ASSERT_GT(dev.by_hand(work() / dir), 0);
    }

    const RunResult cmp = run({"compare", dir, "--json"});
    EXPECT_EQ(cmp.status, 1) << cmp.err;
    const Json c = json_of(cmp);
    EXPECT_GT(c["payload_bytes_differing"].get<std::int64_t>() + c["scale_bytes_differing"].get<std::int64_t>(), 0);
    EXPECT_EQ(signatures_of(c["diagnoses"]), dev.signatures);
    // A case the device refused (no outputs) that the contract quantizes differs in every byte.
    const conformance::CaseDir cases = conformance::read_case_dir(work() / dir);
    std::size_t refused = 0;
    for (const conformance::CaseEntry& k : cases.cases)
      refused += k.expect_error.empty() && !conformance::read_device_output(cases, k) ? 1 : 0;
    std::size_t reported = 0;
    for (const Json& k : c["cases"])
      if (k["refused_by_device"] == true) {
        ++reported;
        EXPECT_EQ(k["payload_bytes_differing"], k["payload_bytes_total"]) << k["name"];
        EXPECT_EQ(k["scale_bytes_differing"], k["scale_bytes_total"]) << k["name"];
      }
    EXPECT_EQ(reported, refused);
    const RunResult cmp_text = run({"compare", dir});
    EXPECT_NE(cmp_text.out.find(dev.explained), std::string::npos) << cmp_text.out;
    EXPECT_EQ(cmp_text.status, 1);
    for (const std::string& s : dev.signatures) EXPECT_NE(cmp_text.out.find("  " + s + " ("), std::string::npos) << s;
    EXPECT_EQ(cmp_text.out.find("at group -1"), std::string::npos) << cmp_text.out;
    EXPECT_EQ(cmp_text.out.find("element -1"), std::string::npos) << cmp_text.out;

    const RunResult inf = run({"infer", dir, "--json"});
    const Json j = json_of(inf);
    const std::string family = dev.family.empty() ? family_name(make_preset(dev.exported).family) : dev.family;
    EXPECT_EQ(j["family"], family);
    for (const auto& [k, v] : dev.recovered) EXPECT_EQ(j["params"][k], v) << k;
    if (dev.residual_signature.empty()) {
      EXPECT_EQ(inf.status, 0) << inf.err;
      EXPECT_EQ(j["exact"], true);
      EXPECT_TRUE(j["residual"]["diagnoses"].empty());
    } else {
      EXPECT_EQ(inf.status, 1) << inf.err;
      EXPECT_EQ(j["exact"], false);
      EXPECT_TRUE(signatures_of(j["residual"]["diagnoses"]).count(dev.residual_signature)) << inf.out;
      const RunResult text = run({"infer", dir});
      EXPECT_EQ(text.status, 1);
      EXPECT_EQ(text.out.rfind("closest: ", 0), 0u) << text.out;
      EXPECT_NE(text.out.find("residual: "), std::string::npos) << text.out;
      EXPECT_NE(text.out.find(dev.residual_signature), std::string::npos) << text.out;
    }
  }
}

}  // namespace
}  // namespace qexact
