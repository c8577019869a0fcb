// The judge of quantize-before-the-collective (plan/): plan-file parsing and its errors, the
// verdicts and their drift counts, bytes on the wire counted by hand from the contracts, and the
// sweep's time prediction (interpolation inside, t0 below, nothing beyond).
#include <gtest/gtest.h>

#include <string>

#include "plan/judge.hpp"
#include "plan/plan_file.hpp"
#include "plan/sweep_file.hpp"

namespace qexact::plan {
namespace {

// A plan of one tensor given as the JSON text of its object.
PlanFile one(const std::string& tensor, int world = 4) {
  return parse_plan("{\"world\": " + std::to_string(world) + ", \"tensors\": [" + tensor + "]}", "t.json");
}

TensorVerdict verdict(const std::string& tensor, int world = 4) {
  const PlanFile p = one(tensor, world);
  check_world(p, world);
  return judge_tensor(p.tensors.at(0), world);
}

bool says_exact(const std::string& s) {
  return s.find("exact") != std::string::npos || s.find("lossless") != std::string::npos;
}

// Error kind and message of parsing (and world-checking) a plan.
std::string plan_error(const std::string& text, int world = 4) {
  try {
    check_world(parse_plan(text, "t.json"), world);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

const char* kQ4096 =
    R"({"name": "q", "shape": [1, 4096, 24, 128], "dtype": "bf16", "collective": "all_gather", "axis": 1,
        "quantize": "int8.block.ascend"})";

TEST(PlanJudge, Int8BlockAlignedIsExactWithHandCountedBytes) {
  const TensorVerdict v = verdict(kQ4096);
  EXPECT_TRUE(v.exact);
  EXPECT_EQ(v.drift_blocks, 0);
  EXPECT_EQ(v.total_blocks, 1 * 64 * 24);
  EXPECT_NE(v.reason.find("4096 % (4 x 64) = 0"), std::string::npos) << v.reason;
  const std::int64_t shard_numel = 1 * 1024 * 24 * 128;
  EXPECT_EQ(v.bytes_before, shard_numel * 2);           // bf16
  EXPECT_EQ(v.payload_bytes, shard_numel);              // one int8 per element
  EXPECT_EQ(v.scale_bytes, (1 * 16 * 24) * 4);          // (b, 1024/64 blocks, heads) fp32
  EXPECT_EQ(v.bytes_after, shard_numel + 1 * 16 * 24 * 4);
  EXPECT_TRUE(v.extra.empty());
}

TEST(PlanJudge, Int8BlockRaggedCountsTheStraddlingBlocks) {
  const TensorVerdict v = verdict(
      R"({"name": "q", "shape": [1, 4000, 24, 128], "dtype": "bf16", "collective": "all_gather", "axis": 1,
          "quantize": "int8.block.ascend"})");
  // Shards of 1000 tokens: the boundaries 1000, 2000, 3000 fall inside the token blocks
  // 15 (960..1023), 31 (1984..2047) and 46 (2944..3007); 4000 tokens make 63 blocks per head.
  EXPECT_FALSE(v.exact);
  EXPECT_EQ(v.total_blocks, 63 * 24);
  EXPECT_EQ(v.drift_blocks, 3 * 24);
  EXPECT_FALSE(says_exact(v.reason)) << v.reason;
  EXPECT_NE(v.reason.find("boundary blocks regrouped: 72 of 1512 blocks"), std::string::npos) << v.reason;
  EXPECT_NE(v.reason.find("4000 % (4 x 64) = 160"), std::string::npos) << v.reason;
  EXPECT_NE(v.reason.find("3 of 63 token blocks straddle a shard boundary"), std::string::npos) << v.reason;
  EXPECT_EQ(v.payload_bytes, 1000 * 24 * 128);
  // Each rank quantizes on the full tensor's grid: rank 1's rows 1000..1999 touch global blocks
  // 15..31, so it sends 17 scales per head (a shard-local grid would have 16).
  EXPECT_EQ(v.scale_bytes, 17 * 24 * 4);
}

TEST(PlanJudge, StraddledRunsCountsDistinctRuns) {
  EXPECT_EQ(straddled_runs(4000, 4, 64), 3);
  EXPECT_EQ(straddled_runs(4096, 4, 64), 0);
  EXPECT_EQ(straddled_runs(100, 4, 64), 2);  // boundaries 25 and 50 share run 0; 75 is in run 1
  EXPECT_EQ(straddled_runs(4000, 1, 64), 0);
  EXPECT_EQ(straddled_runs(128, 2, 128), 1);  // a whole-axis run is cut once
}

TEST(PlanJudge, ThreeOfFourQuantizedIsSixtyTwoPointFivePercent) {
  std::string tensors;
  for (const char* name : {"q", "k", "v"})
    tensors += std::string(R"({"name": ")") + name +
               R"(", "shape": [1, 4096, 24, 128], "dtype": "bf16", "collective": "all_to_all", "axis": 1,
                   "to_axis": 2, "quantize": "int8.block.ascend"},)";
  tensors += R"({"name": "o", "shape": [1, 4096, 24, 128], "dtype": "bf16", "collective": "all_to_all", "axis": 1,
                 "to_axis": 2})";
  const PlanFile p = one(tensors);
  const Judgement j = judge(p, check_world(p, 4), nullptr);
  const std::int64_t bf16 = 1024 * 24 * 128 * 2, int8 = 1024 * 24 * 128, scales = 16 * 24 * 4;
  EXPECT_EQ(j.totals.bytes_before, 4 * bf16);
  EXPECT_EQ(j.totals.payload_bytes, 3 * int8 + bf16);
  EXPECT_EQ(j.totals.scale_bytes, 3 * scales);
  EXPECT_EQ(j.totals.payload_ratio(), 0.625);
  EXPECT_EQ(j.totals.with_scales_ratio(), static_cast<double>(3 * (int8 + scales) + bf16) / static_cast<double>(4 * bf16));
  EXPECT_EQ(j.totals.exact, 4);
  EXPECT_EQ(j.totals.by_collective.at("all_to_all").payload_ratio(), 0.625);
  EXPECT_EQ(j.tensors[3].reason, "not quantized: moved as bf16, the same bytes either way");
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(j.tensors[i].exact) << j.tensors[i].reason;
}

