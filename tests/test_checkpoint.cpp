// `qexact quantize` of a .safetensors checkpoint, run as a process (QEXACT_CLI) on a small
// synthetic checkpoint: each <name>.payload / <name>.scale must equal, byte for byte, what
// `qexact quantize` writes for that tensor alone as .npy; include/exclude select; skipped tensors
// are copied through and listed; --strict and bad input exit 2 and leave no output.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iomanip>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_test_util.hpp"
#include "io/npy.hpp"
#include "io/safetensors.hpp"
#include "qexact/contract.hpp"

namespace qexact {
namespace {
namespace st = safetensors;
using Bytes = std::vector<std::uint8_t>;
using test::RunResult;

Bytes bytes_of(const Tensor& t) {
  const auto* b = static_cast<const std::uint8_t*>(t.raw());
  return Bytes(b, b + t.nbytes());
}

Tensor random_tensor(DType dt, const Shape& shape, std::uint32_t seed) {
  return from_f32_vector(test::random_values(shape_numel(shape), seed), shape, dt);
}

const st::Entry& find_entry(const st::Archive& a, const std::string& name) {
  for (const st::Entry& e : a.entries)
    if (e.name == name) return e;
  throw std::runtime_error("no tensor " + name);
}

bool has_entry(const st::Archive& a, const std::string& name) {
  for (const st::Entry& e : a.entries)
    if (e.name == name) return true;
  return false;
}

// The summary line of `name` split on blanks: name, shape words..., dtype, SQNR, sat %, in, out.
std::vector<std::string> summary_row(const std::string& out, const std::string& name) {
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name + " ", 0) != 0) continue;
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string x; words >> x;) w.push_back(x);
    return w;
  }
  return {};
}

class CheckpointTest : public test::CliTest {
 protected:
  CheckpointTest() : CliTest("qexact_ckpt_") {}

  void SetUp() override {
    CliTest::SetUp();
    if (IsSkipped()) return;
    write_checkpoint();
  }

  // The synthetic checkpoint: f32, bf16 and f16 weights, a length no 32-block divides, a
  // tensor with one value the floor rule must clamp, and an I64 tensor qexact cannot quantize.
  void write_checkpoint() {
    st::Archive a;
    a.metadata = {{"format", "pt"}};
    a.entries.push_back(st::make_entry("layer.0.weight", "F32", random_tensor(DType::f32, {4, 64}, 11).view()));
    a.entries.push_back(st::make_entry("layer.0.bias", "BF16", random_tensor(DType::bf16, {64}, 12).view()));
    a.entries.push_back(st::make_entry("layer.1.weight", "F16", random_tensor(DType::f16, {2, 96}, 13).view()));
    a.entries.push_back(st::make_entry("odd", "F32", random_tensor(DType::f32, {3, 33}, 14).view()));
    // 500 lies between 448 * 2^0 and 2^9: the floor rule gives scale 2^0 and E4M3 clamps it to 448.
    std::vector<float> clamp(32, 1.0f);
    clamp[5] = 500.0f;
    a.entries.push_back(st::make_entry("clamped", "F32", from_f32_vector(clamp, {1, 32}, DType::f32).view()));
    Bytes ids(8 * 4);
    for (std::size_t i = 0; i < 4; ++i) ids[i * 8] = static_cast<std::uint8_t>(i);
    a.entries.push_back(st::Entry{"position_ids", "I64", {1, 4}, ids});
    st::write(work() / "model.safetensors", a);
    input_ = a;
  }

  // Every quantized tensor of out.safetensors equals `qexact quantize` of the tensor as .npy;
  // every other tensor is the input's, unchanged.
  void expect_same_as_npy_quantize(const std::string& preset, const st::Archive& out) {
    const auto quantized = nlohmann::json::parse(out.metadata.at("qexact.quantized"));
    for (const st::Entry& e : input_.entries) {
      SCOPED_TRACE(e.name);
      if (!quantized.contains(e.name)) {
        EXPECT_EQ(find_entry(out, e.name).bytes, e.bytes);
        EXPECT_EQ(find_entry(out, e.name).dtype, e.dtype);
        EXPECT_FALSE(has_entry(out, e.name + ".payload"));
        continue;
      }
      EXPECT_FALSE(has_entry(out, e.name));
      const Tensor x = st::to_tensor(e);
      const std::string npy_name = e.name + ".npy", dir = e.name + ".q";
      // --force: the directory of an earlier preset's round is replaced.
      std::vector<std::string> args = {"quantize", "--preset", preset, npy_name, "--out", dir, "--force"};
      Tensor stored = x;
      if (x.dtype() == DType::bf16) {
        stored = Tensor(DType::u16, x.shape());
        std::memcpy(stored.raw(), x.raw(), x.nbytes());
        args.insert(args.end(), {"--dtype", "bf16"});
      }
      put_npy(npy_name, stored);
      const RunResult r = run(args);
      ASSERT_EQ(r.status, 0) << r.err;
      const Tensor payload = npy::read(work() / dir / "payload.npy");
      const Tensor scale = npy::read(work() / dir / "scale.npy");
      const st::Entry& p = find_entry(out, e.name + ".payload");
      const st::Entry& s = find_entry(out, e.name + ".scale");
      EXPECT_EQ(p.shape, payload.shape());
      EXPECT_EQ(s.shape, scale.shape());
      EXPECT_EQ(p.bytes, bytes_of(payload)) << "payload bytes differ";
      EXPECT_EQ(s.bytes, bytes_of(scale)) << "scale bytes differ";
      EXPECT_EQ(quantized[e.name]["dtype"], dtype_name(x.dtype()));
    }
  }

