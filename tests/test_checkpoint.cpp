// `qexact quantize` of a .safetensors checkpoint, run as a process (QEXACT_CLI) on a small
// synthetic checkpoint: each <name>.payload / <name>.scale must equal, byte for byte, what
// `qexact quantize` writes for that tensor alone as .npy; include/exclude select; skipped tensors
// are copied through and listed; --strict and bad input exit 2 and leave no output.
#include <gtest/gtest.h>
#include <bit>

#include <cmath>
#include <limits>
#include <cstring>
#include <iomanip>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/tensor_stats.hpp"
#include "kernels/cpu/common/simd_target.hpp"
#include "cli_test_util.hpp"
#include "io/npy.hpp"
#include "io/safetensors.hpp"
#include "qexact/checkpoint.hpp"
#include "qexact/contract.hpp"
#include "qexact/formats/element.hpp"
#include "qexact/quantize.hpp"

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
    EXPECT_EQ(out.metadata.at("qexact.preset_description"), preset_description(c.preset));
    EXPECT_EQ(out.metadata.at("qexact.preset_verified"), preset_verified(c.preset));
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
                  "tensor 'odd' cannot be quantized (strict)");
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

// The streamed output is laid out as the in-memory writer lays out the same tensors.
TEST_F(CheckpointTest, OutputIsTheCanonicalEncoding) {
  for (const char* preset : {"mxfp8.ascend", "mx.ocp.e2m1", "int8.token.blaze"}) {
    SCOPED_TRACE(preset);
    ASSERT_EQ(run({"quantize", "--preset", preset, "model.safetensors", "--out", "o.safetensors", "--force"}).status, 0);
    const std::string file = get("o.safetensors");
    const Bytes encoded = st::encode(st::read(work() / "o.safetensors"));
    EXPECT_EQ(file, std::string(encoded.begin(), encoded.end()));
  }
}

st::Archive with_tensors(std::vector<st::Entry> entries) {
  st::Archive a;
  a.entries = std::move(entries);
  return a;
}

TEST_F(CheckpointTest, AQuantizedCheckpointIsRefused) {
  ASSERT_EQ(run({"quantize", "--preset", "mxfp8.ascend", "model.safetensors", "--out", "q.safetensors"}).status, 0);
  const std::string before = get("q.safetensors");
  expect_rejected({"quantize", "--preset", "mxfp8.ascend", "q.safetensors", "--out", "qq.safetensors"},
                  "q.safetensors is already quantized by qexact (its metadata has qexact.quantized, preset mxfp8.ascend)");
  expect_rejected({"quantize", "--preset", "int8.token.blaze", "q.safetensors", "--out", "q2.safetensors"},
                  "already quantized");
  EXPECT_EQ(get("q.safetensors"), before);
}

TEST_F(CheckpointTest, AnOutputNameCollisionIsFoundBeforeAnyWork) {
  // 'a' holds a NaN, which int8 refuses only while quantizing it (under --strict, an error): the
  // collision must be reported first, before any tensor is quantized.
  std::vector<float> nan_row(64, 1.0f);
  nan_row[3] = std::nanf("");
  st::write(work() / "clash.safetensors",
            with_tensors({st::make_entry("a", "F32", from_f32_vector(nan_row, {1, 64}, DType::f32).view()),
                          st::make_entry("w", "F32", random_tensor(DType::f32, {2, 64}, 21).view()),
                          st::make_entry("w.payload", "F32", random_tensor(DType::f32, {2, 64}, 22).view())}));
  expect_rejected({"quantize", "--preset", "int8.token.blaze", "--strict", "clash.safetensors", "--out", "o.safetensors"},
                  "output name collision: tensor 'w' would be written as 'w.payload', which is also a tensor of the input");
  // Leaving either out resolves it.
  EXPECT_EQ(run({"quantize", "--preset", "mxfp8.ascend", "--exclude", "w", "clash.safetensors", "--out", "o.safetensors"}).status, 0);
}

