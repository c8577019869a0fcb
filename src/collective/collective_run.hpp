// `qexact collective`: runs a collective plan on the MPI world. For every tensor each rank
// builds the full tensor (synthetic_tensor), takes its shard, runs the quantize-before path and
// the bf16 path interleaved (timing both), and compares the quantize-before result with
// gather-then-quantize (or, for pool_mean, with the single-process exact mean) byte for byte.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "plan/plan_file.hpp"
#include "collective/mpi_world.hpp"
#include "qexact/quantize.hpp"

namespace qexact::dist {

struct CollectiveOptions {
  std::uint64_t seed = 1;
  int iterations = 10;
  // Test hook: this rank throws while preparing, to show that every rank reports it.
  int fail_rank = -1;
  RunOptions run{Engine::fast, 1};
};

// One tensor's result, identical on every rank (reduced across ranks).
struct TensorReport {
  std::string name, collective, quantize;  // quantize "" when moved unquantized
  std::string scale;                       // "local" or "global"
  Shape shape;
  DType dtype = DType::bf16;
  int axis = 1, to_axis = -1;
  std::int64_t pool = 0;

  // Bytes compared against the single-process result (all_gather: the gathered tensor, the
  // same on every rank; all_to_all: summed over the ranks' head shards).
  bool exact_observed = false;
  std::int64_t payload_bytes_total = 0, payload_bytes_differing = 0;
  std::int64_t scale_bytes_total = 0, scale_bytes_differing = 0;
  std::int64_t differing_blocks = 0, straddling_blocks = 0;
  // Every scale domain a shard boundary cuts, differing or not: the judge's drift_blocks. A cut
  // domain keeps its bytes when the part holding its amax also sets the assembled scale and
  // the other part's amax maps to the same scale, so differing_blocks can be smaller.
  std::int64_t straddling_total = 0;
  bool all_drift_at_boundaries = true;          // every differing block straddles a shard boundary
  std::vector<std::int64_t> first_differing_blocks;  // flat scale indices, at most 8

  // What one rank puts on the wire for this tensor (the largest over ranks), against the same
  // tensor moved in its own dtype.
  std::int64_t bytes_bf16 = 0, bytes_sent = 0, payload_bytes_sent = 0, scale_bytes_sent = 0;
  std::string extra_collective;  // the global scale's all_reduce, when there is one
  std::int64_t extra_bytes = 0;  // what that all_reduce carries (the scale itself is not sent)

  // Medians over the iterations of the slowest rank's time.
  double time_quantized_s = 0.0, time_bf16_s = 0.0;

  // pool_mean: the uniform-divisor variant against the exact mean.
  std::int64_t tail_cell = -1;  // the cell of length S % P, -1 when P divides S
  std::int64_t uniform_cells_differing = 0;
  bool uniform_differs_on_tail_only = true;
};

std::vector<TensorReport> run_collective_plan(const MpiSession& s, const std::string& plan_path,
                                              const CollectiveOptions& o);

}  // namespace qexact::dist