  st::Archive input_;
};

TEST_F(CheckpointTest, EveryTensorEqualsQuantizingItAsNpy) {
  struct Case {
    const char* preset;
    const char* payload_dtype;
    const char* scale_dtype;
  };
  for (const Case& c : {Case{"mxfp8.ascend", "F8_E4M3", "F8_E8M0"}, Case{"mx.ocp.e5m2", "F8_E5M2", "F8_E8M0"},
                        Case{"mx.ocp.e2m1", "U8", "F8_E8M0"}, Case{"q8_0.ggml", "I8", "F16"},
                        Case{"int8.token.blaze", "I8", "F32"}}) {
    SCOPED_TRACE(c.preset);
    const std::string out_name = std::string(c.preset) + ".safetensors";
    const RunResult r = run({"quantize", "--preset", c.preset, "model.safetensors", "--out", out_name});
    ASSERT_EQ(r.status, 0) << r.err;
    const st::Archive out = st::read(work() / out_name);
    expect_same_as_npy_quantize(c.preset, out);
    EXPECT_EQ(find_entry(out, "layer.0.weight.payload").dtype, c.payload_dtype);
    EXPECT_EQ(find_entry(out, "layer.0.weight.scale").dtype, c.scale_dtype);
    EXPECT_EQ(out.metadata.at("format"), "pt");
    EXPECT_EQ(out.metadata.at("qexact.preset"), c.preset);
    for (const auto& [key, value] : params(make_preset(c.preset))) EXPECT_EQ(out.metadata.at("qexact.param." + key), value);
    EXPECT_NE(out.metadata.at("qexact.naming").find("<name>.payload"), std::string::npos);
    // The I64 tensor was matched (no --include) and is skipped, not lost.
    EXPECT_NE(r.out.find("skipped position_ids: dtype I64 is not a float input"), std::string::npos) << r.out;
    EXPECT_TRUE(nlohmann::json::parse(out.metadata.at("qexact.skipped")).contains("position_ids"));
    const auto row = summary_row(r.out, "layer.0.weight");
    ASSERT_GE(row.size(), 7u) << r.out;
    EXPECT_EQ(row[row.size() - 2], "1024");  // 4 * 64 f32
    if (std::string(c.payload_dtype) == "I8") {
      // A scale rounded (to fp32 or f16) a hair below amax / 127 makes amax round to 127, not clamp.
      for (const char* name : {"layer.0.weight", "layer.1.weight", "odd"}) {
        const auto r8 = summary_row(r.out, name);
        if (!r8.empty()) {
          EXPECT_EQ(r8[r8.size() - 3], "0.0000") << name;
        }
      }
    }
    EXPECT_NE(r.out.find("total: "), std::string::npos);
  }
}

TEST_F(CheckpointTest, SameInputSameBytes) {
  ASSERT_EQ(run({"quantize", "--preset", "mxfp8.ascend", "model.safetensors", "--out", "a.safetensors"}).status, 0);
  ASSERT_EQ(run({"quantize", "--preset", "mxfp8.ascend", "--threads", "1", "model.safetensors", "--out",
                 "b.safetensors"}).status,
            0);
  EXPECT_EQ(get("a.safetensors"), get("b.safetensors"));
}

TEST_F(CheckpointTest, IncludeAndExcludeSelectByGlob) {
  const RunResult r = run({"quantize", "--preset", "mxfp8.ascend", "--include", "layer.*", "--exclude", "*.bias",
                           "model.safetensors", "--out", "out.safetensors"});
  ASSERT_EQ(r.status, 0) << r.err;
  const st::Archive out = st::read(work() / "out.safetensors");
  std::set<std::string> names;
  for (const st::Entry& e : out.entries) names.insert(e.name);
  EXPECT_EQ(names, (std::set<std::string>{"clamped", "layer.0.bias", "layer.0.weight.payload", "layer.0.weight.scale",
                                          "layer.1.weight.payload", "layer.1.weight.scale", "odd", "position_ids"}));
  expect_same_as_npy_quantize("mxfp8.ascend", out);
  EXPECT_NE(r.out.find("0 skipped, 4 copied unmatched"), std::string::npos) << r.out;  // position_ids was not matched
}