// What `qexact collective` refuses, the judge calls "not supported for quantize-before", with the
// run's reason, and counts the tensor as moved unquantized.
void expect_refused(const TensorVerdict& v, const std::string& why) {
  EXPECT_FALSE(v.supported) << v.reason;
  EXPECT_FALSE(v.exact);
  EXPECT_FALSE(says_exact(v.reason)) << v.reason;
  EXPECT_EQ(v.reason.rfind("not supported for quantize-before: ", 0), 0u) << v.reason;
  EXPECT_NE(v.reason.find(why), std::string::npos) << v.reason;
  EXPECT_EQ(v.drift_blocks, 0);
  EXPECT_EQ(v.bytes_after, v.bytes_before);
  EXPECT_EQ(v.scale_bytes, 0);
}

TEST(PlanJudge, MxAlongTheShardedLastAxisIsRefused) {
  // Whether or not the shard length is a multiple of 32, the run does not shard an MX row.
  for (const char* cols : {"256", "320"})
    expect_refused(verdict(std::string(R"({"name": "x", "shape": [8, )") + cols +
                           R"(], "dtype": "bf16", "collective": "all_gather", "axis": 1, "quantize": "mxfp8.ascend"})"),
                   "its scale groups run along the last axis, which sharding would cut");
}

TEST(PlanJudge, MxShardedOffTheLastAxisNeverCutsGroups) {
  const TensorVerdict v = verdict(
      R"({"name": "x", "shape": [1, 4096, 3072], "dtype": "bf16", "collective": "all_gather", "axis": 1,
          "quantize": "mxfp8.ascend"})");
  EXPECT_TRUE(v.exact);
  EXPECT_EQ(v.payload_bytes, 1024 * 3072);
  EXPECT_EQ(v.scale_bytes, 1024 * 48 * 2);  // 96 groups per row in 48 pairs
}

TEST(PlanJudge, PaddedScaleLayoutsAreRefused) {
  // mxfp8.te pads its scales to [pad128(rows), pad4(groups)] of the whole tensor: a shard's
  // scales are not a slice of them.
  expect_refused(verdict(R"({"name": "x", "shape": [256, 64], "dtype": "bf16", "collective": "all_gather", "axis": 0,
                             "quantize": "mxfp8.te"})"),
                 "pads or tiles the scales of the whole tensor");
}

TEST(PlanJudge, Int8TokenAndQ80) {
  const TensorVerdict rows = verdict(
      R"({"name": "x", "shape": [64, 128], "dtype": "f32", "collective": "all_gather", "axis": 0, "quantize": "int8.token.blaze"})");
  EXPECT_TRUE(rows.exact);
  EXPECT_EQ(rows.bytes_before, 16 * 128 * 4);
  EXPECT_EQ(rows.scale_bytes, 16 * 4);
  expect_refused(verdict(R"({"name": "x", "shape": [64, 128], "dtype": "f32", "collective": "all_gather", "axis": 1,
                             "quantize": "int8.token.blaze"})"),
                 "cannot shard axis 1 of (64, 128) for int8.token.blaze");
  const TensorVerdict q8 = verdict(
      R"({"name": "x", "shape": [256, 4, 64], "dtype": "f16", "collective": "all_gather", "axis": 0, "quantize": "q8_0.ggml"})");
  EXPECT_TRUE(q8.exact) << q8.reason;
  EXPECT_EQ(q8.payload_bytes, 64 * 4 * 64);
  EXPECT_EQ(q8.scale_bytes, 64 * 4 * 2 * 2);  // fp16 d per group of 32
  EXPECT_NE(q8.reason.find("axis 0 is not reduced by any scale"), std::string::npos) << q8.reason;
}

