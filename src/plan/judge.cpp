// The judge: scale reduction domains against shard boundaries, bytes on the wire, times.
#include "plan/judge.hpp"

#include <algorithm>

#include "qexact/quantize.hpp"

namespace qexact::plan {
namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
std::string str(std::int64_t v) { return std::to_string(v); }

// The scale reduction domain of a quantized tensor: the run length along each axis.
struct Domain {
  std::vector<std::int64_t> block;
  bool bsnd = false;  // (B, S, N, D) naming of the axes (int8.block, int8.channel)
  std::int64_t token_block = 0;  // int8.block
  std::string kind;   // what one domain is, for the messages
};

Domain domain_of(const TensorPlan& t) {
  const Shape& s = t.shape;
  Domain d;
  d.block.assign(s.size(), 1);
  if (t.is_int8_channel()) {
    d.bsnd = true;
    d.block[0] = s[0];
    d.block[1] = s[1];
    d.kind = "(head, channel) scales";
    return d;
  }
  const Contract c = t.contract();
  switch (c.family) {
    case Family::int8_block:
      d.bsnd = true;
      d.token_block = c.token_block;
      d.block[1] = c.token_block;
      d.block[3] = s[3];
      d.kind = "(b, head, token block) scales";
      break;
    case Family::mx:
      d.block.back() = c.block;
      d.kind = "groups of " + str(c.block);
      break;
    case Family::int8_group:
      d.block.back() = c.group;
      d.kind = "groups of " + str(c.group);
      break;
    case Family::int8_token:
      d.block.back() = s.back();
      d.kind = "row scales";
      break;
    case Family::hif4: {
      const int q = c.qdim < 0 ? static_cast<int>(s.size()) + c.qdim : c.qdim;
      d.block[static_cast<std::size_t>(q)] = 64;
      d.kind = "blocks of 64";
      break;
    }
    case Family::pool:  // not a quantizer: the plan parser refuses it as `quantize`
      break;
  }
  return d;
}

std::string axis_label(const Domain& d, int a) {
  static const char* const kBsnd[] = {"B", "S", "N", "D"};
  std::string l = "axis " + str(a);
  if (d.bsnd) l += std::string(" (") + kBsnd[a] + ")";
  return l;
}

std::int64_t runs_on(const Shape& s, const Domain& d, std::size_t a) { return ceil_div(s[a], d.block[a]); }

// One sentence on what the boundaries of `world` shards along axis a do to the domains.
std::string axis_clause(const TensorPlan& t, const Domain& d, int a, int world, std::int64_t total) {
  const auto ua = static_cast<std::size_t>(a);
  const std::int64_t len = t.shape[ua];
  const std::int64_t shard = len / world;
  const std::int64_t b = d.block[ua];
  const std::int64_t runs = runs_on(t.shape, d, ua);
  const std::int64_t per_run = total / runs;
  const std::int64_t k = straddled_runs(len, world, b);
  const std::string label = axis_label(d, a);
  if (b == 1) {
    std::string reduced;
    for (std::size_t i = 0; i < d.block.size(); ++i)
      if (d.block[i] > 1) reduced += (reduced.empty() ? "" : ", ") + axis_label(d, static_cast<int>(i));
    return label + " is not reduced by any scale (the " + d.kind + " run along " + reduced + "): no scale domain is cut";
  }
  if (d.token_block > 0 && a == 1) {
    std::string c = "S % (world x token_block) = " + str(len) + " % (" + str(world) + " x " + str(b) +
                    ") = " + str(len % (world * b));
    if (k == 0) return c + ": every " + str(b) + "-token block lies in one shard";
    return c + ": " + str(k) + " of " + str(runs) + " token blocks straddle a shard boundary (x " + str(t.shape[0]) +
           " batch x " + str(t.shape[2]) + " heads = " + str(k * per_run) + " of " + str(total) + " scale blocks)";
  }
  if (b == len) {
    if (world == 1) return label + " is reduced whole by the scales, and world 1 has no shard boundary";
    return label + " (length " + str(len) + ") is reduced whole by the " + d.kind + ": the shard boundaries cut all " +
           str(total) + " of them";
  }
  std::string c = "shard length % block along " + label + " = " + str(shard) + " % " + str(b) + " = " + str(shard % b);
  if (k == 0) return c + ": the " + d.kind + " are never cut";
  return c + ": " + str(k) + " of " + str(runs) + " " + d.kind + " along it straddle a shard boundary (x " +
         str(per_run) + " = " + str(k * per_run) + " of " + str(total) + ")";
}

std::string layout_name(const Contract& c) {
  for (const auto& [k, v] : params(c))
    if (k == "layout") return v;
  return "";
}

// Payload and scale bytes of one quantized shard (layout padding included).
std::pair<std::int64_t, std::int64_t> quantized_bytes(const TensorPlan& t, const Shape& shard) {
  if (t.is_int8_channel()) {
    const std::int64_t scale = t.scale == ScaleScope::global ? 0 : shard[2] * shard[3] * 4;
    return {shape_numel(shard), scale};
  }
  const Contract c = t.contract();
  if (c.family == Family::hif4) {
    const int q = c.qdim < 0 ? static_cast<int>(shard.size()) + c.qdim : c.qdim;
    const std::int64_t len = shard[static_cast<std::size_t>(q)];
    const std::int64_t rows = shape_numel(shard) / len;
    return {shape_numel(shard) / 2, rows * (len / 64) * 4};  // nibbles; 4 scale bytes per 64
  }
  const std::int64_t payload = shape_numel(payload_shape(c, shard));  // u8 / i8 elements
  std::int64_t scale_elem = 1;                                       // MX: E8M0 bytes
  if (c.family != Family::mx) scale_elem = c.scale_store == ScaleStore::f16 ? 2 : 4;
  return {payload, shape_numel(scale_shape(c, shard)) * scale_elem};
}

void judge_pool(const TensorPlan& t, int world, TensorVerdict& v) {
  const std::int64_t batch = t.shape[0], seq = t.shape[1], len = seq / world, pool = t.pool;
  const std::int64_t features = shape_numel(t.shape) / (batch * seq);
  std::int64_t most = 0, most_cells = 0;
  for (int r = 0; r < world; ++r) {
    const std::int64_t first = r * len / pool, last = ((r + 1) * len - 1) / pool;
    const std::int64_t cells = last - first + 1;
    // An exact partial sum is 6 x 64-bit limbs (48 bytes) per (b, cell, feature); a u64 row count per cell.
    const std::int64_t bytes = batch * cells * features * 48 + cells * 8;
    if (bytes > most) {
      most = bytes;
      most_cells = cells;
    }
  }
  v.exact = true;
  v.wire_op = "all_gather";
  v.payload_bytes = most;
  v.reason = "pooled side channel (CONTRACTS §6): each rank sends exact partial sums of the cells it touches, "
             "combined in rank order, each cell divided once by its true length: bit for bit the unsharded "
             "block mean (" + str(ceil_div(seq, pool)) + " cells of " + str(pool) + ")";
  v.notes.push_back("partials per rank (the most of any rank): " + str(batch) + " batch x " + str(most_cells) +
                    " cells x " + str(features) + " features x 48 bytes + " + str(most_cells) + " cells x 8 bytes of counts = " +
                    str(most) + " bytes; before = the shard gathered in " + dtype_name(t.dtype));
  if (seq % pool != 0)
    v.notes.push_back("tail cell: S % P = " + str(seq) + " % " + str(pool) + " = " + str(seq % pool) +
                      " rows; a uniform divisor P would be wrong on it, the true-length divisor is used");
}

}  // namespace