// A tensor refused for its values is known only once quantized: the file is laid out again
// without it, and the result is what it would be had the tensor been excluded from the start.
TEST_F(CheckpointTest, ATensorRefusedForItsValuesIsSkippedAndCopied) {
  std::vector<float> bad(64, 0.5f);
  bad[7] = std::numeric_limits<float>::infinity();
  const Tensor good = random_tensor(DType::bf16, {3, 64}, 31);
  st::write(work() / "inf.safetensors",
            with_tensors({st::make_entry("a.bad", "F32", from_f32_vector(bad, {1, 64}, DType::f32).view()),
                          st::make_entry("b.good", "BF16", good.view())}));
  const RunResult r = run({"quantize", "--preset", "int8.token.blaze", "inf.safetensors", "--out", "o.safetensors"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("skipped a.bad: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("finite inputs only"), std::string::npos) << r.out;
  const st::Archive in = st::read(work() / "inf.safetensors");
  const st::Archive out = st::read(work() / "o.safetensors");
  EXPECT_EQ(find_entry(out, "a.bad").bytes, find_entry(in, "a.bad").bytes);
  const QuantResult q = quantize(make_preset("int8.token.blaze"), good.view());
  EXPECT_EQ(find_entry(out, "b.good.payload").bytes, bytes_of(q.payload));
  EXPECT_EQ(find_entry(out, "b.good.scale").bytes, bytes_of(q.scale));
  EXPECT_TRUE(nlohmann::json::parse(out.metadata.at("qexact.skipped")).contains("a.bad"));
  EXPECT_FALSE(nlohmann::json::parse(out.metadata.at("qexact.quantized")).contains("a.bad"));
  const Bytes encoded = st::encode(out);
  EXPECT_EQ(get("o.safetensors"), std::string(encoded.begin(), encoded.end()));
  expect_rejected({"quantize", "--preset", "int8.token.blaze", "--strict", "inf.safetensors", "--out", "s.safetensors"},
                  "tensor 'a.bad' cannot be quantized (strict)");
}

// A 3-byte BOOL tensor first puts the f32 tensor after it at an odd offset of the file.
TEST_F(CheckpointTest, TensorsAtUnalignedOffsetsAreRead) {
  const Tensor w = random_tensor(DType::f32, {4, 64}, 41);
  st::write(work() / "odd.safetensors",
            with_tensors({st::Entry{"a.flags", "BOOL", {3}, Bytes{1, 0, 1}}, st::make_entry("b.w", "F32", w.view())}));
  ASSERT_EQ(run({"quantize", "--preset", "mxfp8.ascend", "--include", "b.*", "odd.safetensors", "--out", "o.safetensors"}).status, 0);
  const st::Archive out = st::read(work() / "o.safetensors");
  const QuantResult q = quantize(make_preset("mxfp8.ascend"), w.view());
  EXPECT_EQ(find_entry(out, "b.w.payload").bytes, bytes_of(q.payload));
  EXPECT_EQ(find_entry(out, "b.w.scale").bytes, bytes_of(q.scale));
  EXPECT_EQ(find_entry(out, "a.flags").bytes, (Bytes{1, 0, 1}));
}

// The streamed reader checks the header alone first: a malformed one is the same named error.
TEST_F(CheckpointTest, ABadHeaderIsAnErrorNamingIt) {
  std::string file = get("model.safetensors");
  file[8] = '[';  // the header is no longer a JSON object
  put("bad.safetensors", file);
  expect_rejected({"quantize", "--preset", "mxfp8.ascend", "bad.safetensors", "--out", "o.safetensors"},
                  "the header is not valid JSON");
}

// The statistics, computed chunk by chunk, against the whole tensor at once: SQNR from one
// dequantize of everything, and clamping judged per element against dequantized payloads of the
// largest, next-largest and most negative codes (the definition, layout-blind).
struct WholeTensorStats {
  double sqnr_db;
  std::int64_t clamped;
};

WholeTensorStats whole_tensor_stats(const Contract& c, const Tensor& x, const QuantResult& r) {
  const auto filled = [&](double v) {
    Tensor p(r.payload.dtype(), r.payload.shape());
    for (std::int64_t i = 0; i < p.numel(); ++i) {
      if (c.family != Family::mx) {
        p.data<std::int8_t>()[i] = static_cast<std::int8_t>(v);
        continue;
      }
      const ElemTraits& t = elem_traits(c.element);
      const auto code = static_cast<std::uint8_t>((v < 0 ? 1u << (t.bits - 1) : 0u) |
                                                  static_cast<unsigned>(std::fabs(v) == 1 ? t.max_code : t.max_code - 1));
      p.data<std::uint8_t>()[i] = c.element == ElemFormat::e2m1 ? static_cast<std::uint8_t>(code | (code << 4)) : code;
    }
    return dequantize(c, p.view(), r.scale.view(), x.shape());
  };
  // MX: +1 / 0.5 / -1 stand for the largest, next-largest and most negative codes.
  const bool mx = c.family == Family::mx;
  const Tensor d = dequantize(c, r.payload.view(), r.scale.view(), x.shape());
  const Tensor hi = filled(mx ? 1 : 127), below = filled(mx ? 0.5 : 126), lo = filled(mx ? -1 : -c.range);
  const std::vector<float> xs = to_f32_vector(x.view());
  double signal = 0, noise = 0;
  std::int64_t clamped = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const double xi = xs[i], di = d.data<float>()[i], h = hi.data<float>()[i], l = lo.data<float>()[i];
    signal += xi * xi;
    noise += (xi - di) * (xi - di);
    const double half = (h - below.data<float>()[i]) / 2;
    if ((h > 0 && di == h && xi > h + half) || (l < 0 && di == l && xi < l - half)) ++clamped;
  }
  return {10.0 * std::log10(signal / noise), clamped};
}

TEST(CheckpointStats, ChunkedStatisticsEqualTheWholeTensors) {
  // 300 rows: several chunks, the last one partial, rows not a multiple of the 128-row tiles.
  std::vector<float> v = test::random_values(300 * 512, 51);
  for (std::size_t i = 0; i < v.size(); i += 97) v[i] *= 60.0f;  // outliers that clamp
  const Tensor block_x = random_tensor(DType::f32, {3, 70, 2, 64}, 52);
  for (const DType dt : {DType::bf16, DType::f16}) {  // each dtype's own vectorised sums
    const Tensor x = from_f32_vector(v, {300, 512}, dt);
    struct Case {
      const char* preset;
      std::vector<std::string> params;
    };
    for (const Case& k : {Case{"mxfp8.ascend", {}}, Case{"mxfp8.ascend", {"layout=padded", "tail=reject"}},
                          Case{"mx.ocp.e2m1", {"layout=swizzled", "tail=reject"}}, Case{"mx.ocp.e5m2", {"layout=pairs"}},
                          Case{"mx.ocp.e3m2", {}}, Case{"int8.token.blaze", {}}, Case{"int8.token.blaze", {"range=128"}},
                          Case{"q8_0.ggml", {}}, Case{"int8.block.ascend", {}}}) {
      const Contract c = make_contract(k.preset, k.params);
      const Tensor& in = c.family == Family::int8_block ? block_x : x;
      SCOPED_TRACE(std::string(k.preset) + " " + (k.params.empty() ? "" : k.params[0]));
      checkpoint::Options o;
      o.run.threads = 2;
      const char* st_dtype = in.dtype() == DType::bf16 ? "BF16" : in.dtype() == DType::f16 ? "F16" : "F32";
      const checkpoint::TensorsResult got = checkpoint::quantize_tensors(c, {{"w", st_dtype, in.view()}}, {}, o);
      ASSERT_EQ(got.summary.quantized.size(), 1u);
      const checkpoint::TensorSummary& row = got.summary.quantized[0];
      const QuantResult r = quantize(c, in.view());
      const WholeTensorStats want = whole_tensor_stats(c, in, r);
      EXPECT_NEAR(row.sqnr_db, want.sqnr_db, 1e-9);  // the sums' order differs, nothing else
      EXPECT_EQ(row.saturated_pct, 100.0 * static_cast<double>(want.clamped) / static_cast<double>(in.numel()));
      if (c.family == Family::mx) {
        EXPECT_GT(want.clamped, 0);
      }
      ASSERT_EQ(got.outputs.size(), 2u);
      EXPECT_EQ(bytes_of(got.outputs[0].tensor), bytes_of(r.payload));
      EXPECT_EQ(bytes_of(got.outputs[1].tensor), bytes_of(r.scale));
    }
  }
}

// A file is read, quantized, measured and written chunk by chunk where each chunk quantized
// alone gives the whole tensor's bytes (every contract without a tensor-wide scale), and as one
// tensor otherwise: both give quantize()'s bytes, and the summary's numbers equal those of the
// tensors in memory (the same chunks' sums in the same order, so exactly equal). Tensors of
// several chunks with a partial last one, rows longer than a chunk, 4-D batches, both paths.
TEST_F(CheckpointTest, StreamedChunksGiveTheWholeTensorsBytesAndStatistics) {
  std::vector<float> v = test::random_values(300 * 512, 61);
  for (std::size_t i = 0; i < v.size(); i += 89) v[i] *= 60.0f;  // outliers that clamp
  const Tensor rows = from_f32_vector(v, {300, 512}, DType::bf16);
  const Tensor wide = random_tensor(DType::f32, {3, 70016}, 62);  // one row per chunk
  const Tensor batches = random_tensor(DType::f32, {20, 70, 2, 64}, 63);  // (B, S, N, D): 7 batches a chunk
  struct Case {
    const char* preset;
    std::vector<std::string> params;
  };
  for (const Case& k : {Case{"mxfp8.ascend", {}}, Case{"mxfp8.te", {}}, Case{"mx.ocp.e2m1", {"layout=swizzled", "tail=reject"}},
                        Case{"mx.ocp.e5m2", {}}, Case{"mxfp8.torchao.floor", {}}, Case{"int8.token.blaze", {}},
                        Case{"int8.token.blaze", {"scale_store=f16"}}, Case{"int8.token.vllm", {}}, Case{"q8_0.ggml", {}},
                        Case{"int8.block.ascend", {}}, Case{"fp8.ascend.block", {}}, Case{"fp8.ascend.token", {}},
                        Case{"fp8.deepseek.128x128", {}}, Case{"fp8.deepseek.1x128", {}}, Case{"fp8.torchao.tensorwise", {}},
                        Case{"nvfp4.torchao", {}}, Case{"nvfp4.te", {}}}) {
    const Contract c = make_contract(k.preset, k.params);
    SCOPED_TRACE(std::string(k.preset) + (k.params.empty() ? "" : " " + k.params[0]));
    const bool four_d = c.family == Family::int8_block || c.granularity.kind == Granularity::head_block;
    std::vector<checkpoint::Input> inputs;
    if (four_d) {
      inputs.push_back({"b", "F32", batches.view()});
    } else {
      inputs.push_back({"r", "BF16", rows.view()});
      inputs.push_back({"w", "F32", wide.view()});
    }
    st::Archive a;
    for (const checkpoint::Input& in : inputs) a.entries.push_back(st::make_entry(in.name, in.dtype, in.view));
    st::write(work() / "big.safetensors", a);
    checkpoint::Options o;
    o.run.threads = 2;
    o.replace = true;  // one output file for every contract of the loop
    const checkpoint::FileResult got = checkpoint::quantize_file(c, work() / "big.safetensors", work() / "big.q.safetensors", o);
    const checkpoint::TensorsResult want = checkpoint::quantize_tensors(c, inputs, {}, o);
    const st::Archive out = st::read(work() / "big.q.safetensors");
    ASSERT_EQ(got.summary.quantized.size(), inputs.size());
    ASSERT_EQ(want.summary.quantized.size(), inputs.size());
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      SCOPED_TRACE(inputs[i].name);
      const checkpoint::TensorSummary& g = got.summary.quantized[i];
      const checkpoint::TensorSummary& w = want.summary.quantized[i];
      EXPECT_EQ(g.sqnr_db, w.sqnr_db);
      EXPECT_EQ(g.saturated_pct, w.saturated_pct);
      EXPECT_EQ(g.bytes_out, w.bytes_out);
      const QuantResult r = quantize(c, inputs[i].view);
      for (const auto& [name, t] : r.named())
        EXPECT_EQ(find_entry(out, inputs[i].name + "." + name).bytes, bytes_of(*t)) << name;
    }
  }
}

// A value the contract refuses, found in a late chunk of a streamed tensor: the tensor is
// skipped with the reason quantize() of the whole tensor gives (its index in the whole tensor).
TEST_F(CheckpointTest, AValueRefusedInALateChunkIsSkippedWithTheWholeTensorsReason) {
  std::vector<float> v = test::random_values(300 * 512, 64);
  v[290 * 512 + 7] = std::numeric_limits<float>::quiet_NaN();
  const Tensor bad = from_f32_vector(v, {300, 512}, DType::f32);
  const Tensor good = random_tensor(DType::bf16, {300, 512}, 65);
  st::write(work() / "nan.safetensors",
            with_tensors({st::make_entry("a.bad", "F32", bad.view()), st::make_entry("b.good", "BF16", good.view())}));
  const Contract c = make_preset("int8.token.blaze");
  std::string reason;
  try {
    (void)quantize(c, bad.view());
  } catch (const Error& e) {
    reason = e.what();
  }
  ASSERT_FALSE(reason.empty());
  const checkpoint::FileResult got =
      checkpoint::quantize_file(c, work() / "nan.safetensors", work() / "nan.q.safetensors", checkpoint::Options{});
  ASSERT_EQ(got.summary.skipped.size(), 1u);
  EXPECT_EQ(got.summary.skipped[0].first, "a.bad");
  EXPECT_EQ(got.summary.skipped[0].second, reason);
  const st::Archive out = st::read(work() / "nan.q.safetensors");
  EXPECT_EQ(find_entry(out, "a.bad").bytes, find_entry(st::read(work() / "nan.safetensors"), "a.bad").bytes);
  const QuantResult q = quantize(c, good.view());
  EXPECT_EQ(find_entry(out, "b.good.payload").bytes, bytes_of(q.payload));
  EXPECT_EQ(find_entry(out, "b.good.scale").bytes, bytes_of(q.scale));
}

// A chunk's SQNR sums, vectorised (and compiled per target), against the scalar order they
// stand for: element i to partial i mod 32, the elements after the last multiple of 8 to
// partial 0, the partials added pairwise (+16, +8, +4, +2, +1). Bit for bit: that order is what
// makes the summary the same on every machine. Sizes with and without whole 32-element steps,
// with 8-element blocks after them and with a tail; rows of a multiple of 32, which MX (FP8 and
// FP4), int8.token, int8.group (q8_0) and fp8.scaled decode inside the sums. On every SIMD target
// compiled in.
TEST(CheckpointStats, ChunkSumsAreTheThirtyTwoPartialScalarOrder) {
  for (const std::string& target : kernels::available_targets())
  for (const char* preset : {"mxfp8.ascend", "mx.ocp.e2m1", "int8.token.blaze", "q8_0.ggml", "fp8.deepseek.1x128",
                             "fp8.deepseek.128x128", "fp8.torchao.tensorwise"}) {
    kernels::force_target(target);
    for (const DType dt : {DType::f32, DType::bf16, DType::f16}) {
      for (const Shape& shape : {Shape{3, 100}, Shape{5, 61}, Shape{1, 30}, Shape{2, 64}, Shape{3, 256}, Shape{1, 96}}) {
        SCOPED_TRACE(target + " " + preset + " " + dtype_name(dt) + " " + std::to_string(shape_numel(shape)));
        const Contract c = make_preset(preset);
        if (c.family == Family::int8_group && shape.back() % c.group != 0) continue;  // whole groups only
        // Magnitudes over 2^-10 .. 2^10: the squares then span more than a double's 53 bits, so
        // that a sum in any other order rounds differently.
        std::vector<float> v = test::random_values(shape_numel(shape), 71);
        for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::ldexp(v[i], static_cast<int>(i * 7 % 21) - 10);
        const Tensor x = from_f32_vector(v, shape, dt);
        const QuantResult r = quantize(c, x.view());
        const Tensor d = dequantize(c, r.payload.view(), r.scale.view(), x.shape());
        const std::vector<float> xs = to_f32_vector(x.view());
        double sig[32] = {}, noi[32] = {};
        const std::size_t whole = xs.size() / 8 * 8;
        for (std::size_t i = 0; i < xs.size(); ++i) {
          const double xi = xs[i], e = xi - static_cast<double>(d.data<float>()[i]);
          const std::size_t p = i < whole ? i % 32 : 0;
          sig[p] += xi * xi;
          noi[p] += e * e;
        }
        for (std::size_t w = 16; w > 0; w /= 2)
          for (std::size_t l = 0; l < w; ++l) {
            sig[l] += sig[l + w];
            noi[l] += noi[l + w];
          }
        checkpoint::detail::Scratch scratch;
        const checkpoint::detail::Sums got =
            checkpoint::detail::chunk_sums(c, x.view(), r.payload.view(), r.scale.view(), TensorView{}, scratch);
        EXPECT_EQ(got.signal, sig[0]);
        EXPECT_EQ(got.noise, noi[0]);
      }
    }
  }
  kernels::force_target("");
}

// The sums with the dequantized values decoded inside the sums loop (MX byte and E2M1 codes,
// int8.token, int8.group, fp8.scaled but head_block; rows of a multiple of 32) against the same
// chunk dequantized to f32 first, bit for bit, for every preset whose contract takes the shape:
// signal, noise and clamp count. Inputs with outliers, zeros, a row of one value and the largest
// bf16, so that groups clamp and scales span their range, and with a NaN and infinities where
// the contract takes them; shapes that take the decoded path (k = 256, 96) and one that does
// not (k = 100).
TEST(CheckpointStats, DecodedSumsEqualTheDequantizedOnes) {
  int decoded_presets = 0, clamping = 0, nonfinite = 0;
  // Every preset, and fp8.scaled dequantizing by a division with zero domains (no preset does).
  std::vector<std::pair<std::string, Contract>> contracts;
  for (const std::string& preset : preset_names()) contracts.emplace_back(preset, make_preset(preset));
  for (const char* preset : {"fp8.deepseek.1x128", "fp8.deepseek.128x128", "fp8.ascend.token"})
    contracts.emplace_back(std::string(preset) + " scale_kind=multiplier",
                           make_contract(preset, {"scale_kind=multiplier", "quotient=multiply", "zero_group=zero"}));
  for (const std::string& target : kernels::available_targets())
  for (const auto& [preset, c] : contracts) {
    kernels::force_target(target);
    for (const DType dt : {DType::f32, DType::bf16, DType::f16}) {
      for (const Shape& shape : {Shape{6, 256}, Shape{128, 96}, Shape{3, 100}})
      for (const bool specials : {false, true}) {
        std::vector<float> v = test::random_values(shape_numel(shape), 97);
        for (std::size_t i = 0; i < v.size(); i += 37) v[i] *= 300.0f;
        for (std::size_t i = 5; i < v.size(); i += 53) v[i] = 0.0f;
        for (std::size_t i = 0; i < static_cast<std::size_t>(shape.back()); ++i) v[i] = 1.5f;
        for (std::size_t i = 0; i < static_cast<std::size_t>(shape.back()); ++i) v[shape.back() + i] = 0.0f;  // zero domains
        if (dt != DType::f16) v[v.size() - 1] = -3.0e38f;
        if (specials) {  // past the first row, inside the tensor
          v[v.size() / 2] = std::numeric_limits<float>::quiet_NaN();
          v[v.size() / 2 + 1] = -std::numeric_limits<float>::infinity();
          v[v.size() / 3] = std::numeric_limits<float>::infinity();
        }
        const Tensor x = from_f32_vector(v, shape, dt);
        QuantResult r;
        try {
          r = quantize(c, x.view());
        } catch (const std::exception&) {
          continue;  // a contract that does not take this shape or these values
        }
        SCOPED_TRACE(target + " " + preset + " " + dtype_name(dt) + " " + std::to_string(shape.back()) +
                     (specials ? " nan/inf" : ""));
        const TensorView ts = r.tensor_scale.nbytes() > 0 ? r.tensor_scale.view() : TensorView{};
        checkpoint::detail::Scratch fused, dequantized;
        dequantized.dequantize_always = true;
        const auto a = checkpoint::detail::chunk_sums(c, x.view(), r.payload.view(), r.scale.view(), ts, fused);
        const auto b = checkpoint::detail::chunk_sums(c, x.view(), r.payload.view(), r.scale.view(), ts, dequantized);
        EXPECT_EQ(std::bit_cast<std::uint64_t>(a.signal), std::bit_cast<std::uint64_t>(b.signal));
        EXPECT_EQ(std::bit_cast<std::uint64_t>(a.noise), std::bit_cast<std::uint64_t>(b.noise));
        EXPECT_EQ(a.clamped, b.clamped);
        const bool takes = (c.family == Family::mx &&
                            (elem_traits(c.element).bits == 8 || c.element == ElemFormat::e2m1) &&
                            c.layout != ScaleLayout::swizzled && c.block % 32 == 0 && !c.scale_wrap &&
                            c.packing != Packing::halves) ||
                           c.family == Family::int8_token || (c.family == Family::int8_group && c.group % 32 == 0) ||
                           (c.family == Family::fp8_scaled && c.granularity.kind != Granularity::head_block &&
                            (c.granularity.kind == Granularity::row || c.granularity.kind == Granularity::tensor ||
                             shape.back() % c.granularity.cols == 0));
        if (takes && shape.back() % 32 == 0)
          ++decoded_presets, clamping += a.clamped > 0, nonfinite += specials && !std::isfinite(a.noise);
      }
    }
  }
  kernels::force_target("");
  const auto targets = static_cast<int>(kernels::available_targets().size());
  EXPECT_GT(decoded_presets, 20 * targets);
  EXPECT_GT(clamping, 5 * targets);
  EXPECT_GT(nonfinite, 5 * targets);
}

}  // namespace
}  // namespace qexact