TEST(PlanJudge, Hif4IsRefused) {
  expect_refused(verdict(R"({"name": "x", "shape": [4, 256], "dtype": "bf16", "collective": "all_gather", "axis": 1,
                             "quantize": "hif4"})", 2),
                 "hif4 has no quantize");
  EXPECT_NE(plan_error(R"({"world": 4, "tensors": [{"name": "x", "shape": [4, 320], "dtype": "bf16",
      "collective": "all_gather", "axis": 1, "quantize": "hif4"}]})").find("'x': field 'quantize': preset hif4 cannot take one shard (4, 80)"),
            std::string::npos);
}

TEST(PlanJudge, Int8ChannelGlobalNeedsOneAllReduce) {
  const TensorVerdict v = verdict(
      R"({"name": "v", "shape": [1, 4096, 24, 128], "dtype": "bf16", "collective": "all_gather", "axis": 1,
          "quantize": "int8.channel", "scale": "global"})");
  EXPECT_TRUE(v.exact);
  ASSERT_EQ(v.extra.size(), 1u);
  EXPECT_EQ(v.extra[0].op, "all_reduce_max");
  EXPECT_EQ(v.extra[0].bytes, 24 * 128 * 4);
  EXPECT_EQ(v.payload_bytes, 1024 * 24 * 128);
  EXPECT_EQ(v.scale_bytes, 0);
  EXPECT_NE(v.reason.find("(12288 bytes)"), std::string::npos) << v.reason;
}

TEST(PlanJudge, AllToAllMustNotCutScalesAfterwards) {
  // Re-sharding along D would cut the groups of 32 along it: refused. int8.block re-sharded
  // along its token axis 1 would cut its 64-token blocks: refused too.
  expect_refused(verdict(R"({"name": "x", "shape": [2, 64, 96], "dtype": "bf16", "collective": "all_to_all", "axis": 1,
                             "to_axis": 2, "quantize": "mxfp8.ascend"})", 2),
                 "its scale groups run along the last axis");
  expect_refused(verdict(R"({"name": "x", "shape": [1, 256, 4, 32], "dtype": "bf16", "collective": "all_to_all",
                             "axis": 2, "to_axis": 1, "quantize": "int8.block.ascend"})", 2),
                 "to_axis 1 would cut int8.block.ascend's scale blocks of 64");
  const TensorVerdict ok = verdict(
      R"({"name": "x", "shape": [2, 64, 4, 96], "dtype": "bf16", "collective": "all_to_all", "axis": 1, "to_axis": 2,
          "quantize": "mxfp8.ascend"})", 2);
  EXPECT_TRUE(ok.exact) << ok.reason;
  EXPECT_NE(ok.reason.find("after (re-sharded): axis 2 is not reduced by any scale"), std::string::npos) << ok.reason;
}

// fp8.scaled's granularities and nvfp4 (contracts §7, §9): scales that do not span the sharded
// axis are exact; runs along it (groups, tiles, token blocks) are exact when the boundaries fall
// on the run grid and otherwise drift in the runs cut; a whole row cut is refused.
std::string tensor_json(const std::string& shape, int axis, const std::string& quantize, const std::string& more = "") {
  return R"({"name": "x", "shape": )" + shape + R"(, "dtype": "bf16", "collective": "all_gather", "axis": )" +
         std::to_string(axis) + R"(, "quantize": ")" + quantize + "\"" + more + "}";
}

TEST(PlanJudge, Fp8RowsAreExactOffTheLastAxisAndRefusedAlongIt) {
  const TensorVerdict v = verdict(tensor_json("[1, 4000, 24, 128]", 1, "fp8.torchao.rowwise"));
  EXPECT_TRUE(v.exact) << v.reason;
  EXPECT_EQ(v.total_blocks, 4000 * 24);
  EXPECT_NE(v.reason.find("axis 1 is not reduced by any scale (the row scales run along axis 3)"), std::string::npos)
      << v.reason;
  EXPECT_EQ(v.payload_bytes, 1000 * 24 * 128);  // one E4M3 code per element
  EXPECT_EQ(v.scale_bytes, 1000 * 24 * 4);      // one fp32 per row
  expect_refused(verdict(tensor_json("[64, 128]", 1, "fp8.torchao.rowwise")),
                 "one scale spans each whole row of the last axis, which sharding would cut");
}

