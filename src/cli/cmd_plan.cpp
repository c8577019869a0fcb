// `qexact plan PLAN.json [--json] [--sweep FILE]`: the judge of quantize-before-the-collective
// (plan/judge.hpp). Per tensor: byte-exact or the drift it will show, with the reason on the
// real shape; bytes on the wire per rank before and after; extra collectives; predicted times
// when a sweep is given (--sweep, else the plan's "sweep" field, relative to the plan file).
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include "cli/commands.hpp"
#include "plan/judge.hpp"
#include "plan/plan_file.hpp"
#include "plan/sweep_file.hpp"

namespace qexact::cli {
namespace {

struct PlanOptions {
  std::string plan;
  std::string sweep;
  bool json = false;
};

std::string percent(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", 100.0 * r);
  return buf;
}

std::string seconds(const std::optional<double>& s) {
  if (!s) return "no prediction";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g s", *s);
  return buf;
}

nlohmann::ordered_json opt_json(const std::optional<double>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

std::string describe(const plan::TensorPlan& t) {
  std::ostringstream o;
  o << t.name << ": " << shape_str(t.shape) << ' ' << dtype_name(t.dtype) << ", " << plan::collective_name(t.collective)
    << " along axis " << t.axis;
  if (t.collective == plan::Collective::all_to_all) o << " -> axis " << t.to_axis;
  if (t.collective == plan::Collective::pool_mean) o << ", pool " << t.pool;
  if (t.quantized()) {
    o << ", " << t.quantize;
    for (const auto& [k, v] : t.params) o << ' ' << k << '=' << v;
    if (t.scale == plan::ScaleScope::global) o << " (global scale)";
  } else if (t.collective != plan::Collective::pool_mean) {
    o << ", not quantized";
  }
  return o.str();
}

std::string totals_line(const plan::ByteTotals& s) {
  std::ostringstream o;
  o << "before " << s.bytes_before << " bytes; after " << s.payload_bytes << " payload bytes = "
    << percent(s.payload_ratio()) << " of before without scales, " << (s.payload_bytes + s.scale_bytes)
    << " bytes = " << percent(s.with_scales_ratio()) << " with " << s.scale_bytes << " scale bytes";
  if (s.extra_bytes > 0)
    o << ", " << (s.payload_bytes + s.scale_bytes + s.extra_bytes) << " bytes = " << percent(s.with_extra_ratio())
      << " with " << s.extra_bytes << " bytes of extra collectives";
  return o.str();
}

nlohmann::ordered_json totals_json(const plan::ByteTotals& s) {
  return {{"bytes_before", s.bytes_before},
          {"payload_bytes", s.payload_bytes},
          {"scale_bytes", s.scale_bytes},
          {"bytes_after", s.bytes_after},
          {"extra_bytes", s.extra_bytes},
          {"payload_ratio", s.payload_ratio()},
          {"with_scales_ratio", s.with_scales_ratio()},
          {"with_extra_ratio", s.with_extra_ratio()}};
}

std::string render_text(const plan::PlanFile& p, const plan::Judgement& j, const std::string& sweep_path,
                        const plan::SweepFile* sweep) {
  std::ostringstream o;
  o << "qexact plan: " << p.source << ", world " << j.world << ", " << j.tensors.size() << " tensors\n";
  if (sweep != nullptr)
    o << "sweep: " << sweep_path << " (world " << sweep->world << ", " << sweep->mpi << " on " << sweep->host << ", "
      << sweep->warmup << " warm-up + " << sweep->iterations << " timed iterations)\n";
  else
    o << "sweep: none (no times predicted)\n";
  for (std::size_t i = 0; i < j.tensors.size(); ++i) {
    const plan::TensorVerdict& v = j.tensors[i];
    const plan::TensorPlan& t = p.tensors[i];
    o << '\n' << describe(t) << '\n';
    o << "  " << (!v.supported ? "REFUSED  " : v.exact ? "EXACT  " : "DRIFT  ") << v.reason << '\n';
    o << "  bytes per rank: before " << v.bytes_before << " (" << dtype_name(t.dtype) << ") -> after " << v.bytes_after
      << " = payload " << v.payload_bytes << " + scales " << v.scale_bytes << " ("
      << percent(static_cast<double>(v.bytes_after) / static_cast<double>(v.bytes_before)) << " of before)\n";
    for (const plan::ExtraCollective& e : v.extra)
      o << "  extra collective: " << e.op << " of " << e.bytes << " bytes (" << e.what << ")\n";
    for (const std::string& n : v.notes) o << "  note: " << n << '\n';
    if (sweep != nullptr)
      o << "  time (" << v.wire_op << "): before " << seconds(v.time_before_s) << " -> after " << seconds(v.time_after_s)
        << "  [" << v.time_note << "]\n";
  }
  const plan::PlanTotals& s = j.totals;
  o << "\ntotals per rank, all tensors: " << totals_line(s) << '\n';
  for (const auto& [op, t] : s.by_collective) o << "  " << op << ": " << totals_line(t) << '\n';
  o << "verdicts: " << s.exact << " byte-exact, " << s.drift << " with drift";
  if (s.unsupported > 0) o << ", " << s.unsupported << " not supported for quantize-before";
  o << '\n';
  if (sweep != nullptr)
    o << "time (sum of the collectives): before " << seconds(s.time_before_s) << " -> after " << seconds(s.time_after_s)
      << (s.time_before_s && s.time_after_s ? "" : " (a tensor above has no prediction)") << '\n';
  return o.str();
}

nlohmann::ordered_json render_json(const plan::PlanFile& p, const plan::Judgement& j, const std::string& sweep_path,
                                   const plan::SweepFile* sweep) {
  nlohmann::ordered_json out;
  out["world"] = j.world;
  out["plan"] = p.source;
  out["sweep"] = sweep ? nlohmann::ordered_json(sweep_path) : nlohmann::ordered_json(nullptr);
  out["tensors"] = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < j.tensors.size(); ++i) {
    const plan::TensorVerdict& v = j.tensors[i];
    const plan::TensorPlan& t = p.tensors[i];
    nlohmann::ordered_json e;
    e["name"] = v.name;
    e["collective"] = plan::collective_name(t.collective);
    e["quantize"] = t.quantized() ? nlohmann::ordered_json(t.quantize) : nlohmann::ordered_json(nullptr);
    e["supported"] = v.supported;
    e["exact"] = v.exact;
    e["reason"] = v.reason;
    e["drift_blocks"] = v.drift_blocks;
    e["total_blocks"] = v.total_blocks;
    e["bytes_before"] = v.bytes_before;
    e["bytes_after"] = v.bytes_after;
    e["payload_bytes"] = v.payload_bytes;
    e["scale_bytes"] = v.scale_bytes;
    e["extra_collectives"] = nlohmann::ordered_json::array();
    for (const plan::ExtraCollective& x : v.extra)
      e["extra_collectives"].push_back({{"op", x.op}, {"bytes", x.bytes}, {"what", x.what}});
    e["notes"] = v.notes;
    e["time_before_s"] = opt_json(v.time_before_s);
    e["time_after_s"] = opt_json(v.time_after_s);
    e["time_note"] = v.time_note;
    out["tensors"].push_back(e);
  }
  const plan::PlanTotals& s = j.totals;
  out["totals"] = totals_json(s);
  out["totals"]["exact"] = s.exact;
  out["totals"]["drift"] = s.drift;
  out["totals"]["unsupported"] = s.unsupported;
  out["totals"]["time_before_s"] = opt_json(s.time_before_s);
  out["totals"]["time_after_s"] = opt_json(s.time_after_s);
  out["totals"]["by_collective"] = nlohmann::ordered_json::object();
  for (const auto& [op, t] : s.by_collective) out["totals"]["by_collective"][op] = totals_json(t);
  return out;
}

int run_plan(const PlanOptions& o) {
  const plan::PlanFile p = plan::read_plan_file(o.plan);
  if (!p.world) fail(ErrorKind::bad_file, o.plan + ": field 'world': missing (qexact plan needs the world size)");
  const int world = plan::check_world(p, *p.world);

  std::string sweep_path = o.sweep;
  if (sweep_path.empty() && !p.sweep.empty())
    sweep_path = (std::filesystem::path(o.plan).parent_path() / p.sweep).string();
  std::optional<plan::SweepFile> sweep;
  if (!sweep_path.empty()) {
    sweep = plan::read_sweep_file(sweep_path);
    if (sweep->world != world)
      fail(ErrorKind::bad_argument, sweep_path + ": field 'world': the sweep was measured with " +
                                        std::to_string(sweep->world) + " ranks, the plan has " + std::to_string(world));
  }
  const plan::Judgement j = plan::judge(p, world, sweep ? &*sweep : nullptr);
  if (o.json)
    std::cout << render_json(p, j, sweep_path, sweep ? &*sweep : nullptr).dump(2) << std::endl;
  else
    std::cout << render_text(p, j, sweep_path, sweep ? &*sweep : nullptr) << std::flush;
  return 0;
}

}  // namespace

void add_plan(CLI::App& app, Action& action) {
  auto opts = std::make_shared<PlanOptions>();
  CLI::App* sub = app.add_subcommand(
      "plan", "Judge quantize-before-the-collective for a plan file: exactness, bytes on the wire, predicted time");
  sub->add_option("plan", opts->plan, "The collective plan (JSON)")->required();
  sub->add_flag("--json", opts->json, "Print the verdicts as JSON");
  sub->add_option("--sweep", opts->sweep, "A sweep file from `qexact sweep` (overrides the plan's \"sweep\")");
  sub->callback([opts, &action] { action = [opts] { return run_plan(*opts); }; });
}

}  // namespace qexact::cli