TEST_F(CheckpointTest, TensorsTheContractRejectsAreSkippedAndCopied) {
  // tail=reject: a last dimension of 33 is not a multiple of 32.
  const RunResult r = run({"quantize", "--preset", "mxfp8.torchao.floor", "--exclude", "position_ids",
                           "model.safetensors", "--out", "out.safetensors"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("skipped odd: last dimension 33"), std::string::npos) << r.out;
  const st::Archive out = st::read(work() / "out.safetensors");
  EXPECT_EQ(find_entry(out, "odd").bytes, find_entry(input_, "odd").bytes);
  const auto skipped = nlohmann::json::parse(out.metadata.at("qexact.skipped"));
  ASSERT_TRUE(skipped.contains("odd"));
  EXPECT_NE(skipped["odd"].get<std::string>().find("tail=reject"), std::string::npos);
  expect_same_as_npy_quantize("mxfp8.torchao.floor", out);
}

TEST_F(CheckpointTest, SummaryCountsClampedElementsAndExactTensors) {
  const RunResult r = run({"quantize", "--preset", "mxfp8.torchao.floor", "--include", "clamped", "model.safetensors",
                           "--out", "out.safetensors"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto row = summary_row(r.out, "clamped");
  ASSERT_EQ(row.size(), 8u) << r.out;  // name, "(1,", "32)", dtype, SQNR, sat %, in, out
  EXPECT_EQ(row[3], "f32");
  EXPECT_EQ(row[5], "3.1250");  // 1 of 32 elements clamped
  EXPECT_EQ(row[6], "128");
  EXPECT_EQ(row[7], "33");  // 32 E4M3 codes + 1 E8M0 scale
  // The only error is 500 -> 448: SQNR = 10 log10((31 + 500^2) / 52^2).
  std::ostringstream expected;
  expected << std::fixed << std::setprecision(2) << 10.0 * std::log10((31.0 + 500.0 * 500.0) / (52.0 * 52.0));
  EXPECT_EQ(row[4], expected.str());

  // Every value of `exact` is an int8 multiple of its row's scale (amax 127 -> scale 1).
  st::Archive a;
  std::vector<float> v(64);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(static_cast<int>(i) * 4 - 127);
  a.entries.push_back(st::make_entry("exact", "F32", from_f32_vector(v, {1, 64}, DType::f32).view()));
  st::write(work() / "exact.safetensors", a);
  const RunResult e = run({"quantize", "--preset", "int8.token.blaze", "exact.safetensors", "--out", "e.safetensors"});
  ASSERT_EQ(e.status, 0) << e.err;
  const auto erow = summary_row(e.out, "exact");
  ASSERT_EQ(erow.size(), 8u) << e.out;
  EXPECT_EQ(erow[4], "inf");
  EXPECT_EQ(erow[5], "0.0000");
}

TEST_F(CheckpointTest, StrictMakesASkipAnErrorAndWritesNothing) {
  expect_rejected({"quantize", "--preset", "mxfp8.torchao.floor", "--strict", "--exclude", "position_ids",
                   "model.safetensors", "--out", "out.safetensors"},
                  "tensor 'odd' cannot be quantized (--strict)");
  // Nothing to skip: --strict succeeds.
  EXPECT_EQ(run({"quantize", "--preset", "mxfp8.ascend", "--strict", "--exclude", "position_ids", "model.safetensors",
                 "--out", "out.safetensors"})
                .status,
            0);
}

TEST_F(CheckpointTest, BadInputExitsTwoAndWritesNothing) {
  const std::string file = get("model.safetensors");
  put("cut.safetensors", file.substr(0, file.size() - 1));
  struct Bad {
    std::vector<std::string> args;
    const char* word;
  };
  for (const Bad& b : {Bad{{"quantize", "--preset", "mxfp8.ascend", "cut.safetensors", "--out", "o.safetensors"},
                           "run past the end of the data"},
                       Bad{{"quantize", "--preset", "mxfp8.ascend", "missing.safetensors", "--out", "o.safetensors"},
                           "missing.safetensors"},
                       Bad{{"quantize", "--preset", "hif4", "model.safetensors", "--out", "o.safetensors"}, "hif4"},
                       Bad{{"quantize", "--preset", "mxfp8.ascend", "--dtype", "bf16", "model.safetensors", "--out",
                            "o.safetensors"},
                           "--dtype"},
                       Bad{{"quantize", "--preset", "mxfp8.ascend", "--include", "x", "x.npy", "--out", "d"},
                           "--include"}}) {
    SCOPED_TRACE(b.word);
    expect_rejected(b.args, b.word);
  }
}

}  // namespace
}  // namespace qexact
