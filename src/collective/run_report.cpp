#include "collective/run_report.hpp"

#include <cstdio>
#include <sstream>

namespace qexact::dist {
namespace {

using json = nlohmann::ordered_json;

json tensor_json(const TensorReport& t) {
  json j;
  j["name"] = t.name;
  j["collective"] = t.collective;
  j["quantize"] = t.quantize.empty() ? json(nullptr) : json(t.quantize);
  j["scale"] = t.quantize.empty() ? json(nullptr) : json(t.scale);
  j["shape"] = t.shape;
  j["dtype"] = dtype_name(t.dtype);
  j["axis"] = t.axis;
  if (t.collective == "all_to_all") j["to_axis"] = t.to_axis;
  if (t.collective == "pool_mean") j["pool"] = t.pool;
  j["exact_observed"] = t.exact_observed;
  j["payload_bytes_total"] = t.payload_bytes_total;
  j["payload_bytes_differing"] = t.payload_bytes_differing;
  j["scale_bytes_total"] = t.scale_bytes_total;
  j["scale_bytes_differing"] = t.scale_bytes_differing;
  j["bytes_bf16"] = t.bytes_bf16;
  j["bytes_sent"] = t.bytes_sent;
  j["payload_bytes_sent"] = t.payload_bytes_sent;
  j["scale_bytes_sent"] = t.scale_bytes_sent;
  j["extra_collective"] = t.extra_collective.empty() ? json(nullptr) : json(t.extra_collective);
  j["extra_bytes"] = t.extra_bytes;
  j["time_quantized_s"] = t.time_quantized_s;
  j["time_bf16_s"] = t.time_bf16_s;
  j["differing_blocks"] = t.differing_blocks;
  j["straddling_blocks"] = t.straddling_blocks;
  j["straddling_total"] = t.straddling_total;
  j["all_drift_at_boundaries"] = t.all_drift_at_boundaries;
  j["first_differing_blocks"] = t.first_differing_blocks;
  if (t.collective == "pool_mean") {
    j["tail_cell"] = t.tail_cell < 0 ? json(nullptr) : json(t.tail_cell);
    j["uniform_divisor"] = {{"cells_differing", t.uniform_cells_differing},
                            {"differs_on_tail_cell_only", t.uniform_differs_on_tail_only}};
  }
  return j;
}

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

}  // namespace

json report_json(const RunContext& ctx, const std::vector<TensorReport>& tensors) {
  json j;
  j["format"] = "qexact-collective-report/1";
  j["plan"] = ctx.plan;
  j["world"] = ctx.world;
  j["mpi"] = ctx.mpi;
  j["seed"] = ctx.seed;
  j["iterations"] = ctx.iterations;
  j["notes"] = {
      {"bytes_sent", "per rank (largest over ranks): payload + scale bytes this rank puts on the wire; bytes_bf16 "
                     "is the same tensor in its own dtype"},
      {"differing", "all_gather: bytes of the gathered tensor (the same on every rank); all_to_all: summed over "
                    "the ranks' head shards; pool_mean: bytes of the pooled output"},
      {"blocks", "a block is one scale domain (flat index into the preset's scale tensor; pool_mean: a cell); "
                 "where a domain straddles a shard boundary the assembled scale is the lower rank's; straddling_total counts "
                 "every straddling domain (the judge's drift_blocks), straddling_blocks the differing ones"},
      {"times", "median over the iterations of the slowest rank; quantize + collective vs the collective of "
                "the unquantized shard, interleaved; a tensor moved unquantized has one time, shown in both"}};
  std::int64_t bf16 = 0, sent = 0;
  json list = json::array();
  for (const TensorReport& t : tensors) {
    list.push_back(tensor_json(t));
    bf16 += t.bytes_bf16;
    sent += t.bytes_sent;
  }
  j["tensors"] = list;
  j["totals"] = {{"bytes_bf16", bf16},
                 {"bytes_sent", sent},
                 {"ratio", bf16 > 0 ? static_cast<double>(sent) / static_cast<double>(bf16) : 0.0}};
  return j;
}

std::string report_table(const RunContext& ctx, const std::vector<TensorReport>& tensors) {
  std::ostringstream o;
  o << "qexact collective: " << ctx.plan << " on " << ctx.world << " ranks (" << ctx.mpi << "), seed " << ctx.seed
    << ", " << ctx.iterations << " iterations\n";
  char line[512];
  std::snprintf(line, sizeof line, "%-12s %-10s %-22s %-6s %-22s %-18s %-22s %10s %10s  %s\n", "tensor",
                "collective", "quantize", "exact", "payload differing", "scale differing", "bytes sent / bf16",
                "t_quant ms", "t_bf16 ms", "drift");
  o << line;
  std::int64_t bf16 = 0, sent = 0;
  for (const TensorReport& t : tensors) {
    const std::string quant = t.quantize.empty() ? "-" : t.quantize + (t.scale == "global" ? " (global)" : "");
    const std::string payload = std::to_string(t.payload_bytes_differing) + " of " + std::to_string(t.payload_bytes_total);
    const std::string scale = std::to_string(t.scale_bytes_differing) + " of " + std::to_string(t.scale_bytes_total);
    const std::string bytes = std::to_string(t.bytes_sent) + " / " + std::to_string(t.bytes_bf16) + " (" +
                              fmt("%.1f%%", t.bytes_bf16 ? 100.0 * static_cast<double>(t.bytes_sent) /
                                                               static_cast<double>(t.bytes_bf16)
                                                         : 0.0) +
                              ")";
    std::string drift = "-";
    if (t.differing_blocks > 0) {
      drift = std::to_string(t.differing_blocks) + " blocks, " + std::to_string(t.straddling_blocks) +
              " straddle a shard boundary" + (t.all_drift_at_boundaries ? " (all)" : " (NOT all)");
    }
    if (t.collective == "pool_mean")
      drift += "; uniform divisor: " + std::to_string(t.uniform_cells_differing) + " cells differ" +
               (t.uniform_cells_differing > 0 ? (t.uniform_differs_on_tail_only ? " (tail cell only)" : " (NOT tail only)") : "");
    std::snprintf(line, sizeof line, "%-12s %-10s %-22s %-6s %-22s %-18s %-22s %10.3f %10.3f  %s\n", t.name.c_str(),
                  t.collective.c_str(), quant.c_str(), t.exact_observed ? "yes" : "NO", payload.c_str(), scale.c_str(),
                  bytes.c_str(), 1e3 * t.time_quantized_s, 1e3 * t.time_bf16_s, drift.c_str());
    o << line;
    bf16 += t.bytes_bf16;
    sent += t.bytes_sent;
  }
  o << "total bytes sent per rank: " << sent << " of " << bf16 << " unquantized ("
    << fmt("%.2f%%", bf16 ? 100.0 * static_cast<double>(sent) / static_cast<double>(bf16) : 0.0) << ")\n";
  return o.str();
}

}  // namespace qexact::dist
