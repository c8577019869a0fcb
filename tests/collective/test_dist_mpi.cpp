// Multi-rank tests: `qexact collective` and `qexact sweep` under mpirun with 2, 3 and 4 ranks
// (oversubscribed), asserting byte counts from the JSON report. Each mpirun is bounded by
// `timeout`, so a hang fails the test instead of stalling CI. CMake compiles in QEXACT_CLI_PATH
// (the binary) and QEXACT_MPIRUN (the mpirun command with its flags).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <thread>
#include <filesystem>
#include <map>
#include <vector>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "mpi_test_util.hpp"

namespace {

using namespace qexact::test;
namespace fs = std::filesystem;
using json = nlohmann::json;

// Runs the plan on `np` ranks and returns the report's tensors by name.
std::map<std::string, json> run_plan(int np, const std::vector<json>& tensors, const fs::path& dir) {
  std::ofstream(dir / "plan.json") << json{{"world", np}, {"tensors", json(tensors)}}.dump(2);
  const MpiOutcome r = mpirun(np, "collective plan.json --iterations 1 --report report.json", dir);
  EXPECT_EQ(r.status, 0) << r.err;
  std::map<std::string, json> by_name;
  if (r.status != 0) return by_name;
  // Only rank 0 prints: one table.
  EXPECT_EQ(count_of(r.out, "qexact collective:"), 1) << r.out;
  const json report = json::parse(read_text(dir / "report.json"));
  EXPECT_EQ(report["world"], np);
  for (const json& t : report["tensors"]) by_name[t["name"].get<std::string>()] = t;
  return by_name;
}

class Ranks : public ::testing::TestWithParam<int> {};

TEST_P(Ranks, ExactWhenEveryShardHoldsWholeBlocks) {
  const int w = GetParam();
  const fs::path dir = scratch_dir();
  // int8.block: S = world x 64 x 2; MX groups run along D, so any S divisible by world is exact.
  const long s_block = w * 64L * 2, s_mx = w * 10L;
  auto t = run_plan(w,
                    {plan_tensor("q_int8", {1, s_block, 3, 32}, "all_gather", "int8.block.ascend"),
                     plan_tensor("k_mxfp8", {2, s_mx, 3, 64}, "all_gather", "mxfp8.ascend"),
                     plan_tensor("v_mxfp4", {1, s_mx, 2, 64}, "all_gather", "mx.ocp.e2m1"),
                     plan_tensor("k_mxfp8_a2a", {1, s_mx, 2 * w, 64}, "all_to_all", "mxfp8.ascend")},
                    dir);
  ASSERT_EQ(t.size(), 4u);
  for (const auto& [name, r] : t) {
    EXPECT_TRUE(r["exact_observed"].get<bool>()) << name;
    EXPECT_EQ(r["payload_bytes_differing"], 0) << name;
    EXPECT_EQ(r["scale_bytes_differing"], 0) << name;
    EXPECT_EQ(r["differing_blocks"], 0) << name;
  }
  EXPECT_EQ(t["q_int8"]["payload_bytes_total"], s_block * 3 * 32);                // i8, one byte per element
  EXPECT_EQ(t["q_int8"]["scale_bytes_total"], 3 * (s_block / 64) * 4);          // fp32 per (head, block)
  EXPECT_EQ(t["q_int8"]["payload_bytes_sent"], s_block / w * 3 * 32);
  EXPECT_EQ(t["q_int8"]["bytes_bf16"], s_block / w * 3 * 32 * 2);
  EXPECT_EQ(t["v_mxfp4"]["payload_bytes_total"], s_mx * 2 * 32);                // E2M1: two per byte
  EXPECT_EQ(t["k_mxfp8"]["scale_bytes_total"], 2 * s_mx * 3 * 2);              // pairs layout: 2 groups of 32
}

TEST_P(Ranks, DriftOnlyInBlocksThatStraddleAShardBoundary) {
  const int w = GetParam();
  const fs::path dir = scratch_dir();
  // S % (world x 64) != 0: each interior shard boundary cuts a 64-token block of every head.
  const long s = w * 100L;
  // all_to_all: the same cut blocks, now in the head shards (summed over ranks).
  auto t = run_plan(w,
                    {plan_tensor("q", {1, s, 4, 32}, "all_gather", "int8.block.ascend"),
                     plan_tensor("k", {1, s, 2 * w, 32}, "all_to_all", "int8.block.ascend")},
                    dir);
  ASSERT_EQ(t.size(), 2u);
  const long heads_of[2] = {4, 2L * w};
  int i = 0;
  for (const char* name : {"q", "k"}) {
    const json& r = t[name];
    EXPECT_FALSE(r["exact_observed"].get<bool>()) << name;
    EXPECT_GE(r["differing_blocks"].get<long>(), 1) << name;
    EXPECT_LE(r["differing_blocks"].get<long>(), heads_of[i++] * (w - 1)) << name;  // heads x interior boundaries
    EXPECT_EQ(r["straddling_blocks"], r["differing_blocks"]) << name;
    EXPECT_TRUE(r["all_drift_at_boundaries"].get<bool>()) << name;
    EXPECT_GT(r["payload_bytes_differing"].get<long>(), 0) << name;
  }
}

TEST_P(Ranks, GlobalScaleAfterOneAllReduceIsExact) {
  const int w = GetParam();
  const fs::path dir = scratch_dir();
  auto t = run_plan(w, {plan_tensor("v", {2, w * 24L, 3, 16}, "all_gather", "int8.channel", {{"scale", "global"}})}, dir);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_TRUE(t["v"]["exact_observed"].get<bool>());
  EXPECT_EQ(t["v"]["payload_bytes_total"], 2 * w * 24L * 3 * 16);
  EXPECT_EQ(t["v"]["scale_bytes_total"], 3 * 16 * 4);
  EXPECT_EQ(t["v"]["scale_bytes_differing"], 0);
  EXPECT_EQ(t["v"]["extra_collective"], "all_reduce(MAX) of the (N, D) fp32 amax");
}

TEST_P(Ranks, SideChannelIsExactAndTheUniformDivisorDiffersOnTheTailOnly) {
  const int w = GetParam();
  const fs::path dir = scratch_dir();
  // S = 50 w, P = 64: shard boundaries cut cells, and S % P != 0 gives a tail cell (except
  // w = 4... 200 % 64 = 8, still a tail); a second tensor with P dividing S has no tail.
  auto t = run_plan(w,
                    {plan_tensor("mask", {2, w * 50L, 3, 8}, "pool_mean", nullptr, {{"pool", 64}}),
                     plan_tensor("mask_even", {1, w * 64L, 2, 8}, "pool_mean", nullptr, {{"pool", 32}})},
                    dir);
  ASSERT_EQ(t.size(), 2u);
  for (const auto& [name, r] : t) {
    EXPECT_TRUE(r["exact_observed"].get<bool>()) << name;
    EXPECT_EQ(r["payload_bytes_differing"], 0) << name;
  }
  const long cells = (w * 50L + 63) / 64;
  EXPECT_EQ(t["mask"]["payload_bytes_total"], 2 * cells * 3 * 8 * 2);
  EXPECT_EQ(t["mask"]["tail_cell"], cells - 1);
  EXPECT_EQ(t["mask"]["uniform_divisor"]["cells_differing"], 1);
  EXPECT_TRUE(t["mask"]["uniform_divisor"]["differs_on_tail_cell_only"].get<bool>());
  EXPECT_TRUE(t["mask_even"]["tail_cell"].is_null());
  EXPECT_EQ(t["mask_even"]["uniform_divisor"]["cells_differing"], 0);
}

TEST_P(Ranks, AllToAllGroupIsExactAndThreeOfFourQuantizedMove62Point5Percent) {
  const int w = GetParam();
  const fs::path dir = scratch_dir();
  // Ulysses: sequence-sharded -> head-sharded; q, k, v forward in int8, o backward in bf16.
  const std::vector<long> shape{1, w * 64L, w * 2L, 32};
  auto t = run_plan(w,
                    {plan_tensor("q", shape, "all_to_all", "int8.block.ascend"),
                     plan_tensor("k", shape, "all_to_all", "int8.block.ascend"),
                     plan_tensor("v", shape, "all_to_all", "int8.block.ascend"),
                     plan_tensor("o_grad", shape, "all_to_all", nullptr)},
                    dir);
  ASSERT_EQ(t.size(), 4u);
  long bf16 = 0, sent = 0, scale = 0;
  for (const auto& [name, r] : t) {
    EXPECT_TRUE(r["exact_observed"].get<bool>()) << name;
    EXPECT_EQ(r["payload_bytes_total"], name == "o_grad" ? w * 64L * w * 2 * 32 * 2 : w * 64L * w * 2 * 32) << name;
    bf16 += r["bytes_bf16"].get<long>();
    sent += r["bytes_sent"].get<long>();
    scale += r["scale_bytes_sent"].get<long>();
  }
  // (3 x 0.5 + 1) / 4 = 62.5% of the bf16 bytes, plus the scale bytes: one fp32 per
  // (head, 64-token block) of each quantized shard.
  EXPECT_EQ(8 * (sent - scale), 5 * bf16);
  EXPECT_EQ(scale, 3L * (w * 2) * 1 * 4);
  EXPECT_EQ(t["o_grad"]["scale_bytes_sent"], 0);
}

// A tensor-wide amax (nvfp4 tensor_scale=amax, fp8.scaled granularity=tensor): each shard's own
// amax gives other bytes than the tensor's (counted); after one all_reduce(MAX) of the amax
// (per destination rank for all_to_all) every byte equals quantizing the whole tensor.
std::vector<json> tensor_amax_plan(int w) {
  const json nvfp4_amax = {{"params", {{"tensor_scale", "amax"}}}};
  json global = nvfp4_amax;
  global["scale"] = "global";
  const json agreed = {{"scale", "global"}};
  return {plan_tensor("nv_own", {2, w * 24L, 3, 64}, "all_gather", "nvfp4.torchao", nvfp4_amax),
          plan_tensor("nv_agreed", {2, w * 24L, 3, 64}, "all_gather", "nvfp4.torchao", global),
          plan_tensor("nv_heads", {1, w * 16L, 2L * w, 32}, "all_to_all", "nvfp4.torchao", global),
          plan_tensor("fp8_own", {2, w * 24L, 3, 64}, "all_gather", "fp8.torchao.tensorwise"),
          plan_tensor("fp8_agreed", {2, w * 24L, 3, 64}, "all_gather", "fp8.torchao.tensorwise", agreed),
          plan_tensor("fp8_agreed_last", {4, 3, w * 40L}, "all_gather", "fp8.torchao.tensorwise",
                      {{"scale", "global"}, {"axis", 2}}),
          plan_tensor("fp8_heads", {1, w * 16L, 2L * w, 32}, "all_to_all", "fp8.torchao.tensorwise", agreed)};
}

TEST_P(Ranks, TensorAmaxDiffersWithoutAgreementAndIsExactAfterOneAllReduce) {
  const int w = GetParam();
  const fs::path dir = scratch_dir();
  auto t = run_plan(w, tensor_amax_plan(w), dir);
  ASSERT_EQ(t.size(), tensor_amax_plan(w).size());
  for (const auto& [name, r] : t) {
    SCOPED_TRACE(name);
    const bool own = name.find("_own") != std::string::npos;
    EXPECT_EQ(r["exact_observed"].get<bool>(), !own);
    if (own) {
      EXPECT_GT(r["payload_bytes_differing"].get<long>() + r["scale_bytes_differing"].get<long>(), 0);
      EXPECT_EQ(r["differing_blocks"], 1);  // the one tensor-wide domain
      EXPECT_TRUE(r["all_drift_at_boundaries"].get<bool>());
      EXPECT_TRUE(r["extra_collective"].is_null());
    } else {
      EXPECT_EQ(r["payload_bytes_differing"], 0);
      EXPECT_EQ(r["scale_bytes_differing"], 0);
      EXPECT_EQ(r["extra_bytes"], r["collective"] == "all_to_all" ? 4 * w : 4);
    }
  }
  const long n = 2 * w * 24L * 3 * 64;  // nv_own, nv_agreed: elements
  for (const char* name : {"nv_own", "nv_agreed"}) {
    EXPECT_EQ(t[name]["payload_bytes_total"], n / 2) << name;      // E2M1 pairs
    EXPECT_EQ(t[name]["scale_bytes_total"], n / 16 + 4) << name;   // E4M3 per 16, fp32 tensor scale
  }
  EXPECT_EQ(t["fp8_own"]["payload_bytes_total"], n);                 // one E4M3 code per element
  EXPECT_EQ(t["fp8_own"]["scale_bytes_total"], 4);                   // one fp32 multiplier
  EXPECT_EQ(t["fp8_own"]["scale_bytes_sent"], 4);                    // each rank's own
  EXPECT_EQ(t["fp8_agreed"]["scale_bytes_sent"], 0);                 // computed by every rank
  EXPECT_EQ(t["fp8_agreed"]["payload_bytes_sent"], n / w);
  EXPECT_EQ(t["nv_own"]["scale_bytes_sent"], n / w / 16 + 4);      // its own tensor scale too
  EXPECT_EQ(t["nv_agreed"]["scale_bytes_sent"], n / w / 16);       // every rank computes it
  EXPECT_EQ(t["nv_agreed"]["extra_collective"], "all_reduce(MAX) of the fp32 tensor amax");
  EXPECT_EQ(t["nv_heads"]["extra_collective"], "all_reduce(MAX) of one fp32 amax per destination rank");
}

// fp8.scaled rows, groups, tiles and head blocks whose domains lie inside the shards: 0
// differing bytes; groups cut along the sharded last axis: drift only in the groups cut.
TEST_P(Ranks, Fp8ScaledDomainsInsideTheShardsAreExact) {
  const int w = GetParam();
  const fs::path dir = scratch_dir();
  auto t = run_plan(w,
                    {plan_tensor("rows", {2, w * 10L, 3, 64}, "all_gather", "fp8.torchao.rowwise"),
                     plan_tensor("groups", {2, w * 10L, 96}, "all_gather", "fp8.ascend.token",
                                 {{"params", {{"granularity", "group:32"}}}}),
                     plan_tensor("groups_last", {4, 2, w * 64L}, "all_gather", "fp8.ascend.token",
                                 {{"params", {{"granularity", "group:32"}}}, {"axis", 2}}),
                     plan_tensor("tiles", {w * 64L, 96}, "all_gather", "fp8.ascend.token",
                                 {{"params", {{"granularity", "tile:32x32"}}}, {"axis", 0}}),
                     plan_tensor("blocks", {1, w * 128L, 2, 32}, "all_gather", "fp8.ascend.block"),
                     plan_tensor("rows_a2a", {1, w * 10L, 2L * w, 64}, "all_to_all", "fp8.torchao.rowwise"),
                     plan_tensor("groups_cut", {4, 2, w * 40L}, "all_gather", "fp8.ascend.token",
                                 {{"params", {{"granularity", "group:32"}}}, {"axis", 2}})},
                    dir);
  ASSERT_EQ(t.size(), 7u);
  for (const auto& [name, r] : t) {
    if (name == "groups_cut") continue;
    EXPECT_TRUE(r["exact_observed"].get<bool>()) << name;
    EXPECT_EQ(r["payload_bytes_differing"], 0) << name;
    EXPECT_EQ(r["scale_bytes_differing"], 0) << name;
    EXPECT_GT(r["scale_bytes_total"].get<long>(), 0) << name;
  }
  EXPECT_EQ(t["rows"]["payload_bytes_total"], 2 * w * 10L * 3 * 64);
  EXPECT_EQ(t["rows"]["scale_bytes_total"], 2 * w * 10L * 3 * 4);
  // Shards of 40 columns cut the groups of 32 whose span holds a multiple of 40.
  const json& cut = t["groups_cut"];
  EXPECT_FALSE(cut["exact_observed"].get<bool>());
  EXPECT_GE(cut["differing_blocks"].get<long>(), 1);
  EXPECT_EQ(cut["straddling_blocks"], cut["differing_blocks"]);
  EXPECT_TRUE(cut["all_drift_at_boundaries"].get<bool>());
}

INSTANTIATE_TEST_SUITE_P(World, Ranks, ::testing::Values(2, 3, 4), [](const auto& info) {
  return "np" + std::to_string(info.param);
});

// ---- bad input: a clear error on every rank, a non-zero exit, no hang ----

void write_plan(const fs::path& file, long seq, const json& world = nullptr) {
  json plan{{"tensors", json::array({plan_tensor("q", {1, seq, 2, 32}, "all_gather", "int8.block.ascend")})}};
  if (!world.is_null()) plan["world"] = world;
  std::ofstream(file) << plan.dump(2);
}

TEST(BadInput, MismatchedShardShapesAcrossRanks) {
  const fs::path dir = scratch_dir();
  write_plan(dir / "a.json", 128);
  write_plan(dir / "b.json", 192);
  const std::string cli = "'" + kCli + "'";
  const MpiOutcome r = mpirun_line("-np 1 " + cli + " collective a.json : -np 1 " + cli + " collective b.json", dir);
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(count_of(r.err, "qexact: error: the ranks disagree on the plan: rank 0 has q: shape (1, 128, 2, 32)"), 2)
      << r.err;
  EXPECT_NE(r.err.find("rank 1 has q: shape (1, 192, 2, 32)"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST(BadInput, WorldSizeThatDoesNotDivideTheShardedAxis) {
  const fs::path dir = scratch_dir();
  write_plan(dir / "plan.json", 128);
  const MpiOutcome r = mpirun(3, "collective plan.json", dir);
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(count_of(r.err, "qexact: error: plan.json: tensor #0 'q': field 'axis': shape[1] = 128 is not divisible by world 3"), 3)
      << r.err;
}

TEST(BadInput, PlanForAnotherWorldSize) {
  const fs::path dir = scratch_dir();
  write_plan(dir / "plan.json", 128, 4);
  const MpiOutcome r = mpirun(2, "collective plan.json", dir);
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(count_of(r.err, "qexact: error: plan.json: field 'world' is 4 but the run has 2 ranks"), 2) << r.err;
}

TEST(BadInput, ARankThatFailsIsReportedByEveryRank) {
  const fs::path dir = scratch_dir();
  write_plan(dir / "plan.json", 192);
  const MpiOutcome r = mpirun(3, "collective plan.json --fail-rank 1", dir);
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(count_of(r.err, "qexact: error: rank 1: failure injected while preparing"), 3) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST(BadInput, ARankOutOfMemoryIsReportedByEveryRank) {
#ifdef __SANITIZE_ADDRESS__
  GTEST_SKIP() << "ASan reserves its shadow memory at start: no address-space limit leaves it room to run";
#else
  // Rank 1 gets an address space too small for its copies of a 256 MiB tensor: its bad_alloc
  // inside a step is agreed on, so both ranks say "out of memory" (exit 2) instead of rank 0
  // waiting in a collective for a rank that is gone.
  const fs::path dir = scratch_dir();
  write_plan(dir / "plan.json", 2097152);
  const std::string cli = "'" + kCli + "'";
  const MpiOutcome r =
      mpirun_line("-np 1 " + cli + " collective plan.json : -np 1 prlimit --as=400000000 " + cli + " collective plan.json",
                  dir);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(count_of(r.err, "qexact: error: rank 1: out of memory\n"), 2) << r.err;
  EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
#endif
}

TEST(BadInput, AMissingPlanFileOnEveryRank) {
  const fs::path dir = scratch_dir();
  const MpiOutcome r = mpirun(2, "collective missing.json", dir);
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(count_of(r.err, "qexact: error: cannot open missing.json"), 2) << r.err;
}

TEST(BadInput, NegativeFailRankOrThreadsIsAnErrorNamingTheRange) {
  const fs::path dir = scratch_dir();
  write_plan(dir / "plan.json", 128);
  const MpiOutcome r = mpirun(2, "collective plan.json --fail-rank -5", dir);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(count_of(r.err, "qexact: error: --fail-rank: Value -5 not in range -1 to"), 2) << r.err;
  const MpiOutcome t = mpirun(2, "collective plan.json --threads -2", dir);
  EXPECT_EQ(t.status, 2) << t.err;
  EXPECT_EQ(count_of(t.err, "qexact: error: --threads: Value -2 not in range 0 to 4096"), 2) << t.err;
}

// ---- the sweep file ----

TEST(Sweep, WritesTheSweepFormat) {
  const fs::path dir = scratch_dir();
  const MpiOutcome r = mpirun(2, "sweep --out sweep.json --max-bytes 65536 --warmup 1 --iterations 3", dir);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(count_of(r.out, "qexact sweep:"), 1) << r.out;
  const json j = json::parse(read_text(dir / "sweep.json"));
  EXPECT_EQ(j["format"], "qexact-sweep/1");
  EXPECT_EQ(j["world"], 2);
  EXPECT_EQ(j["mpi"].get<std::string>().rfind("Open MPI v", 0), 0u) << j["mpi"];
  EXPECT_TRUE(j["host"].is_string());
  EXPECT_EQ(j["warmup"], 1);
  EXPECT_EQ(j["iterations"], 3);
  ASSERT_EQ(j["collectives"].size(), 2u);
  for (const char* name : {"all_gather", "all_to_all"}) {
    const json& curve = j["collectives"][name];
    ASSERT_EQ(curve.size(), 14u) << name;  // 8 B .. 64 KiB in x2 steps
    long bytes = 8;
    for (const json& p : curve) {
      EXPECT_EQ(p["bytes"], bytes);
      const double t = p["time_s"].get<double>();
      EXPECT_GT(t, 0.0);
      EXPECT_EQ(p["algbw_GBps"].get<double>(), static_cast<double>(bytes) / t / 1e9);
      EXPECT_EQ(p["busbw_GBps"].get<double>(), p["algbw_GBps"].get<double>() * 1.0 / 2.0);
      bytes *= 2;
    }
  }
}

TEST(Sweep, BadOptionsAreAnErrorOnEveryRank) {
  const fs::path dir = scratch_dir();
  const MpiOutcome r = mpirun(2, "sweep --out sweep.json --min-bytes 64 --max-bytes 8", dir);
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(count_of(r.err, "qexact: error: --max-bytes 8 is below --min-bytes 64"), 2) << r.err;
  EXPECT_FALSE(fs::exists(dir / "sweep.json"));
}

// ---- outputs checked before the run; a rank that stops answering ----

TEST(Outputs, AnUnwritableReportIsFoundOnEveryRankBeforeTheRun) {
  const fs::path dir = scratch_dir();
  write_plan(dir / "plan.json", 128);
  // So many iterations that a check after the run would time the test out.
  const MpiOutcome r = mpirun(2, "collective plan.json --iterations 100000000 --report missing/report.json", dir);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(count_of(r.err, "qexact: error: cannot write missing/report.json: its directory missing"), 2) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST(Outputs, AnUnwritableSweepFileIsFoundOnEveryRankBeforeTheRun) {
  const fs::path dir = scratch_dir();
  const MpiOutcome r = mpirun(2, "sweep --out missing/sweep.json --iterations 100000000", dir);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(count_of(r.err, "qexact: error: cannot write missing/sweep.json: its directory missing"), 2) << r.err;
}

TEST(Outputs, ASymlinkedReportIsRefusedBeforeTheRun) {
  const fs::path dir = scratch_dir();
  write_plan(dir / "plan.json", 128);
  fs::create_symlink("/dev/null", dir / "report.json");
  const MpiOutcome r = mpirun(2, "collective plan.json --iterations 100000000 --report report.json", dir);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(count_of(r.err, "symbolic link"), 2) << r.err;
  EXPECT_TRUE(fs::is_symlink(dir / "report.json"));
}

TEST(Watchdog, AStoppedRankEndsTheJobInsteadOfHangingIt) {
  const fs::path dir = scratch_dir();
  // A sweep long enough to be stopped in the middle; rank 1 is stopped (SIGSTOP) once both
  // ranks run. The watchdog of the waiting rank aborts the job after QEXACT_MPI_TIMEOUT.
  const std::string in_dir = "cd '" + dir.string() + "' && ";
  const std::string start_job = in_dir + "{ QEXACT_MPI_TIMEOUT=3 timeout " + std::to_string(kRunTimeoutS) + " " +
                                kMpirun + " -x QEXACT_MPI_TIMEOUT -np 2 '" + kCli +
                                "' sweep --out sweep.json --iterations 1000000 >stdout.txt 2>stderr.txt & "
                                "echo $! >job.pid; wait $!; echo $? >status.tmp; mv status.tmp status.txt; } &";
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(std::system(start_job.c_str()), 0);
  // The ranks: the qexact processes under mpirun, itself under timeout (job.pid).
  const std::string find = in_dir +
                           "for m in $(cat /proc/$(cat job.pid)/task/*/children); do"
                           " for p in $(cat /proc/$m/task/*/children); do"
                           " [ \"$(cat /proc/$p/comm)\" = qexact ] && echo $p; done; done >ranks.txt 2>/dev/null";
  std::string ranks;
  for (int i = 0; i < 300 && ranks.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    (void)std::system(find.c_str());
    const std::string found = read_text(dir / "ranks.txt");
    if (count_of(found, "\n") == 2) ranks = found;
  }
  if (!ranks.empty()) {
    std::this_thread::sleep_for(std::chrono::seconds(1));  // both are inside the sweep
    const std::string last = ranks.substr(ranks.find('\n') + 1);
    EXPECT_EQ(std::system(("kill -STOP " + last).c_str()), 0);
  }
  while (!fs::exists(dir / "status.txt")) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_FALSE(ranks.empty()) << "the two ranks were not found";
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string status = read_text(dir / "status.txt");
  EXPECT_NE(status, "0\n");
  EXPECT_NE(status, "124\n") << "the job hung until timeout killed it";
  EXPECT_LT(seconds, 60.0);
  EXPECT_NE(read_text(dir / "stderr.txt").find("a rank stopped answering"), std::string::npos)
      << read_text(dir / "stderr.txt");
  EXPECT_FALSE(fs::exists(dir / "sweep.json"));
}

TEST(Watchdog, ABadTimeoutIsAnError) {
  const fs::path dir = scratch_dir();
  const MpiOutcome r = mpirun_line("-x QEXACT_MPI_TIMEOUT=soon -np 2 '" + kCli + "' sweep --out sweep.json", dir);
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(count_of(r.err, "qexact: error: QEXACT_MPI_TIMEOUT='soon'"), 2) << r.err;
}

}  // namespace