TEST(PlanJudge, Fp8GroupsAlongTheShardedLastAxisDriftInTheGroupsCut) {
  // Shards of 250 columns: the boundaries 250, 500, 750 cut the groups of 128 number 1, 3, 5.
  const TensorVerdict v = verdict(tensor_json("[64, 1000]", 1, "fp8.ascend.token", R"(, "params": {"granularity": "group:128"})"));
  EXPECT_FALSE(v.exact);
  EXPECT_FALSE(says_exact(v.reason)) << v.reason;
  EXPECT_EQ(v.total_blocks, 64 * 8);
  EXPECT_EQ(v.drift_blocks, 64 * 3);
  EXPECT_NE(v.reason.find("shape[1] % (world x N) = 1000 % (4 x 128) = 488: 3 of 8 groups straddle a shard boundary "
                          "(x 64 = 192 of 512 scale blocks)"),
            std::string::npos)
      << v.reason;
  EXPECT_EQ(v.payload_bytes, 64 * 250);
  EXPECT_EQ(v.scale_bytes, 64 * 3 * 4);  // ranks 1..3 touch 3 global groups per row
  const TensorVerdict even =
      verdict(tensor_json("[64, 1024]", 1, "fp8.ascend.token", R"(, "params": {"granularity": "group:128"})"));
  EXPECT_TRUE(even.exact) << even.reason;
  EXPECT_NE(even.reason.find("every run of 128 (groups) lies in one shard"), std::string::npos) << even.reason;
}

TEST(PlanJudge, Fp8TilesAreExactOnTheTileGrid) {
  const std::string tile = R"(, "params": {"granularity": "tile:128x128"})";
  EXPECT_TRUE(verdict(tensor_json("[1024, 512]", 0, "fp8.ascend.token", tile)).exact);
  EXPECT_TRUE(verdict(tensor_json("[1024, 512]", 1, "fp8.ascend.token", tile)).exact);
  const TensorVerdict flat = verdict(tensor_json("[4096]", 0, "fp8.ascend.token", tile));  // rank 1: the last axis
  EXPECT_TRUE(flat.exact) << flat.reason;
  EXPECT_NE(flat.reason.find("shape[0] % (world x N) = 4096 % (4 x 128) = 0"), std::string::npos) << flat.reason;
  const TensorVerdict v = verdict(tensor_json("[1000, 512]", 0, "fp8.ascend.token", tile));
  EXPECT_FALSE(v.exact);
  EXPECT_EQ(v.total_blocks, 8 * 4);
  EXPECT_EQ(v.drift_blocks, 3 * 4);  // tile rows 1, 3, 5, each 4 tiles wide
  EXPECT_NE(v.reason.find("3 of 8 tile rows straddle a shard boundary"), std::string::npos) << v.reason;
  EXPECT_EQ(v.scale_bytes, 3 * 4 * 4);
  // Rank 3: R = 8 x 4 rows, tiles of 32 rows = 8 indices of axis 0; shards of 4 cut tile row 0.
  const TensorVerdict r3 = verdict(tensor_json("[8, 4, 256]", 0, "fp8.ascend.token", R"(, "params": {"granularity": "tile:32x128"})"), 2);
  EXPECT_EQ(r3.total_blocks, 2);
  EXPECT_EQ(r3.drift_blocks, 2);
  EXPECT_NE(r3.reason.find("shape[0] % (world x M/4) = 8 % (2 x 8) = 8"), std::string::npos) << r3.reason;
  expect_refused(verdict(tensor_json("[8, 4, 256]", 1, "fp8.ascend.token", R"(, "params": {"granularity": "tile:32x128"})"), 2),
                 "is not a run of tile rows");
  // Tiles smaller than an index of axis 0: each index holds 64 / 32 = 2 whole tile rows.
  const TensorVerdict nested = verdict(tensor_json("[8, 64, 256]", 0, "fp8.ascend.token", R"(, "params": {"granularity": "tile:32x128"})"), 2);
  EXPECT_TRUE(nested.exact) << nested.reason;
  EXPECT_EQ(nested.total_blocks, 16 * 2);
  EXPECT_EQ(nested.scale_bytes, 4 * 2 * 2 * 4);  // 4 indices x 2 tile rows x 2 tile columns, fp32
  expect_refused(verdict(tensor_json("[8, 96, 256]", 0, "fp8.ascend.token", R"(, "params": {"granularity": "tile:128x128"})"), 2),
                 "a tile's 128 rows of the [R, C] view and the 96 rows of one index of axis 0 do not divide one another");
}

