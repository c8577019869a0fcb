#include "collective/sweep.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "perf/measure.hpp"
#include "qexact/error.hpp"

namespace qexact::dist {
namespace {

SweepPoint measure(const MpiSession& s, const std::string& collective, std::int64_t bytes, const SweepOptions& o) {
  const auto world = static_cast<std::size_t>(s.world());
  // all_gather: bytes is the gathered total, each rank contributes bytes / world; all_to_all:
  // bytes is each rank's send buffer, bytes / world to each peer. Sizes round down per rank.
  const std::size_t per = static_cast<std::size_t>(bytes) / world;
  std::vector<std::uint8_t> send(collective == "all_gather" ? per : per * world, std::uint8_t{1});
  std::vector<std::uint8_t> recv(per * world);
  auto op = [&] {
    if (collective == "all_gather")
      all_gather_equal(s, send.data(), per, recv.data());
    else
      all_to_all_equal(s, send.data(), per, recv.data());
  };
  for (int i = 0; i < o.warmup; ++i) op();
  std::vector<double> t(static_cast<std::size_t>(o.iterations));
  for (int i = 0; i < o.iterations; ++i) {
    barrier(s);
    const double start = perf::steady_seconds();
    op();
    t[static_cast<std::size_t>(i)] = perf::steady_seconds() - start;
  }
  all_reduce_max(s, t);
  SweepPoint p;
  p.bytes = bytes;
  p.time_s = perf::median(t);
  p.algbw_GBps = p.time_s > 0 ? static_cast<double>(bytes) / p.time_s / 1e9 : 0.0;
  p.busbw_GBps = p.algbw_GBps * static_cast<double>(s.world() - 1) / static_cast<double>(s.world());
  return p;
}

}  // namespace

void check_sweep_options(const SweepOptions& o) {
  if (o.min_bytes < 1) fail(ErrorKind::bad_argument, "--min-bytes must be >= 1, got " + std::to_string(o.min_bytes));
  if (o.max_bytes < o.min_bytes)
    fail(ErrorKind::bad_argument, "--max-bytes " + std::to_string(o.max_bytes) + " is below --min-bytes " +
                                      std::to_string(o.min_bytes));
  if (o.max_bytes > (std::int64_t{1} << 31) - 1)
    fail(ErrorKind::bad_argument, "--max-bytes " + std::to_string(o.max_bytes) + " exceeds one MPI call (2^31 - 1)");
  if (o.warmup < 0) fail(ErrorKind::bad_argument, "--warmup must be >= 0");
  if (o.iterations < 1) fail(ErrorKind::bad_argument, "--iterations must be >= 1");
  if (o.collectives.empty()) fail(ErrorKind::bad_argument, "--collectives names none");
  for (const std::string& c : o.collectives)
    if (c != "all_gather" && c != "all_to_all")
      fail(ErrorKind::bad_argument, "--collectives: unknown collective '" + c + "' (all_gather, all_to_all)");
}

SweepResult run_sweep(const MpiSession& s, const SweepOptions& o) {
  SweepResult r;
  for (const std::string& c : o.collectives) {
    std::vector<SweepPoint> curve;
    for (std::int64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= 2) curve.push_back(measure(s, c, bytes, o));
    r.curves.emplace_back(c, std::move(curve));
  }
  return r;
}

nlohmann::ordered_json sweep_json(const MpiSession& s, const SweepOptions& o, const SweepResult& r) {
  nlohmann::ordered_json j;
  j["format"] = "qexact-sweep/1";
  j["world"] = s.world();
  j["mpi"] = mpi_library_version();
  j["host"] = processor_name();
  j["warmup"] = o.warmup;
  j["iterations"] = o.iterations;
  nlohmann::ordered_json curves = nlohmann::ordered_json::object();
  for (const auto& [name, points] : r.curves) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const SweepPoint& p : points)
      list.push_back({{"bytes", p.bytes}, {"time_s", p.time_s}, {"algbw_GBps", p.algbw_GBps}, {"busbw_GBps", p.busbw_GBps}});
    curves[name] = list;
  }
  j["collectives"] = curves;
  return j;
}

std::string sweep_table(const MpiSession& s, const SweepResult& r) {
  std::ostringstream o;
  char line[256];
  o << "qexact sweep: " << s.world() << " ranks, " << mpi_library_version() << " on " << processor_name() << "\n";
  std::snprintf(line, sizeof line, "%-11s %12s %12s %12s %12s\n", "collective", "bytes", "time us", "algbw GB/s",
                "busbw GB/s");
  o << line;
  for (const auto& [name, points] : r.curves)
    for (const SweepPoint& p : points) {
      std::snprintf(line, sizeof line, "%-11s %12lld %12.2f %12.4f %12.4f\n", name.c_str(),
                    static_cast<long long>(p.bytes), p.time_s * 1e6, p.algbw_GBps, p.busbw_GBps);
      o << line;
    }
  return o.str();
}

}  // namespace qexact::dist
