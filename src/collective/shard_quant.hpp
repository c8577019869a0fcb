// Quantize-before-the-collective on one rank, without MPI: where a contract's scales sit along
// the sharded axis, quantizing a shard on the *global* grid of scale domains, putting the
// ranks' pieces back into the preset's own layout for the full shape, and counting (and
// attributing) the bytes that differ from quantizing the whole tensor.
//
// The global grid: a rank holding rows [offset, offset + len) of the sharded axis quantizes the
// domains of the full tensor that its rows fall in; a domain cut by the shard's edge is reduced
// over the rows this rank has. So only the domains that straddle a shard boundary can differ
// from the unsharded result (contracts §7: exact when S % (world x b) == 0).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "plan/shard_domain.hpp"
#include "qexact/contract.hpp"
#include "qexact/quantize.hpp"
#include "qexact/tensor.hpp"

namespace qexact::dist {

// Which scale domains sharding cuts is the judge's notion too (plan/shard_domain.hpp): the run
// quantizes with the same scale axes and piece shapes the judge counts bytes and drift with.
using plan::PieceGeometry;
using plan::piece_geometry;
using plan::ScaleAxis;
using plan::scale_axis_along;

// v restricted to [start, start + length) along `axis` (same storage and strides).
TensorView slice_view(const TensorView& v, int axis, std::int64_t start, std::int64_t length);
// The parts (same dtype, equal dims but `axis`) joined along `axis`, C order.
Tensor concat(const std::vector<TensorView>& parts, int axis);
// The bytes of t[..., start : start + length, ...] along `axis`, C order: one memcpy per index
// of the axes before `axis` (what packing a send buffer costs).
std::vector<std::uint8_t> slice_bytes(const Tensor& t, int axis, std::int64_t start, std::int64_t length);
Tensor slice_copy(const Tensor& t, int axis, std::int64_t start, std::int64_t length);

// A shard's quantized form: its payload and the scales of the global domains its rows touch,
// [scale_first, scale_first + scale.shape[scale_axis]) along the scale axis.
struct QuantPiece {
  Tensor payload;
  Tensor scale;
  std::int64_t scale_first = 0;
};
// `local` holds rows [offset, offset + local.shape[axis]) of a tensor of shape `full`.
QuantPiece quantize_on_global_grid(const Contract& c, const Shape& full, const TensorView& local, int axis,
                                   std::int64_t offset, const RunOptions& o);

// The pieces (rank order, covering the axis) in the layout the contract gives `full`: payload
// joined along the axis; each scale index from the lowest rank whose piece holds it.
QuantResult assemble_pieces(const Contract& c, const Shape& full, int axis, const std::vector<QuantPiece>& pieces);

// Differences of a quantized result from the reference, grouped by scale domain ("block").
// Scale bytes include the tensor scale's (nvfp4 tensor_scale=amax).
struct Drift {
  std::int64_t payload_bytes = 0, payload_differing = 0;
  std::int64_t scale_bytes = 0, scale_differing = 0;
  std::vector<std::int64_t> differing_blocks;  // ascending
  std::int64_t straddling_blocks = 0;          // of the differing ones
  std::int64_t straddling_total = 0;           // all blocks that straddle, differing or not
  bool exact() const { return payload_differing == 0 && scale_differing == 0; }
};
// Which block a payload byte or a scale byte belongs to, and whether a block straddles a shard
// boundary.
struct BlockMap {
  std::function<std::int64_t(std::int64_t)> block_of_payload_byte;
  std::function<std::int64_t(std::int64_t)> block_of_scale_byte;
  std::function<bool(std::int64_t)> straddles;
  std::int64_t blocks = 0;  // block indices 0 .. blocks-1 (the flat scale indices)
  // Where the result has a tensor scale (nvfp4 tensor_scale=amax): the block of its bytes.
  std::function<std::int64_t(std::int64_t)> block_of_tensor_scale_byte;
};
// Blocks of a contract's scale domains on `full`, sharded along `axis` with shard boundaries at
// `boundaries` (the interior offsets).
BlockMap contract_blocks(const Contract& c, const Shape& full, int axis, std::vector<std::int64_t> boundaries);
Drift compare_quantized(const QuantResult& got, const QuantResult& want, const BlockMap& blocks);

}  // namespace qexact::dist