TEST(PlanJudge, Fp8HeadBlocksAreInt8BlocksDomains) {
  const TensorVerdict v = verdict(tensor_json("[1, 4000, 24, 128]", 1, "fp8.ascend.block"));
  EXPECT_FALSE(v.exact);
  EXPECT_EQ(v.total_blocks, 63 * 24);
  EXPECT_EQ(v.drift_blocks, 3 * 24);
  EXPECT_NE(v.reason.find("S % (world x T) = 4000 % (4 x 64) = 160: 3 of 63 token blocks straddle"), std::string::npos)
      << v.reason;
  EXPECT_EQ(v.scale_bytes, 17 * 24 * 4);
  EXPECT_TRUE(verdict(tensor_json("[1, 4096, 24, 128]", 2, "fp8.ascend.block")).exact);
}

TEST(PlanJudge, Nvfp4BlocksRunAlongTheLastAxis) {
  const TensorVerdict v = verdict(tensor_json("[2, 4096, 64]", 1, "nvfp4.torchao"));
  EXPECT_TRUE(v.exact) << v.reason;
  EXPECT_EQ(v.payload_bytes, 2 * 1024 * 32);  // two E2M1 codes per byte
  EXPECT_EQ(v.scale_bytes, 2 * 1024 * 4);     // one E4M3 byte per block of 16
  expect_refused(verdict(tensor_json("[2, 4096, 64]", 2, "nvfp4.torchao")),
                 "its blocks of 16 run along the last axis, which sharding would cut");
}

TEST(PlanJudge, TensorAmaxDriftsUnlessTheRanksAgreeOnIt) {
  const TensorVerdict local = verdict(tensor_json("[2, 4096, 64]", 1, "fp8.torchao.tensorwise"));
  EXPECT_TRUE(local.supported);
  EXPECT_FALSE(local.exact);
  EXPECT_FALSE(says_exact(local.reason)) << local.reason;
  EXPECT_EQ(local.total_blocks, 1);
  EXPECT_EQ(local.drift_blocks, 1);
  EXPECT_NE(local.reason.find("each shard's own amax sets the one fp32 scale of granularity=tensor"), std::string::npos)
      << local.reason;
  EXPECT_EQ(local.payload_bytes, 2 * 1024 * 64);
  EXPECT_EQ(local.scale_bytes, 4);  // each rank sends its own scale
  ASSERT_EQ(local.notes.size(), 1u);
  EXPECT_NE(local.notes[0].find("\"scale\": \"global\""), std::string::npos);

  for (int axis : {1, 2}) {  // elementwise once the scale is agreed: the last axis too
    const TensorVerdict agreed = verdict(tensor_json("[2, 4096, 64]", axis, "fp8.torchao.tensorwise", R"(, "scale": "global")"));
    EXPECT_TRUE(agreed.exact) << agreed.reason;
    EXPECT_EQ(agreed.drift_blocks, 0);
    EXPECT_EQ(agreed.scale_bytes, 0);
    ASSERT_EQ(agreed.extra.size(), 1u);
    EXPECT_EQ(agreed.extra[0].op, "all_reduce_max");
    EXPECT_EQ(agreed.extra[0].bytes, 4);
    EXPECT_NE(agreed.reason.find("byte-exact with one extra all_reduce(MAX) of the fp32 tensor amax (4 bytes)"),
              std::string::npos)
        << agreed.reason;
  }

  const std::string a2a = R"({"name": "x", "shape": [1, 4096, 8, 64], "dtype": "bf16", "collective": "all_to_all", "axis": 1,
                             "to_axis": 2, "quantize": "fp8.torchao.tensorwise")";
  expect_refused(verdict(a2a + "}"), "give \"scale\": \"global\"");
  const TensorVerdict heads = verdict(a2a + R"(, "scale": "global"})");
  EXPECT_TRUE(heads.exact) << heads.reason;
  ASSERT_EQ(heads.extra.size(), 1u);
  EXPECT_EQ(heads.extra[0].bytes, 4 * 4);  // one amax per destination rank
  EXPECT_EQ(heads.payload_bytes, 1024 * 8 * 64);
}

TEST(PlanJudge, Nvfp4TensorScaleDriftsUnlessTheRanksAgreeOnTheAmax) {
  const std::string amax = R"(, "params": {"tensor_scale": "amax"})";
  const TensorVerdict local = verdict(tensor_json("[2, 4096, 64]", 1, "nvfp4.torchao", amax));
  EXPECT_FALSE(local.exact);
  EXPECT_EQ(local.drift_blocks, 1);
  EXPECT_NE(local.reason.find("the fp32 tensor scale t = amax / (448 x 6) and every E4M3 block scale relative to t"),
            std::string::npos)
      << local.reason;
  EXPECT_EQ(local.scale_bytes, 2 * 1024 * 4 + 4);  // block scales and the rank's own tensor scale
  const TensorVerdict agreed = verdict(tensor_json("[2, 4096, 64]", 1, "nvfp4.torchao", amax + R"(, "scale": "global")"));
  EXPECT_TRUE(agreed.exact) << agreed.reason;
  EXPECT_EQ(agreed.scale_bytes, 2 * 1024 * 4);  // the tensor scale every rank computes
  EXPECT_EQ(agreed.payload_bytes, 2 * 1024 * 32);
  ASSERT_EQ(agreed.extra.size(), 1u);
  EXPECT_EQ(agreed.extra[0].bytes, 4);
  expect_refused(verdict(tensor_json("[2, 4096, 64]", 2, "nvfp4.torchao", amax + R"(, "scale": "global")")),
                 "its blocks of 16 run along the last axis");
}

