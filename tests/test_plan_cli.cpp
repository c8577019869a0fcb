// `qexact plan` run as a process (its path comes from QEXACT_CLI) in a fresh temporary
// directory: the text and JSON reports, the sweep found from the plan or --sweep, and bad
// input exiting 2 with one "qexact: error: " line naming the tensor and the field.
#include <gtest/gtest.h>
#include <unistd.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace {
namespace fs = std::filesystem;

struct RunResult {
  int status = -1;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

const char* kTensors = R"([
  {"name": "q", "shape": [1, 4096, 24, 128], "dtype": "bf16", "collective": "all_to_all", "axis": 1, "to_axis": 2,
   "quantize": "int8.block.ascend"},
  {"name": "o", "shape": [1, 4096, 24, 128], "dtype": "bf16", "collective": "all_to_all", "axis": 1, "to_axis": 2},
  {"name": "ragged", "shape": [1, 4000, 24, 128], "dtype": "bf16", "collective": "all_gather", "axis": 1,
   "quantize": "int8.block.ascend"},
  {"name": "v", "shape": [1, 4096, 24, 128], "dtype": "bf16", "collective": "all_gather", "axis": 1,
   "quantize": "int8.channel", "scale": "global"}
])";

// all_to_all measured up to 4 MiB: q after (3147264 bytes) is inside, o (6291456 bytes) beyond.
const char* kSweep = R"({"format": "qexact-sweep/1", "world": 4, "mpi": "Open MPI v4.1.4", "host": "h",
  "warmup": 5, "iterations": 20, "collectives": {
  "all_to_all": [{"bytes": 8, "time_s": 1e-05, "algbw_GBps": 0.0008, "busbw_GBps": 0.0006},
                 {"bytes": 2097152, "time_s": 0.001, "algbw_GBps": 2.097152, "busbw_GBps": 1.572864},
                 {"bytes": 4194304, "time_s": 0.002, "algbw_GBps": 2.097152, "busbw_GBps": 1.572864}]}})";

class PlanCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* cli = std::getenv("QEXACT_CLI");
    if (cli == nullptr || *cli == '\0') GTEST_SKIP() << "QEXACT_CLI is not set (the CLI is not built)";
    cli_ = cli;
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = fs::path(::testing::TempDir()) /
            ("qexact_plan_cli_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "work" / "sub");
    fs::create_directories(root_ / "logs");
  }
  void TearDown() override {
    if (!root_.empty()) fs::remove_all(root_);
  }

  void write(const std::string& name, const std::string& text) const {
    std::ofstream(root_ / "work" / name, std::ios::binary) << text;
  }
  void write_plan(const std::string& name, const std::string& extra = "") const {
    write(name, "{\"world\": 4, " + extra + "\"tensors\": " + kTensors + "}");
  }

  RunResult run(const std::vector<std::string>& args) const {
    std::string cmd = "cd ";
    cmd += shell_quote((root_ / "work").string());
    cmd += " && ";
    cmd += shell_quote(cli_);
    for (const auto& a : args) {
      cmd += ' ';
      cmd += shell_quote(a);
    }
    const fs::path out = root_ / "logs" / "stdout", err = root_ / "logs" / "stderr";
    cmd += " >";
    cmd += shell_quote(out.string());
    cmd += " 2>";
    cmd += shell_quote(err.string());
    cmd += " </dev/null";
    const int raw = std::system(cmd.c_str());
    RunResult r;
    r.status = raw != -1 && WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
  }

  // Bad input: status 2, nothing on stdout, one error line holding `expected`.
  void expect_error(const std::vector<std::string>& args, const std::string& expected) const {
    const RunResult r = run(args);
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err.rfind("qexact: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(expected), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }

  std::string cli_;
  fs::path root_;
};

// The report's block for tensor `name`: from its header line to the next blank line.
std::string block_of(const std::string& text, const std::string& name) {
  const std::size_t start = text.find("\n" + name + ": ");
  if (start == std::string::npos) return "";
  const std::size_t end = text.find("\n\n", start + 1);
  return text.substr(start + 1, end == std::string::npos ? std::string::npos : end - start - 1);
}

TEST_F(PlanCliTest, TextReport) {
  write_plan("plan.json");
  const RunResult r = run({"plan", "plan.json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const std::string q = block_of(r.out, "q");
  EXPECT_NE(q.find("EXACT  byte-exact: before (sequence shard): S % (world x token_block) = 4096 % (4 x 64) = 0"),
            std::string::npos)
      << q;
  EXPECT_NE(q.find("bytes per rank: before 6291456 (bf16) -> after 3147264 = payload 3145728 + scales 1536"),
            std::string::npos)
      << q;
  const std::string ragged = block_of(r.out, "ragged");
  ASSERT_FALSE(ragged.empty()) << r.out;
  EXPECT_NE(ragged.find("DRIFT  drift: boundary blocks regrouped: 72 of 1512 blocks"), std::string::npos) << ragged;
  EXPECT_EQ(ragged.find("exact"), std::string::npos) << ragged;
  EXPECT_EQ(ragged.find("lossless"), std::string::npos) << ragged;
  EXPECT_NE(block_of(r.out, "v").find("extra collective: all_reduce_max of 12288 bytes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  all_to_all: before 12582912 bytes; after 9437184 payload bytes = 75.00% of before without "
                       "scales, 9438720 bytes = 75.01% with 1536 scale bytes"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("verdicts: 3 byte-exact, 1 with drift"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sweep: none (no times predicted)"), std::string::npos);
}

TEST_F(PlanCliTest, JsonReport) {
  write_plan("plan.json");
  const RunResult r = run({"plan", "plan.json", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["world"], 4);
  ASSERT_EQ(j["tensors"].size(), 4u);
  const auto& q = j["tensors"][0];
  EXPECT_EQ(q["name"], "q");
  EXPECT_EQ(q["exact"], true);
  EXPECT_EQ(q["drift_blocks"], 0);
  EXPECT_EQ(q["bytes_before"], 6291456);
  EXPECT_EQ(q["payload_bytes"], 3145728);
  EXPECT_EQ(q["scale_bytes"], 1536);
  EXPECT_EQ(q["bytes_after"], 3147264);
  EXPECT_TRUE(q["time_before_s"].is_null());
  EXPECT_TRUE(q["time_after_s"].is_null());
  const auto& ragged = j["tensors"][2];
  EXPECT_EQ(ragged["exact"], false);
  EXPECT_EQ(ragged["drift_blocks"], 72);
  EXPECT_EQ(ragged["reason"].get<std::string>().find("exact"), std::string::npos);
  const auto& v = j["tensors"][3];
  ASSERT_EQ(v["extra_collectives"].size(), 1u);
  EXPECT_EQ(v["extra_collectives"][0]["op"], "all_reduce_max");
  EXPECT_EQ(v["extra_collectives"][0]["bytes"], 12288);
  EXPECT_EQ(j["totals"]["by_collective"]["all_to_all"]["payload_ratio"], 0.75);
  EXPECT_EQ(j["totals"]["exact"], 3);
  EXPECT_EQ(j["totals"]["drift"], 1);
  EXPECT_EQ(j["totals"]["extra_bytes"], 12288);
}

TEST_F(PlanCliTest, SweepFromThePlanRelativeToItAndFromTheOption) {
  write("sub/sweep.json", kSweep);
  write_plan("sub/plan.json", R"("sweep": "sweep.json", )");
  RunResult r = run({"plan", "sub/plan.json", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  const auto& q = j["tensors"][0];
  // Before: 6291456 bytes, beyond the 4 MiB sweep. After: 3147264 bytes, between 2 and 4 MiB.
  EXPECT_TRUE(q["time_before_s"].is_null());
  EXPECT_EQ(q["time_after_s"], 0.001 + (0.002 - 0.001) * (static_cast<double>(3147264 - 2097152) / 2097152.0));
  EXPECT_NE(q["time_note"].get<std::string>().find("beyond the measured sweep (max 4194304 bytes): no prediction"),
            std::string::npos);
  EXPECT_TRUE(j["tensors"][1]["time_after_s"].is_null());  // o, unquantized: beyond either way
  EXPECT_TRUE(j["totals"]["time_before_s"].is_null());
  // The text report names the sweep and never invents a time beyond it.
  r = run({"plan", "sub/plan.json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("(world 4, Open MPI v4.1.4 on h, 5 warm-up + 20 timed iterations)"), std::string::npos) << r.out;
  EXPECT_NE(block_of(r.out, "q").find("time (all_to_all): before no prediction -> after "), std::string::npos) << r.out;
  // --sweep instead of the plan's field.
  write_plan("plan.json");
  write("other.json", kSweep);
  r = run({"plan", "plan.json", "--sweep", "other.json", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["sweep"], "other.json");
  EXPECT_FALSE(j["tensors"][0]["time_after_s"].is_null());
}

TEST_F(PlanCliTest, BadInputExitsTwoNamingTheProblem) {
  write("broken.json", "{\"world\": 4, \"tensors\": [");
  expect_error({"plan", "broken.json"}, "broken.json: not valid JSON");
  expect_error({"plan", "missing.json"}, "cannot open missing.json");
  write("noworld.json", std::string("{\"tensors\": ") + kTensors + "}");
  expect_error({"plan", "noworld.json"}, "noworld.json: field 'world': missing");
  write("w3.json", std::string("{\"world\": 3, \"tensors\": ") + kTensors + "}");
  expect_error({"plan", "w3.json"}, "w3.json: tensor #0 'q': field 'axis': shape[1] = 4096 is not divisible by world 3");
  write("preset.json", R"({"world": 2, "tensors": [{"name": "x", "shape": [8, 64], "dtype": "bf16",
      "collective": "all_gather", "axis": 0, "quantize": "mxfp9"}]})");
  expect_error({"plan", "preset.json"}, "preset.json: tensor #0 'x': field 'quantize': unknown preset 'mxfp9'");
  write("coll.json", R"({"world": 2, "tensors": [{"name": "x", "shape": [8, 64], "dtype": "bf16",
      "collective": "broadcast", "axis": 0}]})");
  expect_error({"plan", "coll.json"}, "coll.json: tensor #0 'x': field 'collective': unknown collective 'broadcast'");
  write("rank.json", R"({"world": 2, "tensors": [{"name": "x", "shape": [8, 64], "dtype": "bf16",
      "collective": "all_gather", "axis": 0, "quantize": "int8.block.ascend"}]})");
  expect_error({"plan", "rank.json"}, "rank.json: tensor #0 'x': field 'quantize': preset int8.block.ascend cannot take");
  write_plan("plan.json");
  write("sweep2.json", std::string(kSweep).replace(std::string(kSweep).find("\"world\": 4"), 10, "\"world\": 2"));
  expect_error({"plan", "plan.json", "--sweep", "sweep2.json"},
               "sweep2.json: field 'world': the sweep was measured with 2 ranks, the plan has 4");
  write("bad_sweep.json", "{\"format\": \"nccl\"}");
  expect_error({"plan", "plan.json", "--sweep", "bad_sweep.json"},
               "bad_sweep.json: field 'format': expected \"qexact-sweep/1\", got \"nccl\"");
}

}  // namespace