void ByteTotals::add(const TensorVerdict& v) {
  bytes_before += v.bytes_before;
  payload_bytes += v.payload_bytes;
  scale_bytes += v.scale_bytes;
  bytes_after += v.bytes_after;
  for (const ExtraCollective& e : v.extra) extra_bytes += e.bytes;
}
double ByteTotals::payload_ratio() const { return static_cast<double>(payload_bytes) / static_cast<double>(bytes_before); }
double ByteTotals::with_scales_ratio() const {
  return static_cast<double>(payload_bytes + scale_bytes) / static_cast<double>(bytes_before);
}
double ByteTotals::with_extra_ratio() const {
  return static_cast<double>(payload_bytes + scale_bytes + extra_bytes) / static_cast<double>(bytes_before);
}

std::int64_t straddled_runs(std::int64_t length, int world, std::int64_t block) {
  const std::int64_t shard = length / world;
  std::int64_t count = 0, last = -1;
  for (std::int64_t r = 1; r < world; ++r) {
    const std::int64_t cut = r * shard;
    if (cut % block == 0) continue;
    const std::int64_t run = cut / block;
    if (run != last) ++count;  // boundaries increase, so a run holding two of them comes twice in a row
    last = run;
  }
  return count;
}

TensorVerdict judge_tensor(const TensorPlan& t, int world) {
  TensorVerdict v;
  v.name = t.name;
  const Shape shard = t.shard_shape(world);
  v.bytes_before = shape_numel(shard) * static_cast<std::int64_t>(dtype_size(t.dtype));
  v.wire_op = collective_name(t.collective);
  if (t.collective == Collective::pool_mean) {
    judge_pool(t, world, v);
    v.bytes_after = v.payload_bytes + v.scale_bytes;
    return v;
  }
  if (!t.quantized()) {
    v.exact = true;
    v.payload_bytes = v.bytes_before;
    v.bytes_after = v.bytes_before;
    v.reason = std::string("not quantized: moved as ") + dtype_name(t.dtype) + ", the same bytes either way";
    return v;
  }

  const Domain d = domain_of(t);
  std::int64_t total = 1;
  for (std::size_t a = 0; a < t.shape.size(); ++a) total *= runs_on(t.shape, d, a);
  std::vector<int> cut_axes = {t.axis};
  if (t.collective == Collective::all_to_all) cut_axes.push_back(t.to_axis);
  // A domain survives if no axis cuts its run on that axis.
  std::int64_t whole = 1;
  for (std::size_t a = 0; a < t.shape.size(); ++a) {
    std::int64_t runs = runs_on(t.shape, d, a);
    if (std::find(cut_axes.begin(), cut_axes.end(), static_cast<int>(a)) != cut_axes.end())
      runs -= straddled_runs(t.shape[a], world, d.block[a]);
    whole *= runs;
  }
  v.total_blocks = total;
  std::vector<std::string> clauses;
  for (std::size_t i = 0; i < cut_axes.size(); ++i) {
    const std::string role = cut_axes.size() == 1 ? "" : (i == 0 ? "before (sequence shard): " : "after (re-sharded): ");
    clauses.push_back(role + axis_clause(t, d, cut_axes[i], world, total));
  }
  std::string joined;
  for (const auto& c : clauses) joined += (joined.empty() ? "" : "; ") + c;

  const auto [payload, scale] = quantized_bytes(t, shard);
  v.payload_bytes = payload;
  v.scale_bytes = scale;
  v.bytes_after = payload + scale;

  if (t.is_int8_channel() && t.scale == ScaleScope::global) {
    const std::int64_t amax_bytes = t.shape[2] * t.shape[3] * 4;
    v.exact = true;
    v.reason = "byte-exact with one extra all_reduce(MAX) of the (N, D) = (" + str(t.shape[2]) + ", " + str(t.shape[3]) +
               ") fp32 amax tensor (" + str(amax_bytes) + " bytes) before quantizing: every rank then holds the "
               "global per-(head, channel) scale, which is not sent again";
    v.extra.push_back({"all_reduce_max", amax_bytes, "per-(head, channel) amax, (N, D) fp32"});
    return v;
  }
  v.drift_blocks = total - whole;
  v.exact = v.drift_blocks == 0;
  if (v.exact) {
    v.reason = "byte-exact: " + joined;
    if (t.collective == Collective::all_gather && !t.is_int8_channel()) {
      const auto [full_payload, full_scale] = quantized_bytes(t, t.shape);
      (void)full_payload;
      if (full_scale != scale * world)
        v.notes.push_back("scale layout " + layout_name(t.contract()) + " pads each shard: " + str(world) + " x " +
                          str(scale) + " scale bytes gathered vs " + str(full_scale) +
                          " for the full tensor (same scale values, re-laid out on receipt)");
    }
  } else {
    v.reason = "drift: boundary blocks regrouped: " + str(v.drift_blocks) + " of " + str(total) + " blocks (" + joined + ")";
  }
  return v;
}

