// The qexact command-line tool, run as a process (its path comes from QEXACT_CLI) in a fresh
// temporary directory. Outputs are compared byte for byte with the library's own results on the
// same input; bad input must exit 2 with one "qexact: error: " line and leave no output at all.
#include <gtest/gtest.h>

#include <filesystem>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_test_util.hpp"
#include "qexact/contract.hpp"
#include "qexact/quantize.hpp"

namespace qexact {
namespace {
namespace fs = std::filesystem;
using test::CliTest;
using test::encoded;
using test::lines_of;
using test::random_values;
using test::RunResult;

// ---- presets --------------------------------------------------------------------------------

TEST_F(CliTest, PresetsListsEveryPresetUnderItsStackWithDescriptionVerificationAndParameters) {
  const RunResult r = run({"presets"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const auto lines = lines_of(r.out);
  for (const std::string& name : preset_names()) {
    SCOPED_TRACE(name);
    std::string params_line;
    for (const auto& [key, value] : params(make_preset(name))) params_line += " " + key + "=" + value;
    bool found = false;
    for (std::size_t i = 0; i + 1 < lines.size(); ++i) {
      if (lines[i] != name + "  " + preset_description(name) + "  [verified against: " + preset_verified(name) + "]")
        continue;
      found = true;
      EXPECT_EQ(lines[i + 1], "   " + params_line);
      // The nearest heading above is the preset's stack.
      std::size_t h = i;
      while (h > 0 && lines[h].rfind("== ", 0) != 0) --h;
      EXPECT_EQ(lines[h].rfind("== " + preset_stack(name) + ": ", 0), 0u) << lines[h];
    }
    EXPECT_TRUE(found) << r.out;
  }
  const auto stacks = preset_stacks();
  EXPECT_EQ(lines.size(), 2 * preset_names().size() + stacks.size());
  // Every stack has presets, and no preset names a stack the table lacks.
  for (const auto& [stack, title] : stacks) {
    int n = 0;
    for (const std::string& name : preset_names()) n += preset_stack(name) == stack;
    EXPECT_GT(n, 0) << stack;
  }
}

// libgomp prints the settings it read at start (OMP_DISPLAY_ENV): the CLI's own spin count
// (cli/omp_wait.hpp) unless the user chose one, in which case theirs is kept.
TEST_F(CliTest, OpenMpSpinsBrieflyUnlessTheUserSaysOtherwise) {
  const std::string clean = "env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT OMP_DISPLAY_ENV=verbose ";
  ASSERT_EQ(sh(clean + q() + " presets >/dev/null 2>err.txt"), 0);
  EXPECT_NE(get("err.txt").find("GOMP_SPINCOUNT = '3000'"), std::string::npos) << get("err.txt");
  ASSERT_EQ(sh(clean + "GOMP_SPINCOUNT=77 " + q() + " presets >/dev/null 2>err.txt"), 0);
  EXPECT_NE(get("err.txt").find("GOMP_SPINCOUNT = '77'"), std::string::npos) << get("err.txt");
  EXPECT_EQ(get("err.txt").find("GOMP_SPINCOUNT = '3000'"), std::string::npos) << get("err.txt");
  ASSERT_EQ(sh(clean + "OMP_WAIT_POLICY=active " + q() + " presets >/dev/null 2>err.txt"), 0);
  EXPECT_NE(get("err.txt").find("OMP_WAIT_POLICY = 'ACTIVE'"), std::string::npos) << get("err.txt");
  EXPECT_EQ(get("err.txt").find("GOMP_SPINCOUNT = '3000'"), std::string::npos) << get("err.txt");
}

TEST_F(CliTest, PresetsAsMarkdownIsOneTableRowPerPreset) {
  const RunResult r = run({"presets", "--markdown"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto lines = lines_of(r.out);
  const std::vector<std::string> names = preset_names();
  ASSERT_EQ(lines.size(), 2 + names.size()) << r.out;
  EXPECT_EQ(lines[0], "| stack | preset | family | reproduces | verified against | parameters |");
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string& name = names[i];
    std::string description;  // a '|' in a cell is escaped, or it would end the cell
    for (char ch : preset_description(name)) description += ch == '|' ? std::string("\\|") : std::string(1, ch);
    std::string params_cell;
    for (const auto& [key, value] : params(make_preset(name))) params_cell += (params_cell.empty() ? "" : " ") + key + "=" + value;
    EXPECT_EQ(lines[2 + i], "| " + preset_stack(name) + " | `" + name + "` | " + family_name(make_preset(name).family) + " | " +
                                description + " | " + preset_verified(name) + " | `" + params_cell + "` |");
  }
}

// ---- quantize / dequantize round trips -------------------------------------------------------

struct QuantCase {
  const char* name;
  const char* preset;
  std::vector<std::string> params;
  DType dtype;
  Shape shape;
};

class CliQuantize : public CliTest, public ::testing::WithParamInterface<QuantCase> {};

TEST_P(CliQuantize, OutputsEqualTheLibrarysBytes) {
  const QuantCase& q = GetParam();
  const Contract c = make_contract(q.preset, q.params);
  const Tensor x = from_f32_vector(random_values(shape_numel(q.shape), 1234), q.shape, q.dtype);
  put_npy("in.npy", x);

  std::vector<std::string> args = {"quantize", "--preset", q.preset};
  for (const auto& p : q.params) args.insert(args.end(), {"--param", p});
  if (q.dtype == DType::bf16) args.insert(args.end(), {"--dtype", "bf16"});
  args.insert(args.end(), {"in.npy", "--out", "nested/q"});
  const RunResult r = run(args);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(work_tree(), (std::set<std::string>{"in.npy", "nested", "nested/q", "nested/q/payload.npy",
                                                "nested/q/scale.npy", "nested/q/meta.json"}));

  const QuantResult expected = quantize(c, x.view());
  EXPECT_EQ(get("nested/q/payload.npy"), encoded(expected.payload));
  EXPECT_EQ(get("nested/q/scale.npy"), encoded(expected.scale));

  const auto meta = nlohmann::json::parse(get("nested/q/meta.json"));
  EXPECT_EQ(meta.at("preset"), q.preset);
  EXPECT_EQ(meta.at("preset_description"), preset_description(q.preset));
  EXPECT_EQ(meta.at("preset_verified"), preset_verified(q.preset));
  nlohmann::json params = nlohmann::json::object();
  for (const auto& [key, value] : qexact::params(c)) params[key] = value;
  EXPECT_EQ(meta.at("params"), params);
  EXPECT_EQ(meta.at("input").at("shape").get<Shape>(), q.shape);
  EXPECT_EQ(meta.at("input").at("dtype"), dtype_name(q.dtype));
  EXPECT_EQ(meta.at("payload").at("shape").get<Shape>(), expected.payload.shape());
  EXPECT_EQ(meta.at("payload").at("dtype"), dtype_name(expected.payload.dtype()));
  EXPECT_EQ(meta.at("scale").at("shape").get<Shape>(), expected.scale.shape());
  EXPECT_EQ(meta.at("scale").at("dtype"), dtype_name(expected.scale.dtype()));
  EXPECT_EQ(meta.at("path"), expected.path);
  EXPECT_FALSE(meta.at("qexact_version").get<std::string>().empty());

  const RunResult d = run({"dequantize", "nested/q", "--out", "x.npy"});
  ASSERT_EQ(d.status, 0) << d.err;
  EXPECT_EQ(d.err, "");
  EXPECT_EQ(get("x.npy"), encoded(dequantize(c, expected.payload.view(), expected.scale.view(), q.shape)));
}

INSTANTIATE_TEST_SUITE_P(
    Presets, CliQuantize,
    ::testing::Values(QuantCase{"int8_token_f32", "int8.token.blaze", {}, DType::f32, {4, 64}},
                      QuantCase{"int8_token_scale_min", "int8.token.blaze", {"scale_min=0.5", "range=128"},
                                DType::f32, {3, 5}},
                      QuantCase{"int8_block_f16", "int8.block.ascend", {}, DType::f16, {1, 70, 2, 8}},
                      QuantCase{"q8_0_f16_scale", "q8_0.ggml", {}, DType::f32, {2, 64}},
                      QuantCase{"mxfp8_ascend_bf16", "mxfp8.ascend", {}, DType::bf16, {3, 40}},
                      QuantCase{"mxfp4_block16", "mx.ocp.e2m1", {"block=16"}, DType::f32, {2, 3, 36}},
                      QuantCase{"mxfp8_te_padded", "mxfp8.te", {}, DType::f32, {5, 64}}),
    [](const auto& info) { return std::string(info.param.name); });

TEST_F(CliTest, QuantizeIntoAnExistingDirectoryNeedsForceAndReplacesItWhole) {
  const Tensor x = from_f32_vector(random_values(2 * 32, 77), {2, 32}, DType::f32);
  put_npy("in.npy", x);
  fs::create_directories(work() / "q");
  put("q/payload.npy", "stale");
  put("q/notes.txt", "mine");
  expect_rejected({"quantize", "--preset", "mx.ocp", "in.npy", "--out", "q"}, "--force");
  // --force never deletes a file qexact did not write.
  expect_rejected({"quantize", "--preset", "mx.ocp", "in.npy", "--out", "q", "--force"}, "notes.txt");
  fs::remove(work() / "q" / "notes.txt");
  const RunResult r = run({"quantize", "--preset", "mx.ocp", "in.npy", "--out", "q", "--force"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(work_tree(), (std::set<std::string>{"in.npy", "q", "q/payload.npy", "q/scale.npy", "q/meta.json"}));
  EXPECT_EQ(get("q/payload.npy"), encoded(quantize(make_contract("mx.ocp"), x.view()).payload));
}

// ---- HiFloat4 --------------------------------------------------------------------------------

TEST_F(CliTest, FakeQuantKeepsBf16AndEqualsTheLibrary) {
  const Tensor x = from_f32_vector(random_values(3 * 128, 99), {3, 128}, DType::bf16);
  put_npy("in.npy", x);
  const RunResult r = run({"fake-quant", "--preset", "hif4", "--dtype", "bf16", "in.npy", "--out", "y.npy"});
  ASSERT_EQ(r.status, 0) << r.err;
  const Tensor expected = hifloat4_fake_quant(x.view(), -1);
  ASSERT_EQ(expected.dtype(), DType::bf16);
  EXPECT_EQ(get("y.npy"), encoded(expected));
  EXPECT_NE(get("y.npy").find("'descr': '<u2'"), std::string::npos);
}

TEST_F(CliTest, FakeQuantAlongQdim) {
  const Tensor x = from_f32_vector(random_values(64 * 3, 5), {64, 3}, DType::f16);
  put_npy("in.npy", x);
  const RunResult r = run({"fake-quant", "--preset", "hif4", "--qdim", "0", "in.npy", "--out", "y.npy"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(get("y.npy"), encoded(hifloat4_fake_quant(x.view(), 0)));
}

TEST_F(CliTest, Hif4PackAndUnpackEqualTheLibrary) {
  const Tensor x = from_f32_vector(random_values(2 * 128, 8), {2, 128}, DType::f32);
  put_npy("in.npy", x);
  const RunResult p = run({"hif4-pack", "in.npy", "--out", "packed"});
  ASSERT_EQ(p.status, 0) << p.err;
  const Hif4Packed expected = hif4_pack(x.view());
  EXPECT_EQ(work_tree(), (std::set<std::string>{"in.npy", "packed", "packed/scale.npy", "packed/value.npy"}));
  EXPECT_EQ(get("packed/scale.npy"), encoded(expected.scale));
  EXPECT_EQ(get("packed/value.npy"), encoded(expected.value));

  const RunResult u = run({"hif4-unpack", "packed", "--out", "x.npy"});
  ASSERT_EQ(u.status, 0) << u.err;
  EXPECT_EQ(get("x.npy"), encoded(hif4_unpack(expected.scale.view(), expected.value.view())));
}

// ---- engines and threads ---------------------------------------------------------------------

// meta.json without its "engine" member.
nlohmann::json meta_but_engine(const std::string& text) {
  auto j = nlohmann::json::parse(text);
  j.erase("engine");
  return j;
}

TEST_F(CliTest, QuantizeAndDequantizeGiveTheSameFilesOnBothEngines) {
  const QuantCase cases[] = {{"mxfp8_ascend", "mxfp8.ascend", {}, DType::bf16, {3, 64}},
                             {"int8_token", "int8.token.blaze", {}, DType::f32, {4, 64}},
                             {"int8_block", "int8.block.ascend", {}, DType::f16, {1, 70, 2, 8}},
                             {"q8_0", "q8_0.ggml", {}, DType::f32, {2, 64}}};
  for (const QuantCase& q : cases) {
    SCOPED_TRACE(q.name);
    const Tensor x = from_f32_vector(random_values(shape_numel(q.shape), 4321), q.shape, q.dtype);
    put_npy("in.npy", x);
    const std::vector<std::string> dtype =
        q.dtype == DType::bf16 ? std::vector<std::string>{"--dtype", "bf16"} : std::vector<std::string>{};
    // --force: each case replaces the directories of the one before.
    std::vector<std::string> fast = {"quantize", "--preset", q.preset, "in.npy", "--out", "f", "--threads", "2", "--force"};
    std::vector<std::string> reference = {"quantize", "--preset", q.preset, "in.npy", "--out", "r", "--engine",
                                          "reference", "--force"};
    fast.insert(fast.end(), dtype.begin(), dtype.end());
    reference.insert(reference.end(), dtype.begin(), dtype.end());
    const RunResult rf = run(fast);
    ASSERT_EQ(rf.status, 0) << rf.err;
    const RunResult rr = run(reference);
    ASSERT_EQ(rr.status, 0) << rr.err;
    EXPECT_EQ(get("f/payload.npy"), get("r/payload.npy"));
    EXPECT_EQ(get("f/scale.npy"), get("r/scale.npy"));
    EXPECT_EQ(nlohmann::json::parse(get("f/meta.json")).at("engine"), "fast");
    EXPECT_EQ(nlohmann::json::parse(get("r/meta.json")).at("engine"), "reference");
    EXPECT_EQ(meta_but_engine(get("f/meta.json")), meta_but_engine(get("r/meta.json")));

    const RunResult df = run({"dequantize", "f", "--out", "xf.npy", "--engine", "fast", "--threads", "2"});
    ASSERT_EQ(df.status, 0) << df.err;
    const RunResult dr = run({"dequantize", "f", "--out", "xr.npy", "--engine", "reference", "--threads", "1"});
    ASSERT_EQ(dr.status, 0) << dr.err;
    EXPECT_EQ(get("xf.npy"), get("xr.npy"));
    EXPECT_FALSE(get("xf.npy").empty());
  }
}

TEST_F(CliTest, QuantizeRecordsTheDefaultEngine) {
  put_npy("in.npy", from_f32_vector(random_values(2 * 32, 12), {2, 32}, DType::f32));
  const RunResult r = run({"quantize", "--preset", "mx.ocp", "in.npy", "--out", "q"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(get("q/meta.json")).at("engine"), "fast");
}

TEST_F(CliTest, Hif4CommandsGiveTheSameFilesOnBothEngines) {
  put_npy("in.npy", from_f32_vector(random_values(4 * 128, 31), {4, 128}, DType::bf16));
  for (const char* engine : {"fast", "reference"}) {
    const std::string e = engine;
    ASSERT_EQ(run({"fake-quant", "--preset", "hif4", "--dtype", "bf16", "in.npy", "--out", "y_" + e + ".npy",
                   "--engine", e, "--threads", "2"})
                  .status,
              0);
    ASSERT_EQ(run({"hif4-pack", "--dtype", "bf16", "in.npy", "--out", "p_" + e, "--engine", e}).status, 0);
    ASSERT_EQ(run({"hif4-unpack", "p_fast", "--out", "u_" + e + ".npy", "--engine", e, "--threads", "1"}).status, 0);
  }
  EXPECT_EQ(get("y_fast.npy"), get("y_reference.npy"));
  EXPECT_EQ(get("p_fast/scale.npy"), get("p_reference/scale.npy"));
  EXPECT_EQ(get("p_fast/value.npy"), get("p_reference/value.npy"));
  EXPECT_EQ(get("u_fast.npy"), get("u_reference.npy"));
  EXPECT_FALSE(get("u_fast.npy").empty());
}

// ---- bench -----------------------------------------------------------------------------------

// Tiny sizes and one round: checks what is printed, never how fast anything is.
const std::vector<std::string> kTinyBench = {"bench",          "--preset", "mxfp4.ggml", "--elements", "4096",
                                             "--cache-elements", "4096",   "--reference-elements", "4096",
                                             "--threads",      "1,2",      "--rounds",  "1"};

TEST_F(CliTest, BenchJsonPrintsOneObjectPerMeasurement) {
  std::vector<std::string> args = kTinyBench;
  args.push_back("--json");
  const RunResult r = run(args);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const auto lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 5u) << r.out;  // reference, then out of cache and in cache at 1 and 2 threads
  std::vector<std::pair<std::string, int>> seen;
  for (const std::string& line : lines) {
    const auto j = nlohmann::json::parse(line);
    for (const char* key :
         {"preset", "op", "input_dtype", "threads", "elements", "gbps", "copy_gbps", "ratio", "engine"})
      EXPECT_TRUE(j.contains(key)) << key << " in " << line;
    EXPECT_EQ(j.at("preset"), "mxfp4.ggml");
    EXPECT_EQ(j.at("op"), "quantize");
    EXPECT_EQ(j.at("input_dtype"), "f32");
    EXPECT_EQ(j.at("elements"), 4096);
    seen.emplace_back(j.at("engine").get<std::string>(), j.at("threads").get<int>());
  }
  EXPECT_EQ(seen, (std::vector<std::pair<std::string, int>>{
                      {"reference", 1}, {"fast", 1}, {"fast", 2}, {"fast", 1}, {"fast", 2}}));
  EXPECT_TRUE(work_tree().empty());
}

TEST_F(CliTest, BenchPrintsATable) {
  const RunResult r = run(kTinyBench);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto lines = lines_of(r.out);
  std::size_t header = 0, rows = 0;
  for (const std::string& line : lines) {
    if (line.rfind("preset ", 0) == 0) {
      ++header;
      for (const char* title : {"GB/s", "copy GB/s", "ratio", "ns/elem", "vs ref", "thr"})
        EXPECT_NE(line.find(title), std::string::npos) << title;
    }
    rows += line.rfind("mxfp4.ggml ", 0) == 0;
  }
  EXPECT_EQ(header, 1u) << r.out;
  EXPECT_EQ(rows, 5u) << r.out;
}

TEST_F(CliTest, BenchHelpDefinesCopyBandwidthAndBytes) {
  const RunResult r = run({"bench", "--help"});
  ASSERT_EQ(r.status, 0);
  for (const char* words : {"memcpy", "bytes read + bytes written", "Bytes per element", "uninitialised"})
    EXPECT_NE(r.out.find(words), std::string::npos) << words;
}

// ---- conform ---------------------------------------------------------------------------------

TEST_F(CliTest, ConformRunsWithTheGivenSeedAndPasses) {
  const RunResult r = run({"conform", "--seed", "7"});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_NE(r.out.find("seed 7\n"), std::string::npos) << r.out;
  EXPECT_TRUE(work_tree().empty());
}

TEST_F(CliTest, ConformWithoutArgumentsUsesTheDefaultSeed) {
  const RunResult r = run({"conform"});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("seed 20261130\n"), std::string::npos) << r.out;
}

// ---- usage -----------------------------------------------------------------------------------

TEST_F(CliTest, HelpAndVersionExitZero) {
  const RunResult h = run({"--help"});
  EXPECT_EQ(h.status, 0);
  for (const char* sub :
       {"presets", "quantize", "dequantize", "fake-quant", "hif4-pack", "hif4-unpack", "conform", "bench"})
    EXPECT_NE(h.out.find(sub), std::string::npos) << sub;
  const RunResult v = run({"--version"});
  EXPECT_EQ(v.status, 0);
  EXPECT_FALSE(v.out.empty());
}

// ---- bad input: exit 2, one line, no output --------------------------------------------------

class CliRejects : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    if (IsSkipped()) return;
    put_npy("x.npy", from_f32_vector(random_values(4 * 64, 3), {4, 64}, DType::f32));
  }
};

TEST_F(CliRejects, MalformedNpy) {
  put("bad.npy", "this is not an npy file");
  expect_rejected({"quantize", "--preset", "mx.ocp", "bad.npy", "--out", "q"}, "bad magic");
}

TEST_F(CliRejects, TruncatedNpy) {
  const std::string whole = get("x.npy");
  put("cut.npy", whole.substr(0, whole.size() - 3));
  expect_rejected({"quantize", "--preset", "mx.ocp", "cut.npy", "--out", "q"}, "truncated data");
}

TEST_F(CliRejects, MissingInput) {
  expect_rejected({"quantize", "--preset", "mx.ocp", "nope.npy", "--out", "q"}, "nope.npy");
}

TEST_F(CliRejects, NonFloatInput) {
  put_npy("u1.npy", Tensor(DType::u8, {4, 64}));
  expect_rejected({"quantize", "--preset", "mx.ocp", "u1.npy", "--out", "q"}, "holds u8 values");
}

TEST_F(CliRejects, U16WithoutDtypeBf16) {
  put_npy("u2.npy", Tensor(DType::u16, {4, 64}));
  expect_rejected({"quantize", "--preset", "mx.ocp", "u2.npy", "--out", "q"}, "--dtype bf16");
}

TEST_F(CliRejects, DtypeMismatch) {
  expect_rejected({"quantize", "--preset", "mx.ocp", "--dtype", "bf16", "x.npy", "--out", "q"}, "'<u2'");
  expect_rejected({"quantize", "--preset", "mx.ocp", "--dtype", "f16", "x.npy", "--out", "q"}, "not the f16");
}

TEST_F(CliRejects, UnknownDtypeName) {
  expect_rejected({"quantize", "--preset", "mx.ocp", "--dtype", "f8", "x.npy", "--out", "q"}, "--dtype");
}

TEST_F(CliRejects, WrongRankForInt8Block) {
  expect_rejected({"quantize", "--preset", "int8.block.ascend", "x.npy", "--out", "q"}, "(B, S, N, D)");
}

TEST_F(CliRejects, TailRejectPresetWithKNotAMultipleOf32) {
  put_npy("k40.npy", from_f32_vector(random_values(4 * 40, 4), {4, 40}, DType::f32));
  expect_rejected({"quantize", "--preset", "mxfp8.torchao.floor", "k40.npy", "--out", "q"}, "tail=reject");
}

TEST_F(CliRejects, NaNForInt8TokenNamesRowAndColumn) {
  std::vector<float> v = random_values(3 * 8, 6);
  v[1 * 8 + 2] = std::numeric_limits<float>::quiet_NaN();
  put_npy("nan.npy", from_f32_vector(v, {3, 8}, DType::f32));
  expect_rejected({"quantize", "--preset", "int8.token.blaze", "nan.npy", "--out", "q"}, "row 1, column 2");
}

TEST_F(CliRejects, UnknownPreset) {
  expect_rejected({"quantize", "--preset", "mxfp9", "x.npy", "--out", "q"}, "unknown preset 'mxfp9'");
  expect_rejected({"quantize", "--preset", "mxfp8.torchao.flor", "x.npy", "--out", "q"},
                  "unknown preset 'mxfp8.torchao.flor': did you mean 'mxfp8.torchao.floor'?");
  expect_rejected({"quantize", "--preset", "mx.ocp", "--param", "rounding=trnc", "x.npy", "--out", "q"},
                  "unknown rounding 'trnc': did you mean 'trunc'?");
}

TEST_F(CliRejects, UnknownParameter) {
  expect_rejected({"quantize", "--preset", "mx.ocp", "--param", "colour=blue", "x.npy", "--out", "q"},
                  "unknown parameter 'colour'");
}

TEST_F(CliRejects, ParameterOfAnotherFamily) {
  expect_rejected({"quantize", "--preset", "int8.token.blaze", "--param", "block=16", "x.npy", "--out", "q"},
                  "block");
}

TEST_F(CliRejects, ParamWithoutEquals) {
  expect_rejected({"quantize", "--preset", "mx.ocp", "--param", "block", "x.npy", "--out", "q"}, "key=value");
}

TEST_F(CliRejects, MissingRequiredOption) {
  expect_rejected({"quantize", "--preset", "mx.ocp", "x.npy"}, "--out");
  expect_rejected({"quantize", "x.npy", "--out", "q"}, "--preset");
}

TEST_F(CliRejects, NoSubcommandOrAnUnknownOne) {
  expect_rejected({}, "a command is required");
  expect_rejected({"quantise", "x.npy"}, "quantise");
}

TEST_F(CliRejects, OutputDirectoryIsARegularFile) {
  put("q", "a file");
  expect_rejected({"quantize", "--preset", "mx.ocp", "x.npy", "--out", "q"}, "not a directory");
}

TEST_F(CliRejects, FakeQuantWithANonHif4Preset) {
  expect_rejected({"fake-quant", "--preset", "mx.ocp", "x.npy", "--out", "y.npy"}, "hif4 preset");
}

TEST_F(CliRejects, DequantizeWithoutMeta) {
  fs::create_directories(work() / "empty");
  expect_rejected({"dequantize", "empty", "--out", "y.npy"}, "meta.json");
}

TEST_F(CliRejects, DequantizeWithMalformedMeta) {
  fs::create_directories(work() / "q");
  put("q/meta.json", "{\"preset\": \"mx.ocp\"");
  expect_rejected({"dequantize", "q", "--out", "y.npy"}, "not valid JSON");
  put("q/meta.json", "{\"preset\": \"mx.ocp\", \"params\": {}}");
  expect_rejected({"dequantize", "q", "--out", "y.npy"}, "missing \"path\"");
  put("q/meta.json", "[1, 2]");
  expect_rejected({"dequantize", "q", "--out", "y.npy"}, "not an object");
}

TEST_F(CliRejects, Hif4UnpackWithoutItsFiles) {
  fs::create_directories(work() / "packed");
  expect_rejected({"hif4-unpack", "packed", "--out", "y.npy"}, "scale.npy");
}

TEST_F(CliRejects, UnknownEngine) {
  expect_rejected({"quantize", "--preset", "mx.ocp", "x.npy", "--out", "q", "--engine", "turbo"}, "--engine");
  expect_rejected({"fake-quant", "--preset", "hif4", "x.npy", "--out", "y.npy", "--engine", "Fast"}, "--engine");
  expect_rejected({"hif4-pack", "x.npy", "--out", "p", "--engine", ""}, "--engine");
}

TEST_F(CliRejects, BadThreadCount) {
  expect_rejected({"quantize", "--preset", "mx.ocp", "x.npy", "--out", "q", "--threads", "-1"}, "--threads");
  expect_rejected({"quantize", "--preset", "mx.ocp", "x.npy", "--out", "q", "--threads", "two"}, "--threads");
}

TEST_F(CliRejects, DequantizeAndUnpackWithAnUnknownEngine) {
  ASSERT_EQ(run({"quantize", "--preset", "mx.ocp", "x.npy", "--out", "q"}).status, 0);
  ASSERT_EQ(run({"hif4-pack", "x.npy", "--out", "p"}).status, 0);
  expect_rejected({"dequantize", "q", "--out", "y.npy", "--engine", "gpu"}, "--engine");
  expect_rejected({"hif4-unpack", "p", "--out", "y.npy", "--engine", "gpu"}, "--engine");
}

TEST_F(CliRejects, BenchWithBadArguments) {
  expect_rejected({"bench", "--preset", "mx.ocp"}, "no benchmarked kernel for preset 'mx.ocp'");
  expect_rejected({"bench", "--elements", "1000"}, "multiple of 4096");
  expect_rejected({"bench", "--threads", "1,0"}, "thread count");
  expect_rejected({"bench", "--rounds", "0"}, "timed round");
}

TEST_F(CliRejects, ConformWithABadSeed) {
  expect_rejected({"conform", "--seed", "twelve"}, "--seed");
}

}  // namespace
}  // namespace qexact
