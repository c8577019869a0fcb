// Quantize-before-the-collective on one rank, without MPI: where a contract's scales sit along
// the sharded axis, quantizing a shard on the *global* grid of scale domains, putting the
// ranks' pieces back into the preset's own layout for the full shape, and counting (and
// attributing) the bytes that differ from quantizing the whole tensor.
//
// The global grid: a rank holding rows [offset, offset + len) of the sharded axis quantizes the
// domains of the full tensor that its rows fall in; a domain cut by the shard's edge is reduced
// over the rows this rank has. So only the domains that straddle a shard boundary can differ
// from the unsharded result (CONTRACTS §7: exact when S % (world x b) == 0).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "qexact/contract.hpp"
#include "qexact/quantize.hpp"
#include "qexact/tensor.hpp"

namespace qexact::dist {

// How a contract's scale tensor is indexed along one axis of x: index i of x's `axis` uses
// index i / elements_per_scale of the scale tensor's `scale_axis`.
struct ScaleAxis {
  int scale_axis = 0;
  std::int64_t elements_per_scale = 1;
};
// Throws bad_argument when the axis cannot be sharded with shard-local scales: MX and int8
// groups along the last axis, int8.block's channel axis, and scale layouts padded or tiled over
// the whole tensor (TransformerEngine, cuBLAS swizzle).
ScaleAxis scale_axis_along(const Contract& c, const Shape& x, int axis);

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
// The shapes a piece has for rows [offset, offset + length) of a full tensor `full`.
struct PieceGeometry {
  Shape payload;
  Shape scale;
  std::int64_t scale_first = 0;
};
PieceGeometry piece_geometry(const Contract& c, const Shape& full, int axis, std::int64_t offset, std::int64_t length);

// `local` holds rows [offset, offset + local.shape[axis]) of a tensor of shape `full`.
QuantPiece quantize_on_global_grid(const Contract& c, const Shape& full, const TensorView& local, int axis,
                                   std::int64_t offset, const RunOptions& o);

// The pieces (rank order, covering the axis) in the layout the contract gives `full`: payload
// joined along the axis; each scale index from the lowest rank whose piece holds it.
QuantResult assemble_pieces(const Contract& c, const Shape& full, int axis, const std::vector<QuantPiece>& pieces);

// Differences of a quantized result from the reference, grouped by scale domain ("block").
struct Drift {
  std::int64_t payload_bytes = 0, payload_differing = 0;
  std::int64_t scale_bytes = 0, scale_differing = 0;
  std::vector<std::int64_t> differing_blocks;  // ascending
  std::int64_t straddling_blocks = 0;          // of the differing ones
  bool exact() const { return payload_differing == 0 && scale_differing == 0; }
};
// Which block a payload byte or a scale byte belongs to, and whether a block straddles a shard
// boundary.
struct BlockMap {
  std::function<std::int64_t(std::int64_t)> block_of_payload_byte;
  std::function<std::int64_t(std::int64_t)> block_of_scale_byte;
  std::function<bool(std::int64_t)> straddles;
};
// Blocks of a contract's scale domains on `full`, sharded along `axis` with shard boundaries at
// `boundaries` (the interior offsets).
BlockMap contract_blocks(const Contract& c, const Shape& full, int axis, std::vector<std::int64_t> boundaries);
Drift compare_quantized(const QuantResult& got, const QuantResult& want, const BlockMap& blocks);

}  // namespace qexact::dist
