// `qexact plan` run as a process (its path comes from QEXACT_CLI) in a fresh temporary
// directory: the text and JSON reports, the sweep found from the plan or --sweep, and bad
// input exiting 2 with one "qexact: error: " line naming the tensor and the field.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_test_util.hpp"

namespace {
using qexact::test::RunResult;

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

class PlanCliTest : public qexact::test::CliTest {
 protected:
  PlanCliTest() : CliTest("qexact_plan_cli_") {}

  void SetUp() override {
    CliTest::SetUp();
    if (IsSkipped()) return;
    std::filesystem::create_directories(work() / "sub");
  }

  void write_plan(const std::string& name, const std::string& extra = "") const {
    put(name, "{\"world\": 4, " + extra + "\"tensors\": " + kTensors + "}");
  }
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
  put("sub/sweep.json", kSweep);
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
  put("other.json", kSweep);
  r = run({"plan", "plan.json", "--sweep", "other.json", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["sweep"], "other.json");
  EXPECT_FALSE(j["tensors"][0]["time_after_s"].is_null());
}

TEST_F(PlanCliTest, BadInputExitsTwoNamingTheProblem) {
  put("broken.json", "{\"world\": 4, \"tensors\": [");
  expect_rejected({"plan", "broken.json"}, "broken.json: not valid JSON");
  expect_rejected({"plan", "missing.json"}, "cannot open missing.json");
  put("noworld.json", std::string("{\"tensors\": ") + kTensors + "}");
  expect_rejected({"plan", "noworld.json"}, "noworld.json: field 'world': missing");
  put("w3.json", std::string("{\"world\": 3, \"tensors\": ") + kTensors + "}");
  expect_rejected({"plan", "w3.json"},
                  "w3.json: tensor #0 'q': field 'axis': shape[1] = 4096 is not divisible by world 3");
  put("preset.json", R"({"world": 2, "tensors": [{"name": "x", "shape": [8, 64], "dtype": "bf16",
      "collective": "all_gather", "axis": 0, "quantize": "mxfp9"}]})");
  expect_rejected({"plan", "preset.json"}, "preset.json: tensor #0 'x': field 'quantize': unknown preset 'mxfp9'");
  put("coll.json", R"({"world": 2, "tensors": [{"name": "x", "shape": [8, 64], "dtype": "bf16",
      "collective": "broadcast", "axis": 0}]})");
  expect_rejected({"plan", "coll.json"},
                  "coll.json: tensor #0 'x': field 'collective': unknown collective 'broadcast'");
  put("rank.json", R"({"world": 2, "tensors": [{"name": "x", "shape": [8, 64], "dtype": "bf16",
      "collective": "all_gather", "axis": 0, "quantize": "int8.block.ascend"}]})");
  expect_rejected({"plan", "rank.json"},
                  "rank.json: tensor #0 'x': field 'quantize': preset int8.block.ascend cannot take");
  write_plan("plan.json");
  put("sweep2.json", std::string(kSweep).replace(std::string(kSweep).find("\"world\": 4"), 10, "\"world\": 2"));
  expect_rejected({"plan", "plan.json", "--sweep", "sweep2.json"},
                  "sweep2.json: field 'world': the sweep was measured with 2 ranks, the plan has 4");
  put("bad_sweep.json", "{\"format\": \"nccl\"}");
  expect_rejected({"plan", "plan.json", "--sweep", "bad_sweep.json"},
                  "bad_sweep.json: field 'format': expected \"qexact-sweep/1\", got \"nccl\"");
}

}  // namespace