TEST(PlanJudge, PoolMeanSideChannel) {
  const TensorVerdict tail = verdict(
      R"({"name": "m", "shape": [1, 4000, 24, 128], "dtype": "bf16", "collective": "pool_mean", "axis": 1, "pool": 128})");
  // Shards of 1000 rows touch cells 0..7 (rank 0) and 9 cells each after; 3072 features.
  EXPECT_TRUE(tail.exact);
  // pool_partial_bytes: 16 header bytes, a u64 count per cell, 6 u64 limbs per (cell, feature).
  EXPECT_EQ(tail.payload_bytes, 16 + 9 * 8 + 9 * 3072 * 48);
  EXPECT_EQ(tail.bytes_before, 1000 * 3072 * 2);
  ASSERT_EQ(tail.notes.size(), 2u);
  EXPECT_NE(tail.notes[1].find("S % P = 4000 % 128 = 32 rows; a uniform divisor P would be wrong"), std::string::npos);
  const TensorVerdict even = verdict(
      R"({"name": "m", "shape": [1, 4096, 24, 128], "dtype": "bf16", "collective": "pool_mean", "axis": 1, "pool": 128})");
  EXPECT_EQ(even.payload_bytes, 16 + 8 * 8 + 8 * 3072 * 48);
  EXPECT_EQ(even.notes.size(), 1u);  // no tail cell
}

// ---- bad plans: each error names the tensor and the field ----

