// The judge of a collective plan (contracts §7): for each tensor, whether quantizing before the
// collective gives the same bytes as quantizing after it, with the reason evaluated on the real
// shape; the bytes each rank puts on the wire before and after, scale bytes and extra
// collectives included; and, with a sweep, the predicted time of each.
//
// A scale's reduction domain is a box: along each axis a run of `block` indices (1: the axis is
// not reduced; the axis length: reduced whole), tiling the axis from 0 with a partial tail. A
// shard boundary at a multiple of the shard length that falls strictly inside a run cuts every
// domain in that run; quantize-before then regroups those domains, and only those can drift.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "plan/plan_file.hpp"
#include "plan/shard_domain.hpp"
#include "plan/sweep_file.hpp"

namespace qexact::plan {

struct ExtraCollective {
  std::string op;  // "all_reduce_max"
  std::int64_t bytes = 0;
  std::string what;
};

struct TensorVerdict {
  std::string name;
  bool supported = true;          // false: `qexact collective` refuses it (reason says why)
  bool exact = false;
  std::string reason;             // never says "exact" or "lossless" when !exact
  std::int64_t drift_blocks = 0;  // scale domains of the full tensor cut by a shard boundary
  std::int64_t total_blocks = 0;  // scale domains of the full tensor (0 when not quantized)
  std::string wire_op;            // the collective that carries the data after the change
  std::int64_t bytes_before = 0;  // per rank, the unquantized dtype
  std::int64_t payload_bytes = 0; // per rank after (the most of any rank)
  std::int64_t scale_bytes = 0;   // per rank after (the most of any rank), layout padding included
  std::int64_t bytes_after = 0;   // payload + scale (extra collectives apart)
  std::vector<ExtraCollective> extra;
  std::vector<std::string> notes;
  std::optional<double> time_before_s, time_after_s;
  std::string time_note;          // how the times were predicted, or why not
};

struct ByteTotals {
  std::int64_t bytes_before = 0, payload_bytes = 0, scale_bytes = 0, bytes_after = 0, extra_bytes = 0;
  void add(const TensorVerdict& v);
  double payload_ratio() const;      // payload / before
  double with_scales_ratio() const;  // (payload + scale) / before
  double with_extra_ratio() const;   // (payload + scale + extra) / before
};

struct PlanTotals : ByteTotals {
  int exact = 0, drift = 0, unsupported = 0;
  std::optional<double> time_before_s, time_after_s;  // absent when some tensor has no prediction
  // The same sums per collective of the plan ("all_to_all": a Ulysses group of q, k, v, o).
  std::map<std::string, ByteTotals> by_collective;
};

struct Judgement {
  int world = 0;
  std::vector<TensorVerdict> tensors;
  PlanTotals totals;
};

// The plan must have passed check_world(plan, world). `sweep` may be null (no times).
Judgement judge(const PlanFile& plan, int world, const SweepFile* sweep);

// One tensor's verdict and bytes (no times).
TensorVerdict judge_tensor(const TensorPlan& t, int world);

}  // namespace qexact::plan
