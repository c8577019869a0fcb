// Quantize-before-the-collective on one process (collective/shard_quant.hpp): W shards quantized on
// the global grid and assembled give the whole tensor's bytes when every shard holds whole scale
// domains, and otherwise differ only in the domains that straddle a shard boundary.
#include <gtest/gtest.h>

#include <string>
#include <vector>

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

}  // namespace