TEST(PlanFileErrors, NameTheTensorAndTheField) {
  const auto t = [](const std::string& fields) {
    return plan_error(R"({"world": 4, "tensors": [{"name": "q", )" + fields + "}]}");
  };
  const std::string ok = R"("shape": [1, 4096, 24, 128], "dtype": "bf16", "collective": "all_gather", "axis": 1)";
  EXPECT_EQ(plan_error("{"), "t.json: not valid JSON");
  EXPECT_EQ(t(R"("dtype": "bf16", "collective": "all_gather", "axis": 1)"), "t.json: tensor #0 'q': field 'shape': missing");
  EXPECT_EQ(t(ok + R"(, "quantize": "int9")").substr(0, 62), "t.json: tensor #0 'q': field 'quantize': unknown preset 'int9'");
  EXPECT_EQ(t(R"("shape": [1, 4096, 24, 128], "dtype": "bf16", "collective": "all_gather", "axis": 4)"),
            "t.json: tensor #0 'q': field 'axis': 4 is out of range for shape (1, 4096, 24, 128) of rank 4 (0..3)");
  EXPECT_EQ(t(R"("shape": [1, 4098, 24, 128], "dtype": "bf16", "collective": "all_gather", "axis": 1)"),
            "t.json: tensor #0 'q': field 'axis': shape[1] = 4098 is not divisible by world 4");
  EXPECT_EQ(t(R"("shape": [4096, 128], "dtype": "bf16", "collective": "all_gather", "axis": 0, "quantize": "int8.block.ascend")"),
            "t.json: tensor #0 'q': field 'quantize': preset int8.block.ascend cannot take the full tensor (4096, 128): "
            "int8.block needs a (B, S, N, D) tensor, got shape (4096, 128)");
  EXPECT_NE(t(R"("shape": [1, 4096, 24, 128], "dtype": "bf16", "collective": "reduce_scatter", "axis": 1)")
                .find("'q': field 'collective': unknown collective 'reduce_scatter'"),
            std::string::npos);
  EXPECT_EQ(t(R"("shape": [1, 4096, 24, 128], "dtype": "int8", "collective": "all_gather", "axis": 1)"),
            "t.json: tensor #0 'q': field 'dtype': 'int8' is not bf16, f16 or f32");
  EXPECT_EQ(t(R"("shape": [1, 4096, 24, 128], "dtype": "bf16", "collective": "all_gather", "axis": "1")"),
            "t.json: tensor #0 'q': field 'axis': must be an integer, got string \"1\"");
  EXPECT_EQ(t(ok + R"(, "to-axis": 2)"), "t.json: tensor #0 'q': field 'to-axis': unknown field (fields: name, shape, dtype, "
                                         "collective, axis, to_axis, quantize, params, scale, pool)");
  EXPECT_EQ(t(R"("shape": [1, 4096, 24, 128], "dtype": "bf16", "collective": "all_to_all", "axis": 1)"),
            "t.json: tensor #0 'q': field 'to_axis': missing (all_to_all needs the axis sharded after it)");
  EXPECT_EQ(t(ok + R"(, "quantize": "int8.block.ascend", "params": {"token_block": 64})"),
            "t.json: tensor #0 'q': field 'params': 'token_block' must be a string, got 64");
  EXPECT_NE(t(ok + R"(, "quantize": "int8.block.ascend", "params": {"colour": "red"})").find("'q': field 'params': "),
            std::string::npos);
  EXPECT_EQ(t(ok + R"(, "quantize": "int8.block.ascend", "scale": "global")"),
            "t.json: tensor #0 'q': field 'scale': \"global\" is defined for int8.channel and for a tensor-wide amax "
            "(fp8.scaled granularity=tensor, nvfp4 tensor_scale=amax) only (quantize is 'int8.block.ascend')");
  EXPECT_EQ(t(ok + R"(, "quantize": "fp8.torchao.rowwise", "scale": "global")"),
            "t.json: tensor #0 'q': field 'scale': \"global\" is defined for int8.channel and for a tensor-wide amax "
            "(fp8.scaled granularity=tensor, nvfp4 tensor_scale=amax) only (quantize is 'fp8.torchao.rowwise')");
  EXPECT_EQ(t(ok + R"(, "quantize": "fp8.torchao.tensorwise", "scale": "global")"), "");
  EXPECT_EQ(t(ok + R"(, "quantize": "nvfp4.torchao", "params": {"tensor_scale": "amax"}, "scale": "global")"), "");
  EXPECT_EQ(t(ok + R"(, "quantize": "int8.channel")"),
            "t.json: tensor #0 'q': field 'scale': int8.channel is the global-scale quantizer: give \"scale\": \"global\"");
  EXPECT_EQ(t(R"("shape": [1, 4096, 24, 128], "dtype": "bf16", "collective": "all_to_all", "axis": 1, "to_axis": 2,
                 "quantize": "int8.channel", "scale": "global")"),
            "t.json: tensor #0 'q': field 'collective': the global-scale path runs with all_gather only, got all_to_all");
  EXPECT_EQ(t(R"("shape": [1, 4096, 24, 128], "dtype": "bf16", "collective": "all_gather", "axis": 2,
                 "quantize": "int8.channel", "scale": "global")"),
            "t.json: tensor #0 'q': field 'axis': int8.channel needs a (B, S, N, D) tensor sharded on axis 0 or 1 (its "
            "scales are per (N, D)), got axis 2 of (1, 4096, 24, 128)");
  EXPECT_EQ(t(R"("shape": [1, 4096, 24, 128], "dtype": "bf16", "collective": "pool_mean", "axis": 1)"),
            "t.json: tensor #0 'q': field 'pool': missing (pool_mean needs the pool size P)");
  EXPECT_EQ(plan_error(R"({"world": 4, "tensors": [{"shape": [4]}]})"), "t.json: tensor #0: field 'name': missing");
  EXPECT_EQ(plan_error(R"({"world": 2, "tensors": [])"), "t.json: not valid JSON");
  EXPECT_EQ(plan_error(R"({"world": 2, "tensors": []})"),
            "t.json: field 'tensors': must be a non-empty array of tensor objects");
  EXPECT_EQ(plan_error(R"({"world": 0, "tensors": []})"), "t.json: field 'world': must be >= 1, got 0");
}

TEST(PlanFileErrors, WorldMismatchAndKinds) {
  const PlanFile p = one(kQ4096, 4);
  EXPECT_EQ(check_world(p, 4), 4);
  try {
    check_world(p, 2);
    FAIL() << "world 2 against a plan of world 4";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "t.json: field 'world' is 4 but the run has 2 ranks");
    EXPECT_EQ(e.kind(), ErrorKind::bad_argument);
  }
  try {
    parse_plan("[1]", "t.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::bad_file);
  }
  // A plan without "world" parses (qexact collective takes the MPI world size).
  const PlanFile nw = parse_plan(std::string(R"({"tensors": [)") + kQ4096 + "]}", "t.json");
  EXPECT_FALSE(nw.world.has_value());
  EXPECT_EQ(check_world(nw, 2), 2);
}

// ---- the sweep ----

const char* kSweep = R"({"format": "qexact-sweep/1", "world": 4, "mpi": "Open MPI v4.1.4", "host": "h",
  "warmup": 5, "iterations": 20, "collectives": {
  "all_gather": [{"bytes": 8, "time_s": 1e-05, "algbw_GBps": 0.0008, "busbw_GBps": 0.0006},
                 {"bytes": 1024, "time_s": 2e-05, "algbw_GBps": 0.0512, "busbw_GBps": 0.0384},
                 {"bytes": 4096, "time_s": 5e-05, "algbw_GBps": 0.08192, "busbw_GBps": 0.06144}]}})";

