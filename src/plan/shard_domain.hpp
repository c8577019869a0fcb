// Which scale domains sharding cuts: the one notion the judge (plan/judge.hpp) and the MPI runs
// (collective/) share. A contract's scale tensor is indexed along an axis of x in runs of
// `elements_per_scale` indices; a shard boundary strictly inside a run cuts every domain of that
// run. Quantize-before is supported only where each shard's scales are a slice of the full
// tensor's scales along the sharded axis; everything else is refused with the reason, by the
// judge ("not supported for quantize-before: ...") and by `qexact collective` alike.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "plan/plan_file.hpp"
#include "qexact/contract.hpp"
#include "qexact/tensor.hpp"

namespace qexact::plan {

// How a contract's scale tensor is indexed along one axis of x: index i of x's `axis` uses
// index i / elements_per_scale of the scale tensor's `scale_axis` or, where one index holds
// several whole domains (fp8.scaled tiles smaller than an index of axis 0), the indices
// [i * scales_per_index, (i + 1) * scales_per_index) (elements_per_scale is then 1).
struct ScaleAxis {
  int scale_axis = 0;
  std::int64_t elements_per_scale = 1;
  std::int64_t scales_per_index = 1;
};
// Throws bad_argument when the axis cannot be sharded with shard-local scales: MX, int8 and
// nvfp4 groups along the last axis, one scale per whole row (int8.token, fp8.scaled row) cut
// along it, the channel axis of a (b, head, token block) scale, fp8.scaled tiles whose rows are
// not runs of the sharded axis, hif4, pool.mean, scale layouts padded or tiled over the whole
// tensor (TransformerEngine, cuBLAS swizzle), and one scale for the whole tensor (see
// has_tensor_amax). fp8.scaled group:N along the last axis is a run of N.
ScaleAxis scale_axis_along(const Contract& c, const Shape& x, int axis);

// Whether every scale of the contract depends on the amax of the whole tensor: fp8.scaled
// granularity=tensor (its one scale) and nvfp4 tensor_scale=amax (t = amax / (448 * 6), and the
// block scales relative to t). Quantize-before is exact for these only after the ranks agree
// on that amax (an all_reduce(MAX), plan "scale": "global").
bool has_tensor_amax(const Contract& c);
// The name of the output computed from the tensor amax alone ("scale" for fp8.scaled tensor,
// "tensor_scale" for nvfp4): with the agreed amax every rank computes it, none sends it.
const char* tensor_amax_output(const Contract& c);

// Bytes of one element of the contract's scale tensor: its scale encoding's (E8M0, E4M3: 1; fp32: 4;
// f16: 2).
std::int64_t scale_element_bytes(const Contract& c);

// Why quantize-before cannot run for this tensor (nullopt when it can): its sharded axis, or
// for all_to_all its re-sharded axis, would cut the scale layout (the run re-shards along
// to_axis only where every index has its own scales). Unquantized, pool_mean and int8.channel
// with a global scale always can; a tensor-amax contract can on any axis its other scales allow
// (all_to_all only with "scale": "global").
std::optional<std::string> quantize_before_refusal(const TensorPlan& t);

// The shapes of the quantized piece of rows [offset, offset + length) of a tensor `full`,
// quantized on the full tensor's grid of scale domains: the payload of those rows, and the
// scales of every global domain they touch, [scale_first, scale_first + scale[scale_axis]).
struct PieceGeometry {
  Shape payload;
  Shape scale;
  std::int64_t scale_first = 0;
};
PieceGeometry piece_geometry(const Contract& c, const Shape& full, int axis, std::int64_t offset, std::int64_t length);

// How many runs of `block` indices (tiling [0, length) from 0, last one partial) contain a shard
// boundary r * length / world (0 < r < world) strictly inside them.
std::int64_t straddled_runs(std::int64_t length, int world, std::int64_t block);

}  // namespace qexact::plan
