// The judge: scale reduction domains against shard boundaries, bytes on the wire, times.
#include "plan/judge.hpp"

#include <algorithm>

#include "contracts/ceil_div.hpp"
#include "contracts/family_table.hpp"
#include "plan/shard_domain.hpp"
#include "qexact/pool.hpp"
#include "qexact/quantize.hpp"

namespace qexact::plan {
namespace {

std::string str(std::int64_t v) { return std::to_string(v); }

// The scale reduction domain of a quantized tensor: the run length along each axis.
struct Domain {
  std::vector<std::int64_t> block;
  bool bsnd = false;  // (B, S, N, D) naming of the axes (int8.block, int8.channel)
  std::string kind;   // what one domain is, for the messages
  // A run longer than 1 along a sharded axis, for the messages: its length's name in the
  // contract ("token_block") and what its runs are called ("token blocks").
  std::string run_name = "token_block", run_unit = "token blocks";
  // Domains of the whole tensor: the product of the runs along each axis, unless one index of
  // an axis holds several (fp8.scaled tiles smaller than an index of axis 0): then the scales'.
  std::int64_t total = 0;
};

// Only for a locally scaled tensor the run supports (quantize_before_refusal is empty). Along the
// sharded axes the run length is the shared scale_axis_along's, the one the runs quantize with.
Domain domain_of(const TensorPlan& t) {
  const Shape& s = t.shape;
  Domain d;
  d.block.assign(s.size(), 1);
  const Contract c = t.contract();
  const FamilyTraits& f = family_traits(c.family);
  if (!f.quantizes) throw std::logic_error("domain_of: " + t.name + " is refused for quantize-before");
  const ScaleGrain g = f.grain(c);
  d.kind = f.domain_words(c);
  switch (g.kind) {
    case Granularity::row:
      d.block.back() = s.back();
      break;
    case Granularity::group:
      d.block.back() = g.cols;
      d.run_name = f.grain_param ? f.grain_param : "N";
      d.run_unit = "groups";
      break;
    case Granularity::head_block:
      d.bsnd = true;
      d.block[3] = s[3];
      d.run_name = f.grain_param ? f.grain_param : "T";
      break;
    case Granularity::tile: {
      // The middle axes are reduced whole (axis 0 is the sharded one: scale_axis_along).
      for (std::size_t a = 1; a + 1 < s.size(); ++a) d.block[a] = s[a];
      d.block.back() = g.cols;
      const bool last = t.axis == static_cast<int>(s.size()) - 1;
      const std::int64_t inner = last ? 1 : shape_numel(Shape(s.begin() + 1, s.end() - 1));
      d.run_name = last ? "N" : inner > 1 ? "M/" + str(inner) : "M";
      d.run_unit = last ? "tile columns" : "tile rows";
      break;
    }
    case Granularity::tensor:
      throw std::logic_error("domain_of: " + t.name + " has a tensor amax (judge_tensor_amax)");
  }
  std::vector<int> cut_axes = {t.axis};
  if (t.collective == Collective::all_to_all) cut_axes.push_back(t.to_axis);
  bool nested = false;
  for (int a : cut_axes) {
    const ScaleAxis sa = scale_axis_along(c, s, a);
    d.block[static_cast<std::size_t>(a)] = sa.elements_per_scale;
    nested = nested || sa.scales_per_index > 1;
  }
  d.total = 1;
  for (std::size_t a = 0; a < s.size(); ++a) d.total *= ceil_div(s[a], d.block[a]);
  if (nested) d.total = shape_numel(scale_shape(c, s));
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
  // Runs longer than 1 along a sharded axis: the token blocks of a (b, head, token block) scale,
  // fp8.scaled groups along the last axis and tiles.
  const std::string len_name = d.bsnd && a == 1 ? "S" : "shape[" + str(a) + "]";
  std::string c = len_name + " % (world x " + d.run_name + ") = " + str(len) + " % (" + str(world) + " x " + str(b) +
                  ") = " + str(len % (world * b));
  const std::string one = d.run_unit == "token blocks" ? str(b) + "-token block" : "run of " + str(b) + " (" + d.run_unit + ")";
  if (k == 0) return c + ": every " + one + " lies in one shard";
  return c + ": " + str(k) + " of " + str(runs) + " " + d.run_unit + " straddle a shard boundary (x " + str(per_run) +
         " = " + str(k * per_run) + " of " + str(total) + " scale blocks)";
}

// Payload and scale bytes one rank sends (the most of any rank): each rank quantizes its rows on
// the full tensor's grid of scale domains (piece_geometry), so a rank whose shard starts inside
// a domain also carries that domain's scale.
std::pair<std::int64_t, std::int64_t> quantized_bytes(const TensorPlan& t, int world) {
  const Shape shard = t.shard_shape(world);
  if (t.is_int8_channel()) return {shape_numel(shard), 0};  // global scale: every rank computes it, none sends it
  const Contract c = t.contract();
  const std::int64_t len = shard[static_cast<std::size_t>(t.axis)];
  std::int64_t payload = 0, scale = 0;
  for (int r = 0; r < world; ++r) {
    const PieceGeometry g = piece_geometry(c, t.shape, t.axis, r * len, len);
    payload = std::max(payload, shape_numel(g.payload));  // u8 / i8 elements
    scale = std::max(scale, shape_numel(g.scale) * scale_element_bytes(c, t.shape));
  }
  return {payload, scale};
}

void judge_pool(const TensorPlan& t, int world, TensorVerdict& v) {
  const std::int64_t batch = t.shape[0], seq = t.shape[1], len = seq / world, pool = t.pool;
  const std::int64_t features = shape_numel(t.shape) / (batch * seq);
  std::int64_t most = 0, most_cells = 0;
  for (int r = 0; r < world; ++r) {
    const std::int64_t first = r * len / pool, last = ((r + 1) * len - 1) / pool;
    const std::int64_t cells = last - first + 1;
    // pool_partial_bytes: a 2-word header (first cell, cells), a u64 row count per cell, and an
    // exact partial sum of kPoolSumLimbs u64 limbs per (b, cell, feature).
    const std::int64_t bytes = 16 + cells * 8 + batch * cells * features * kPoolSumLimbs * 8;
    if (bytes > most) {
      most = bytes;
      most_cells = cells;
    }
  }
  v.exact = true;
  v.wire_op = "all_gather";
  v.payload_bytes = most;
  v.reason = "pooled side channel (contracts §6): each rank sends exact partial sums of the cells it touches, "
             "combined in rank order, each cell divided once by its true length: bit for bit the unsharded "
             "block mean (" + str(ceil_div(seq, pool)) + " cells of " + str(pool) + ")";
  v.notes.push_back("partials per rank (the most of any rank): " + str(batch) + " batch x " + str(most_cells) +
                    " cells x " + str(features) + " features x " + str(kPoolSumLimbs * 8) + " bytes + " + str(most_cells) +
                    " cells x 8 bytes of counts + 16 bytes of header = " +
                    str(most) + " bytes; before = the shard gathered in " + dtype_name(t.dtype));
  if (seq % pool != 0)
    v.notes.push_back("tail cell: S % P = " + str(seq) + " % " + str(pool) + " = " + str(seq % pool) +
                      " rows; a uniform divisor P would be wrong on it, the true-length divisor is used");
}

// A contract whose every scale depends on the tensor's amax (has_tensor_amax): one domain, the
// whole tensor, which every shard boundary cuts unless the ranks first agree on its amax.
void judge_tensor_amax(const TensorPlan& t, int world, TensorVerdict& v) {
  const Contract c = t.contract();
  const bool agreed = t.scale == ScaleScope::global;
  const std::string own = tensor_amax_output(c);
  for (const OutputSpec& o : output_specs(c, t.shard_shape(world))) {
    const std::int64_t bytes = shape_numel(o.shape) * static_cast<std::int64_t>(dtype_size(o.dtype));
    if (o.name == "payload") v.payload_bytes += bytes;
    else if (!(agreed && o.name == own)) v.scale_bytes += bytes;
  }
  v.bytes_after = v.payload_bytes + v.scale_bytes;
  v.total_blocks = 1;
  const std::string sets = amax_sets_tensor_scale(c)
                               ? "the fp32 tensor scale t = amax / (448 x 6) and every E4M3 block scale relative to t"
                               : "the one fp32 scale of granularity=tensor";
  if (agreed) {
    const bool a2a = t.collective == Collective::all_to_all;
    const std::int64_t values = a2a ? world : 1;
    v.exact = true;
    v.extra.push_back({"all_reduce_max", 4 * values,
                       a2a ? "one fp32 amax per destination rank: the amax of the head shard it holds afterwards"
                           : "the fp32 amax of the whole tensor"});
    v.reason = "byte-exact with one extra all_reduce(MAX) of " +
               (a2a ? str(world) + " fp32 amaxes, one per destination rank's head shard (" : std::string("the fp32 tensor amax (")) +
               str(4 * values) + " bytes) before quantizing: every rank then quantizes " +
               (a2a ? "the chunk it sends rank j with the amax of rank j's whole head shard"
                    : std::string("its shard with the tensor's amax")) +
               ", which sets " + sets + "; every rank computes " + own + " from it, none sends it";
    return;
  }
  v.drift_blocks = world > 1 ? 1 : 0;
  v.exact = v.drift_blocks == 0;
  if (v.exact) {
    v.reason = "byte-exact: one rank holds the whole tensor and its amax";
    return;
  }
  v.reason = "drift: each shard's own amax sets " + sets + ", not the tensor's amax: the one tensor-wide amax domain is cut by " +
             str(world - 1) + " shard boundaries (the assembled " + own + " is rank 0's; bytes differ wherever a shard's amax is not the tensor's)";
  v.notes.push_back("with \"scale\": \"global\" the ranks first agree on the amax (one all_reduce(MAX) of 4 bytes), "
                    "and quantize-before is byte-exact");
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

  if (const std::optional<std::string> why = quantize_before_refusal(t)) {
    // `qexact collective` refuses the plan for the same reason; the totals count it unquantized.
    v.supported = false;
    v.payload_bytes = v.bytes_before;
    v.bytes_after = v.bytes_before;
    v.reason = "not supported for quantize-before: " + *why;
    v.notes.push_back(std::string("counted as moved unquantized (") + dtype_name(t.dtype) +
                      "); qexact collective refuses a plan with this tensor");
    return v;
  }
  if (!t.is_int8_channel() && has_tensor_amax(t.contract())) {
    judge_tensor_amax(t, world, v);
    return v;
  }
  const auto [payload, scale] = quantized_bytes(t, world);
  v.payload_bytes = payload;
  v.scale_bytes = scale;
  v.bytes_after = payload + scale;
  if (t.is_int8_channel()) {  // the parser admits it only with the global scale
    const std::int64_t amax_bytes = t.shape[2] * t.shape[3] * 4;
    v.exact = true;
    v.reason = "byte-exact with one extra all_reduce(MAX) of the (N, D) = (" + str(t.shape[2]) + ", " + str(t.shape[3]) +
               ") fp32 amax tensor (" + str(amax_bytes) + " bytes) before quantizing: every rank then holds the "
               "global per-(head, channel) scale, which is not sent again";
    v.extra.push_back({"all_reduce_max", amax_bytes, "per-(head, channel) amax, (N, D) fp32"});
    return v;
  }

  const Domain d = domain_of(t);
  const std::int64_t total = d.total;
  std::vector<int> cut_axes = {t.axis};
  if (t.collective == Collective::all_to_all) cut_axes.push_back(t.to_axis);
  // A domain survives if no axis cuts its run on that axis: of the runs along a cut axis, the
  // straddled ones take their share of the domains with them.
  std::int64_t whole = total;
  for (int a : cut_axes) {
    const std::int64_t runs = runs_on(t.shape, d, static_cast<std::size_t>(a));
    whole = whole / runs * (runs - straddled_runs(t.shape[static_cast<std::size_t>(a)], world, d.block[static_cast<std::size_t>(a)]));
  }
  v.total_blocks = total;
  std::string joined;
  for (std::size_t i = 0; i < cut_axes.size(); ++i) {
    const std::string role = cut_axes.size() == 1 ? "" : (i == 0 ? "before (sequence shard): " : "after (re-sharded): ");
    joined += (joined.empty() ? "" : "; ") + role + axis_clause(t, d, cut_axes[i], world, total);
  }
  v.drift_blocks = total - whole;
  v.exact = v.drift_blocks == 0;
  if (v.exact)
    v.reason = "byte-exact: " + joined;
  else
    v.reason = "drift: boundary blocks regrouped: " + str(v.drift_blocks) + " of " + str(total) + " blocks (" + joined + ")";
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
    (!v.supported ? tot.unsupported : v.exact ? tot.exact : tot.drift) += 1;
    j.tensors.push_back(std::move(v));
  }
  if (all_before) tot.time_before_s = sum_before;
  if (all_after) tot.time_after_s = sum_after;
  return j;
}

}  // namespace qexact::plan
