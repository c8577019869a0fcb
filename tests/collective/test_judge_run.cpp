// The judge equals the runs: for the same plan file, `qexact plan --json` (no MPI) and
// `mpirun -np W qexact collective --json` (2, 3 and 4 ranks) must agree per tensor: exact where
// the judge says exact (0 differing bytes), drift only in blocks that straddle a shard boundary
// where it says drift, its drift_blocks equal to the run's count of straddling blocks, and the
// payload and scale bytes it predicts per rank equal to those the run put on the wire. Where the
// run refuses a tensor, the judge says "not supported for quantize-before" with the same reason.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mpi_test_util.hpp"

namespace {

using namespace qexact::test;
namespace fs = std::filesystem;
using json = nlohmann::json;

// `qexact plan --json plan.json` in `dir`, bounded by timeout like the MPI runs.
struct JudgeOutcome {
  int status = -1;
  std::string out, err;
};
JudgeOutcome judge(const fs::path& dir) {
  const std::string cmd = "cd '" + dir.string() + "' && timeout " + std::to_string(kRunTimeoutS) + " '" + kCli +
                          "' plan --json plan.json > judge.json 2> judge_err.txt";
  const int raw = std::system(cmd.c_str());
  JudgeOutcome r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = read_text(dir / "judge.json");
  r.err = read_text(dir / "judge_err.txt");
  return r;
}

std::map<std::string, json> by_name(const json& tensors) {
  std::map<std::string, json> m;
  for (const json& t : tensors) m[t["name"].get<std::string>()] = t;
  return m;
}

std::int64_t extra_bytes(const json& verdict) {
  std::int64_t n = 0;
  for (const json& e : verdict["extra_collectives"]) n += e["bytes"].get<std::int64_t>();
  return n;
}

// The plans of the brief: exact and drifting int8.block, MX along the sequence axis (a shard
// length a multiple of 32 or not), an all_to_all group with an unquantized tensor and a drifting
// one, int8.channel with the global scale, pool_mean with and without a tail cell; nvfp4 blocks,
// and its tensor scale from each shard's own amax or from the amax the ranks agree on.
std::vector<json> covering_plan(int w) {
  const std::vector<long> a2a{1, w * 64L, 2L * w, 32};
  return {plan_tensor("block_exact", {1, w * 128L, 3, 32}, "all_gather", "int8.block.ascend"),
          plan_tensor("block_drift", {1, w * 100L, 4, 32}, "all_gather", "int8.block.ascend"),
          plan_tensor("block_drift_f16", {2, w * 40L, 2, 16}, "all_gather", "int8.block.ascend",
                 {{"params", {{"token_block", "32"}, {"scale_store", "f16"}}}}),
          plan_tensor("mx_seq", {2, w * 10L, 3, 64}, "all_gather", "mxfp8.ascend"),
          plan_tensor("mx_seq_e2m1", {1, w * 7L, 2, 96}, "all_gather", "mx.ocp.e2m1"),
          plan_tensor("q", a2a, "all_to_all", "int8.block.ascend"),
          plan_tensor("k", a2a, "all_to_all", "mxfp8.ascend"),
          plan_tensor("o_grad", a2a, "all_to_all", nullptr),
          plan_tensor("k_drift", {1, w * 100L, 2L * w, 32}, "all_to_all", "int8.block.ascend"),
          plan_tensor("v_channel", {2, w * 24L, 3, 16}, "all_gather", "int8.channel", {{"scale", "global"}}),
          plan_tensor("pool_tail", {2, w * 50L, 3, 8}, "pool_mean", nullptr, {{"pool", 64}}),
          plan_tensor("pool_even", {1, w * 64L, 2, 8}, "pool_mean", nullptr, {{"pool", 32}}),
          plan_tensor("nv_blocks", {2, w * 6L, 2L * w, 32}, "all_to_all", "nvfp4.torchao"),
          plan_tensor("nv_own_amax", {2, w * 6L, 2, 32}, "all_gather", "nvfp4.torchao",
                      {{"params", {{"tensor_scale", "amax"}}}}),
          plan_tensor("nv_agreed_amax", {2, w * 6L, 2, 32}, "all_gather", "nvfp4.torchao",
                      {{"params", {{"tensor_scale", "amax"}}}, {"scale", "global"}}),
          plan_tensor("nv_heads_amax", {1, w * 8L, 2L * w, 32}, "all_to_all", "nvfp4.torchao",
                      {{"params", {{"tensor_scale", "amax"}}}, {"scale", "global"}}),
          plan_tensor("fp8_rows", {2, w * 5L, 2, 48}, "all_gather", "fp8.torchao.rowwise"),
          plan_tensor("fp8_groups_cut", {3, 2, w * 40L}, "all_gather", "fp8.ascend.token",
                      {{"params", {{"granularity", "group:32"}}}, {"axis", 2}}),
          plan_tensor("fp8_tiles", {w * 48L, 64}, "all_gather", "fp8.ascend.token",
                      {{"params", {{"granularity", "tile:32x32"}}}, {"axis", 0}}),
          plan_tensor("fp8_blocks_drift", {1, w * 100L, 2, 16}, "all_gather", "fp8.ascend.block"),
          plan_tensor("fp8_own_amax", {2, w * 6L, 2, 32}, "all_gather", "fp8.torchao.tensorwise"),
          plan_tensor("fp8_agreed_amax", {2, w * 6L, 2, 32}, "all_gather", "fp8.torchao.tensorwise",
                      {{"scale", "global"}}),
          plan_tensor("fp8_heads_amax", {1, w * 8L, 2L * w, 32}, "all_to_all", "fp8.torchao.tensorwise",
                      {{"scale", "global"}})};
}

class JudgeEqualsRun : public ::testing::TestWithParam<int> {};

TEST_P(JudgeEqualsRun, PerTensorVerdictsDriftAndBytes) {
  const int w = GetParam();
  const fs::path dir = scratch_dir();
  std::ofstream(dir / "plan.json") << json{{"world", w}, {"tensors", covering_plan(w)}}.dump(2);

  const JudgeOutcome j = judge(dir);
  ASSERT_EQ(j.status, 0) << j.err;
  const MpiOutcome r = mpirun(w, "collective plan.json --json --iterations 1", dir);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto verdicts = by_name(json::parse(j.out)["tensors"]);
  const auto runs = by_name(json::parse(r.out)["tensors"]);
  ASSERT_EQ(verdicts.size(), covering_plan(w).size());
  ASSERT_EQ(runs.size(), verdicts.size());

  int drifting = 0;
  for (const auto& [name, v] : verdicts) {
    SCOPED_TRACE(name + ": " + v["reason"].get<std::string>());
    ASSERT_TRUE(runs.contains(name));
    const json& run = runs.at(name);
    EXPECT_TRUE(v["supported"].get<bool>());
    EXPECT_EQ(v["exact"].get<bool>(), run["exact_observed"].get<bool>());
    // k: the scale domains a shard boundary cuts, counted by the judge from the shapes and by
    // the run from its block map.
    EXPECT_EQ(v["drift_blocks"], run["straddling_total"]);
    // Observed drift lies only in straddling blocks; a straddling block may keep its bytes
    // (its amax and its scale can come out the same on both sides), so differing <= k.
    EXPECT_EQ(run["differing_blocks"], run["straddling_blocks"]);
    EXPECT_TRUE(run["all_drift_at_boundaries"].get<bool>());
    EXPECT_LE(run["differing_blocks"].get<long>(), v["drift_blocks"].get<long>());
    if (v["exact"].get<bool>()) {
      EXPECT_EQ(run["payload_bytes_differing"], 0);
      EXPECT_EQ(run["scale_bytes_differing"], 0);
    } else {
      ++drifting;
      EXPECT_GE(run["differing_blocks"].get<long>(), 1);
    }
    // Bytes per rank (the most of any rank): what the judge predicts is what the run sent.
    EXPECT_EQ(v["bytes_before"], run["bytes_bf16"]);
    EXPECT_EQ(v["payload_bytes"], run["payload_bytes_sent"]);
    EXPECT_EQ(v["scale_bytes"], run["scale_bytes_sent"]);
    EXPECT_EQ(v["bytes_after"], run["bytes_sent"]);
    EXPECT_EQ(extra_bytes(v), run["extra_bytes"].get<std::int64_t>());
  }
  // S % (w x 64) != 0 for block_drift, k_drift and fp8_blocks_drift, S % (w x 32) != 0 for
  // block_drift_f16, C % (w x 32) != 0 for fp8_groups_cut, R % (w x 32) != 0 for fp8_tiles (the
  // boundary at 48 cuts tile row 1); each shard's own amax for nv_own_amax and fp8_own_amax.
  EXPECT_EQ(drifting, 8);
  EXPECT_FALSE(verdicts.at("nv_own_amax")["exact"].get<bool>());
  EXPECT_TRUE(verdicts.at("nv_agreed_amax")["exact"].get<bool>());
  EXPECT_FALSE(verdicts.at("block_drift")["exact"].get<bool>());
  EXPECT_EQ(verdicts.at("block_drift")["drift_blocks"], 4 * (w - 1));  // each interior boundary cuts one block per head
  EXPECT_TRUE(verdicts.at("mx_seq_e2m1")["exact"].get<bool>());
}

TEST_P(JudgeEqualsRun, WhatTheRunRefusesTheJudgeCallsNotSupported) {
  const int w = GetParam();
  const fs::path dir = scratch_dir();
  // MX groups along the sharded last axis; int8.block re-sharded onto its token axis; a scale
  // layout padded over the whole tensor.
  const std::vector<json> cases = {
      plan_tensor("x", {2, 3, 64L * w}, "all_gather", "mxfp8.ascend", {{"axis", 2}}),
      plan_tensor("x", {1, 192, 2L * w, 32}, "all_to_all", "int8.block.ascend", {{"axis", 2}, {"to_axis", 1}}),
      plan_tensor("x", {64L * w, 64}, "all_gather", "mxfp8.te", {{"axis", 0}}),
      // nvfp4's blocks of 16 along the sharded last axis; a tensor scale from each shard's own
      // amax cannot be re-sharded into the head shards' tensor scales.
      plan_tensor("x", {2, 3, 64L * w}, "all_gather", "nvfp4.torchao", {{"axis", 2}}),
      plan_tensor("x", {1, 16L * w, 2L * w, 32}, "all_to_all", "nvfp4.torchao", {{"params", {{"tensor_scale", "amax"}}}}),
      // An fp8 row scale cut along the last axis; tiles of the [R, C] view sharded on a middle axis.
      plan_tensor("x", {2, 3, 32L * w}, "all_gather", "fp8.torchao.rowwise", {{"axis", 2}}),
      plan_tensor("x", {2, 8L * w, 64}, "all_gather", "fp8.ascend.token", {{"params", {{"granularity", "tile:8x32"}}}})};
  for (const json& t : cases) {
    SCOPED_TRACE(t.dump());
    std::ofstream(dir / "plan.json") << json{{"world", w}, {"tensors", json::array({t})}}.dump(2);
    const JudgeOutcome j = judge(dir);
    ASSERT_EQ(j.status, 0) << j.err;
    const json v = json::parse(j.out)["tensors"][0];
    EXPECT_FALSE(v["supported"].get<bool>());
    EXPECT_FALSE(v["exact"].get<bool>());
    EXPECT_EQ(json::parse(j.out)["totals"]["unsupported"], 1);
    const std::string reason = v["reason"].get<std::string>();
    const std::string prefix = "not supported for quantize-before: ";
    ASSERT_EQ(reason.rfind(prefix, 0), 0u) << reason;

    const MpiOutcome r = mpirun(w, "collective plan.json --json --iterations 1", dir);
    EXPECT_NE(r.status, 0);
    EXPECT_EQ(r.out, "");
    // Every rank names the tensor and gives the judge's reason, word for word.
    EXPECT_EQ(count_of(r.err, "qexact: error: plan.json: tensor #0 'x': " + reason), w) << r.err;
  }
}

INSTANTIATE_TEST_SUITE_P(World, JudgeEqualsRun, ::testing::Values(2, 3, 4), [](const auto& info) {
  return "np" + std::to_string(info.param);
});

}  // namespace
