// Quantize-before-the-collective on one process (collective/shard_quant.hpp): W shards quantized on
// the global grid and assembled give the whole tensor's bytes when every shard holds whole scale
// domains, and otherwise differ only in the domains that straddle a shard boundary.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "quantize_with_amax.hpp"
#include "collective/shard_quant.hpp"
#include "collective/synthetic_tensor.hpp"
#include "qexact/error.hpp"

namespace {

using namespace qexact;
using namespace qexact::dist;

const RunOptions kRun{Engine::fast, 1};

struct Outcome {
  Drift drift;
  QuantResult got, want;
};

Outcome shard_and_assemble(const Contract& c, const Tensor& x, int axis, int world) {
  const std::int64_t len = x.shape()[static_cast<std::size_t>(axis)] / world;
  std::vector<QuantPiece> pieces;
  std::vector<std::int64_t> boundaries;
  for (int r = 0; r < world; ++r) {
    const Tensor local = slice_copy(x, axis, r * len, len);
    pieces.push_back(quantize_on_global_grid(c, x.shape(), local.view(), axis, r * len, kRun));
    const PieceGeometry g = piece_geometry(c, x.shape(), axis, r * len, len);
    EXPECT_EQ(pieces.back().payload.shape(), g.payload);
    EXPECT_EQ(pieces.back().scale.shape(), g.scale);
    EXPECT_EQ(pieces.back().scale_first, g.scale_first);
    if (r > 0) boundaries.push_back(r * len);
  }
  Outcome o;
  o.got = assemble_pieces(c, x.shape(), axis, pieces);
  o.want = quantize(c, x.view(), kRun);
  o.drift = compare_quantized(o.got, o.want, contract_blocks(c, x.shape(), axis, boundaries));
  return o;
}

TEST(ShardQuant, Int8BlockIsExactWhenShardsHoldWholeBlocks) {
  for (int world : {2, 3, 4}) {
    const Tensor x = synthetic_tensor({2, world * 32L * 2, 3, 16}, DType::bf16, 5, "x");
    const Contract c = make_contract("int8.block.ascend", {"token_block=32"});
    const Outcome o = shard_and_assemble(c, x, 1, world);
    EXPECT_TRUE(o.drift.exact()) << "world " << world;
    EXPECT_EQ(o.drift.payload_bytes, x.numel());
    EXPECT_EQ(o.drift.scale_bytes, 2 * 3 * (world * 2) * 4);
  }
}

TEST(ShardQuant, Int8BlockDriftsOnlyInStraddlingBlocks) {
  // S = 3 x 70 = 210 with 64-token blocks: boundaries at 70 and 140 cut blocks 1 and 2.
  const Tensor x = synthetic_tensor({2, 210, 3, 16}, DType::bf16, 6, "x");
  const Contract c = make_contract("int8.block.ascend");
  const Outcome o = shard_and_assemble(c, x, 1, 3);
  EXPECT_FALSE(o.drift.exact());
  EXPECT_GT(o.drift.payload_differing, 0);
  EXPECT_EQ(o.drift.straddling_blocks, static_cast<std::int64_t>(o.drift.differing_blocks.size()));
  for (std::int64_t block : o.drift.differing_blocks) {
    const std::int64_t index = block % 4;  // scale shape (B, N, ceil(210 / 64) = 4)
    EXPECT_TRUE(index == 1 || index == 2) << "block " << block;
  }
}

TEST(ShardQuant, RowFamiliesAreExactForAnySequenceSplit) {
  for (const char* preset : {"mxfp8.ascend", "mx.ocp.e2m1", "int8.token.blaze", "q8_0.ggml"}) {
    const Tensor x = synthetic_tensor({2, 3 * 7, 2, 64}, DType::bf16, 7, preset);
    const Outcome o = shard_and_assemble(make_contract(preset), x, 1, 3);
    EXPECT_TRUE(o.drift.exact()) << preset;
    EXPECT_GT(o.drift.scale_bytes, 0) << preset;
  }
}

TEST(ShardQuant, OtherAxesAndScaleStores) {
  const Tensor x = synthetic_tensor({4, 128, 4, 16}, DType::f32, 8, "x");
  EXPECT_TRUE(shard_and_assemble(make_contract("int8.block.ascend"), x, 0, 2).drift.exact());  // batch
  EXPECT_TRUE(shard_and_assemble(make_contract("int8.block.ascend"), x, 2, 4).drift.exact());  // heads
  EXPECT_TRUE(shard_and_assemble(make_contract("int8.block.ascend", {"scale_store=f16"}), x, 1, 2).drift.exact());
}

TEST(ShardQuant, AxesThatCutScaleDomainsAreRefused) {
  const Shape x{1, 64, 2, 64};
  auto message = [&](const char* preset, int axis) -> std::string {
    try {
      scale_axis_along(make_contract(preset), x, axis);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(message("mxfp8.ascend", 3).find("groups run along the last axis"), std::string::npos);
  EXPECT_NE(message("int8.block.ascend", 3).find("a block spans all D channels"), std::string::npos);
  EXPECT_NE(message("mxfp8.te", 1).find("pads or tiles the scales of the whole tensor"), std::string::npos);
}

// ---- a tensor-wide amax (fp8.scaled granularity=tensor, nvfp4 tensor_scale=amax) ----

// The shards of x along `axis`, each quantized with the amax the ranks agree on (the max of
// their amax keys) or, with agree = false, with its own; assembled as the run assembles them:
// payload (and nvfp4's block scales) joined along the axis, the output computed from the amax
// alone rank 0's.
QuantResult shard_tensor_amax(const Contract& c, const Tensor& x, int axis, int world, bool agree) {
  const std::int64_t len = x.shape()[static_cast<std::size_t>(axis)] / world;
  std::vector<Tensor> shards;
  std::int32_t key = 0;
  for (int r = 0; r < world; ++r) {
    shards.push_back(slice_copy(x, axis, r * len, len));
    key = std::max(key, amax_key(shards.back().view()));
  }
  std::vector<QuantResult> q;
  for (const Tensor& s : shards)
    q.push_back(agree ? quantize_with_tensor_amax(c, s.view(), amax_from_key(key), kRun) : quantize(c, s.view(), kRun));
  std::vector<TensorView> payloads, scales;
  for (const QuantResult& r : q) {
    payloads.push_back(r.payload.view());
    scales.push_back(r.scale.view());
  }
  QuantResult got = q[0];
  got.payload = concat(payloads, axis);
  if (c.family == Family::nvfp4) got.scale = concat(scales, axis);
  return got;
}

Drift tensor_amax_drift(const QuantResult& got, const QuantResult& want) {
  BlockMap one;
  one.block_of_payload_byte = one.block_of_scale_byte = one.block_of_tensor_scale_byte = [](std::int64_t) {
    return std::int64_t{0};
  };
  one.straddles = [](std::int64_t) { return true; };
  one.blocks = 1;
  return compare_quantized(got, want, one);
}

// fp8 tensorwise (torchao's multiplier, and the seed's stored descale with the scale over the
// whole tensor) and nvfp4's two levels.
std::vector<Contract> tensor_amax_contracts() {
  return {make_contract("nvfp4.torchao", {"tensor_scale=amax"}), make_contract("fp8.torchao.tensorwise"),
          make_contract("fp8.ascend.token", {"granularity=tensor"})};
}

TEST(ShardQuant, TensorAmaxDiffersWithoutAgreementAndIsExactWithIt) {
  for (const Contract& c : tensor_amax_contracts())
    for (int world : {2, 3, 4}) {
      SCOPED_TRACE(c.preset + " world " + std::to_string(world));
      const Tensor x = synthetic_tensor({2, world * 12L, 3, 64}, DType::bf16, 11, "x");
      const QuantResult want = quantize(c, x.view(), kRun);
      const std::int64_t n = static_cast<std::int64_t>(want.payload.nbytes() + want.scale.nbytes() + want.tensor_scale.nbytes());

      const Drift own = tensor_amax_drift(shard_tensor_amax(c, x, 1, world, false), want);
      EXPECT_GT(own.payload_differing + own.scale_differing, 0);
      EXPECT_EQ(own.payload_bytes + own.scale_bytes, n);

      const Drift agreed = tensor_amax_drift(shard_tensor_amax(c, x, 1, world, true), want);
      EXPECT_EQ(agreed.payload_differing, 0) << "of " << agreed.payload_bytes;
      EXPECT_EQ(agreed.scale_differing, 0) << "of " << agreed.scale_bytes;
      EXPECT_EQ(agreed.payload_bytes + agreed.scale_bytes, n);
      // The same on the batch axis, and on the heads.
      EXPECT_TRUE(tensor_amax_drift(shard_tensor_amax(c, x, 0, 2, true), want).exact());
      EXPECT_TRUE(tensor_amax_drift(shard_tensor_amax(c, x, 2, 3, true), want).exact());
    }
}

TEST(ShardQuant, TensorAmaxAgreementHoldsForSpecialShards) {
  // An all-zero shard, a shard whose amax is an inf, one holding a NaN (torch.max propagates it:
  // the agreed amax is NaN on every rank), f32 and bf16.
  for (const Contract& c : tensor_amax_contracts())
    for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
      if (c.nonfinite_input == NonFiniteInput::reject) continue;  // refused: the test below
      Tensor base = synthetic_tensor({4, 32}, DType::f32, 12, "special");
      std::vector<float> v = to_f32_vector(base.view());
      for (int i = 0; i < 32; ++i) v[static_cast<std::size_t>(i)] = 0.0f;  // shard 0 of 4 all zero
      for (const float special : {0.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
        SCOPED_TRACE(c.preset + " " + dtype_name(dt) + " special " + std::to_string(special));
        std::vector<float> w = v;
        w[70] = special == 0.0f ? w[70] : special;  // in shard 2
        const Tensor x = from_f32_vector(w, {4, 32}, dt);
        const QuantResult want = quantize(c, x.view(), kRun);
        const Drift d = tensor_amax_drift(shard_tensor_amax(c, x, 0, 4, true), want);
        EXPECT_EQ(d.payload_differing, 0) << "of " << d.payload_bytes;
        EXPECT_EQ(d.scale_differing, 0) << "of " << d.scale_bytes;
      }
    }
}

// One-element shards of a tensor holding a NaN: the agreed NaN amax is that of the whole
// tensor's reduction (f32 0xFFFFFFFF, f16 0xFFC00000), not of a one-element tensor's, on both
// engines.
TEST(ShardQuant, OneElementShardsTakeTheWholeTensorsNaNAmax) {
  for (const Contract& c : tensor_amax_contracts()) {
    if (c.family != Family::fp8_scaled || c.nonfinite_input == NonFiniteInput::reject) continue;
    for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
      SCOPED_TRACE(c.preset + " " + dtype_name(dt));
      const Tensor x = from_f32_vector({0.5f, -2.0f, std::numeric_limits<float>::quiet_NaN(), 3.0f}, {4, 1}, dt);
      const QuantResult want = quantize(c, x.view(), kRun);
      const Drift d = tensor_amax_drift(shard_tensor_amax(c, x, 0, 4, true), want);
      EXPECT_TRUE(d.exact()) << d.payload_differing << " payload, " << d.scale_differing << " scale bytes differ";
      const Tensor shard = slice_copy(x, 0, 0, 1);
      const float nan = amax_from_key(amax_key(x.view()));
      EXPECT_TRUE(tensor_amax_drift(quantize_with_tensor_amax(c, shard.view(), nan, {Engine::reference, 1}),
                                    quantize_with_tensor_amax(c, shard.view(), nan, kRun))
                      .exact());
    }
  }
}

TEST(ShardQuant, ANonFiniteAgreedAmaxIsRefusedWhereTheContractRejectsIt) {
  const Contract c = make_contract("nvfp4.torchao", {"tensor_scale=amax", "nonfinite_input=reject"});
  std::vector<float> v(64, 0.5f);
  v[40] = std::numeric_limits<float>::infinity();  // shard 1 of 2 ([2, 32] along axis 0)
  const Tensor x = from_f32_vector(v, {2, 32}, DType::f32);
  const float amax = amax_from_key(amax_key(x.view()));
  auto message = [&](int shard) -> std::string {
    try {
      quantize_with_tensor_amax(c, slice_copy(x, 0, shard, 1).view(), amax, kRun);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(message(0), "another rank's shard holds a non-finite element (the agreed amax is inf), which the contract rejects");
  EXPECT_NE(message(1).find("non-finite input"), std::string::npos) << message(1);  // the kernel's, naming its element
}

TEST(ShardQuant, AmaxKeysOrderNanAboveInfAboveEveryFiniteMagnitude) {
  auto key = [](float v) { return amax_key(make_view(DType::f32, {1}, &v)); };
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(key(-3.5f), key(3.5f));  // magnitudes
  EXPECT_EQ(amax_from_key(key(-3.5f)), 3.5f);
  EXPECT_LT(key(3.5f), key(3.5000002f));
  EXPECT_LT(key(std::numeric_limits<float>::max()), key(-inf));
  EXPECT_LT(key(inf), key(-std::numeric_limits<float>::quiet_NaN()));
  EXPECT_EQ(key(0.0f), key(-0.0f));
  const std::vector<float> mixed{1.0f, -7.0f, 2.0f};
  EXPECT_EQ(amax_from_key(amax_key(make_view(DType::f32, {3}, mixed.data()))), 7.0f);
}

TEST(ShardQuant, QuantizeWithTheShardsOwnAmaxIsPlainQuantize) {
  for (const Contract& c : tensor_amax_contracts()) {
    const Tensor x = synthetic_tensor({6, 48}, DType::bf16, 13, "own");
    const QuantResult plain = quantize(c, x.view(), kRun);
    const QuantResult seam = quantize_with_tensor_amax(c, x.view(), amax_from_key(amax_key(x.view())), kRun);
    EXPECT_TRUE(tensor_amax_drift(seam, plain).exact()) << c.preset;
    EXPECT_EQ(seam.payload.shape(), plain.payload.shape());
    EXPECT_EQ(seam.scale.shape(), plain.scale.shape());
  }
}

TEST(ShardQuant, Fp8RowsGroupsAndTilesOffTheCutAreExact) {
  const Tensor x = synthetic_tensor({2, 3 * 7, 2, 64}, DType::bf16, 15, "fp8");
  for (const char* preset : {"fp8.torchao.rowwise", "fp8.ascend.token"}) {
    const Outcome o = shard_and_assemble(make_contract(preset), x, 1, 3);
    EXPECT_TRUE(o.drift.exact()) << preset;
    EXPECT_EQ(o.drift.payload_bytes, x.numel()) << preset;
    EXPECT_EQ(o.drift.scale_bytes, x.numel() / 64 * 4) << preset;
  }
  const Outcome groups = shard_and_assemble(make_contract("fp8.ascend.token", {"granularity=group:32"}), x, 1, 3);
  EXPECT_TRUE(groups.drift.exact());
  EXPECT_EQ(groups.drift.scale_bytes, x.numel() / 32 * 4);
  // Along the last axis: shards of 64 / 2 = 32 columns hold whole groups of 16 and of 32.
  for (const char* grain : {"granularity=group:16", "granularity=group:32"})
    EXPECT_TRUE(shard_and_assemble(make_contract("fp8.ascend.token", {grain}), x, 3, 2).drift.exact()) << grain;
  // Tiles of 8 x 32 on [96, 64]: 4 shards of 24 rows (3 tile rows each), 2 shards of 32 columns.
  const Tensor w = synthetic_tensor({96, 64}, DType::f32, 16, "tiles");
  const Contract tile = make_contract("fp8.ascend.token", {"granularity=tile:8x32"});
  EXPECT_TRUE(shard_and_assemble(tile, w, 0, 4).drift.exact());
  EXPECT_TRUE(shard_and_assemble(tile, w, 1, 2).drift.exact());
  // Tiles of 4 rows in [6, 8, 64]: each index of axis 0 holds two whole tile rows.
  const Tensor nested = synthetic_tensor({6, 8, 64}, DType::bf16, 17, "nested");
  EXPECT_TRUE(shard_and_assemble(make_contract("fp8.ascend.token", {"granularity=tile:4x32"}), nested, 0, 3).drift.exact());
}

TEST(ShardQuant, Fp8RunsCutByABoundaryDriftOnlyThere) {
  // Groups of 32 along the last axis of 96 columns, 2 shards of 48: group 1 (32..63) is cut.
  const Tensor x = synthetic_tensor({16, 96}, DType::bf16, 18, "cut");
  const Outcome g = shard_and_assemble(make_contract("fp8.ascend.token", {"granularity=group:32"}), x, 1, 2);
  EXPECT_FALSE(g.drift.exact());
  EXPECT_EQ(g.drift.straddling_total, 16);  // group 1 of each row
  EXPECT_EQ(g.drift.straddling_blocks, static_cast<std::int64_t>(g.drift.differing_blocks.size()));
  for (std::int64_t block : g.drift.differing_blocks) EXPECT_EQ(block % 3, 1) << block;
  // Tiles of 8 x 32 on [60, 64], 3 shards of 20 rows: the boundary 20 cuts tile row 2 (16..23),
  // 40 is a tile boundary.
  const Tensor w = synthetic_tensor({60, 64}, DType::bf16, 19, "tiles");
  const Outcome t = shard_and_assemble(make_contract("fp8.ascend.token", {"granularity=tile:8x32"}), w, 0, 3);
  EXPECT_FALSE(t.drift.exact());
  EXPECT_EQ(t.drift.straddling_total, 2);  // tile row 2, two tiles wide
  EXPECT_EQ(t.drift.straddling_blocks, static_cast<std::int64_t>(t.drift.differing_blocks.size()));
  // fp8 head blocks are int8.block's domains.
  const Tensor q = synthetic_tensor({2, 210, 3, 16}, DType::bf16, 20, "q");
  const Outcome h = shard_and_assemble(make_contract("fp8.ascend.block"), q, 1, 3);
  EXPECT_FALSE(h.drift.exact());
  for (std::int64_t block : h.drift.differing_blocks) EXPECT_TRUE(block % 4 == 1 || block % 4 == 2) << block;
  EXPECT_TRUE(shard_and_assemble(make_contract("fp8.ascend.block", {"granularity=head_block:35"}), q, 1, 3).drift.exact());
}

TEST(ShardQuant, TheAgreedAmaxGivesTheSameBytesOnEveryEngineAndThreadCount) {
  for (const Contract& c : tensor_amax_contracts()) {
    const Tensor x = synthetic_tensor({2, 40, 3, 32}, DType::bf16, 21, "engines");
    const Tensor shard = slice_copy(x, 1, 10, 10);
    const float amax = amax_from_key(amax_key(x.view()));
    const QuantResult want = quantize_with_tensor_amax(c, shard.view(), amax, {Engine::reference, 1});
    for (const RunOptions o : {RunOptions{Engine::fast, 1}, RunOptions{Engine::fast, 2}, RunOptions{Engine::fast, 3}})
      EXPECT_TRUE(tensor_amax_drift(quantize_with_tensor_amax(c, shard.view(), amax, o), want).exact())
          << c.preset << " threads " << o.threads;
  }
}

TEST(ShardQuant, Nvfp4BlocksAreExactForAnySequenceSplit) {
  const Tensor x = synthetic_tensor({2, 3 * 7, 2, 64}, DType::bf16, 14, "nvfp4");
  const Outcome o = shard_and_assemble(make_contract("nvfp4.torchao"), x, 1, 3);
  EXPECT_TRUE(o.drift.exact());
  EXPECT_EQ(o.drift.payload_bytes, x.numel() / 2);
  EXPECT_EQ(o.drift.scale_bytes, x.numel() / 16);
}

}  // namespace