TEST(PlanSweep, InterpolatesInsideT0BelowNothingBeyond) {
  const SweepFile s = parse_sweep(kSweep, "s.json");
  EXPECT_EQ(s.world, 4);
  EXPECT_EQ(s.collectives.at("all_gather").size(), 3u);
  EXPECT_EQ(predict_time(s, "all_gather", 4).seconds, 1e-05);  // t0 below the smallest size
  EXPECT_EQ(predict_time(s, "all_gather", 8).seconds, 1e-05);
  EXPECT_EQ(predict_time(s, "all_gather", 1024).seconds, 2e-05);  // a measured size: its time
  EXPECT_EQ(predict_time(s, "all_gather", 4096).seconds, 5e-05);
  // Half way between 1024 and 4096: 2e-5 + (5e-5 - 2e-5) * 0.5.
  EXPECT_EQ(predict_time(s, "all_gather", 2560).seconds, 2e-05 + (5e-05 - 2e-05) * 0.5);
  // A quarter of the way between 8 and 1024 (8 + 254).
  EXPECT_EQ(predict_time(s, "all_gather", 262).seconds, 1e-05 + (2e-05 - 1e-05) * 0.25);
  const TimePrediction beyond = predict_time(s, "all_gather", 4097);
  EXPECT_FALSE(beyond.seconds.has_value());
  EXPECT_EQ(beyond.note, "beyond the measured sweep (max 4096 bytes): no prediction");
  EXPECT_FALSE(predict_time(s, "all_to_all", 8).seconds.has_value());
}

TEST(PlanSweep, JudgeUsesTheGatheredSizeForAllGather) {
  const SweepFile s = parse_sweep(kSweep, "s.json");
  // [4, 256] f32 sharded on axis 0 over 4: 1024 bytes per rank, 4096 gathered; int8.token
  // after: 256 payload + 4 scale bytes per rank, 1040 gathered.
  const PlanFile p = one(
      R"({"name": "x", "shape": [4, 256], "dtype": "f32", "collective": "all_gather", "axis": 0, "quantize": "int8.token.blaze"})");
  const Judgement j = judge(p, check_world(p, 4), &s);
  const TensorVerdict& v = j.tensors.at(0);
  EXPECT_EQ(v.bytes_before, 1024);
  EXPECT_EQ(v.bytes_after, 260);
  EXPECT_EQ(v.time_before_s, 5e-05);
  EXPECT_EQ(v.time_after_s, 2e-05 + (5e-05 - 2e-05) * (static_cast<double>(1040 - 1024) / static_cast<double>(4096 - 1024)));
  EXPECT_EQ(j.totals.time_before_s, 5e-05);
  // Twice as large: beyond the sweep before the change, predicted after it.
  const PlanFile big = one(
      R"({"name": "x", "shape": [8, 256], "dtype": "f32", "collective": "all_gather", "axis": 0, "quantize": "int8.token.blaze"})");
  const Judgement jb = judge(big, 4, &s);
  EXPECT_FALSE(jb.tensors[0].time_before_s.has_value());
  EXPECT_TRUE(jb.tensors[0].time_after_s.has_value());
  EXPECT_NE(jb.tensors[0].time_note.find("beyond the measured sweep (max 4096 bytes): no prediction"), std::string::npos);
  EXPECT_FALSE(jb.totals.time_before_s.has_value());
}

TEST(PlanSweep, MalformedSweepsAreNamed) {
  const auto err = [](const std::string& text) {
    try {
      parse_sweep(text, "s.json");
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::bad_file);
      return std::string(e.what());
    }
    return std::string();
  };
  std::string wrong_format = kSweep;
  wrong_format.replace(wrong_format.find("qexact-sweep/1"), 14, "qexact-sweep/9");
  EXPECT_EQ(err(wrong_format), "s.json: field 'format': expected \"qexact-sweep/1\", got \"qexact-sweep/9\"");
  std::string not_increasing = kSweep;
  not_increasing.replace(not_increasing.find("\"bytes\": 4096"), 13, "\"bytes\": 1024");
  EXPECT_EQ(err(not_increasing),
            "s.json: field 'collectives.all_gather[2].bytes': 1024 does not follow 1024 (sizes must increase strictly)");
  std::string zero_time = kSweep;
  zero_time.replace(zero_time.find("\"time_s\": 2e-05"), 15, "\"time_s\": 0.0  ");
  EXPECT_EQ(err(zero_time), "s.json: field 'collectives.all_gather[1].time_s': must be > 0, got 0.0");
  EXPECT_EQ(err("{}"), "s.json: field 'format': missing");
}

}  // namespace
}  // namespace qexact::plan