Judgement judge(const PlanFile& plan, int world, const SweepFile* sweep) {
  Judgement j;
  j.world = world;
  PlanTotals& tot = j.totals;
  bool all_before = sweep != nullptr, all_after = sweep != nullptr;
  double sum_before = 0, sum_after = 0;
  for (const TensorPlan& t : plan.tensors) {
    TensorVerdict v = judge_tensor(t, world);
    if (sweep != nullptr) {
      // nccl-tests sizes: all_gather counts the gathered total, all_to_all one rank's send buffer.
      const std::string before_op = t.collective == Collective::all_to_all ? "all_to_all" : "all_gather";
      const std::int64_t mult = before_op == "all_gather" ? world : 1;
      const TimePrediction before = predict_time(*sweep, before_op, v.bytes_before * mult);
      TimePrediction after = predict_time(*sweep, before_op, v.bytes_after * mult);
      std::string note = "before: " + before.note + "; after: " + after.note;
      for (const ExtraCollective& e : v.extra) {
        const std::string op = e.op == "all_reduce_max" ? "all_reduce" : e.op;
        const TimePrediction p = predict_time(*sweep, op, e.bytes);
        note += "; " + e.op + ": " + p.note;
        if (p.seconds && after.seconds) *after.seconds += *p.seconds;
        else after.seconds.reset();
      }
      v.time_before_s = before.seconds;
      v.time_after_s = after.seconds;
      v.time_note = note;
      if (before.seconds) sum_before += *before.seconds; else all_before = false;
      if (after.seconds) sum_after += *after.seconds; else all_after = false;
    }
    tot.add(v);
    tot.by_collective[collective_name(t.collective)].add(v);
    (v.exact ? tot.exact : tot.drift) += 1;
    j.tensors.push_back(std::move(v));
  }
  if (all_before) tot.time_before_s = sum_before;
  if (all_after) tot.time_after_s = sum_after;
  return j;
}

}  // namespace qexact::plan
