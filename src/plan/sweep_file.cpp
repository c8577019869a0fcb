// Reading a sweep file and predicting a collective's time from it.
#include "plan/sweep_file.hpp"

#include <cmath>
#include <sstream>

#include <nlohmann/json.hpp>

#include "io/read_file.hpp"
#include "qexact/error.hpp"

namespace qexact::plan {
namespace {

using Json = nlohmann::ordered_json;

[[noreturn]] void bad(const std::string& source, const std::string& field, const std::string& what) {
  fail(ErrorKind::bad_file, source + ": field '" + field + "': " + what);
}

const Json& need(const Json& j, const std::string& source, const std::string& field) {
  if (!j.contains(field)) bad(source, field, "missing");
  return j[field];
}

int get_count(const Json& j, const std::string& source, const std::string& field, int min) {
  const Json& v = need(j, source, field);
  if (!v.is_number_integer() || v.get<std::int64_t>() < min || v.get<std::int64_t>() > (1 << 30))
    bad(source, field, "must be an integer >= " + std::to_string(min) + ", got " + v.dump());
  return static_cast<int>(v.get<std::int64_t>());
}

double get_number(const Json& j, const std::string& source, const std::string& key, const std::string& field) {
  if (!j.contains(key)) bad(source, field, "missing");
  const Json& v = j[key];
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
    bad(source, field, "must be a finite number >= 0, got " + v.dump());
  return v.get<double>();
}

std::string fmt_seconds(double s) {
  std::ostringstream o;
  o.precision(4);
  o << s << " s";
  return o.str();
}

}  // namespace

SweepFile parse_sweep(const std::string& text, const std::string& source) {
  io::check_json_depth(text, io::kMaxJsonDepth, source);
  const Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) fail(ErrorKind::bad_file, source + ": not valid JSON");
  if (!j.is_object()) fail(ErrorKind::bad_file, source + ": a sweep file is a JSON object");
  const Json& format = need(j, source, "format");
  if (!format.is_string() || format.get<std::string>() != kSweepFormat)
    bad(source, "format", std::string("expected \"") + kSweepFormat + "\", got " + format.dump());
  SweepFile s;
  s.world = get_count(j, source, "world", 1);
  s.warmup = get_count(j, source, "warmup", 0);
  s.iterations = get_count(j, source, "iterations", 1);
  for (const char* field : {"mpi", "host"}) {
    const Json& v = need(j, source, field);
    if (!v.is_string()) bad(source, field, "must be a string, got " + v.dump());
  }
  s.mpi = j["mpi"].get<std::string>();
  s.host = j["host"].get<std::string>();
  const Json& colls = need(j, source, "collectives");
  if (!colls.is_object() || colls.empty()) bad(source, "collectives", "must be a non-empty object of measured collectives");
  for (const auto& [name, points] : colls.items()) {
    const std::string field = "collectives." + name;
    if (!points.is_array() || points.empty()) bad(source, field, "must be a non-empty array of points");
    std::vector<SweepPoint> out;
    for (std::size_t i = 0; i < points.size(); ++i) {
      const std::string pf = field + "[" + std::to_string(i) + "]";
      const Json& p = points[i];
      if (!p.is_object()) bad(source, pf, "must be an object");
      SweepPoint q;
      if (!p.contains("bytes")) bad(source, pf + ".bytes", "missing");
      const Json& b = p["bytes"];
      if (!b.is_number_integer() || b.get<std::int64_t>() < 1) bad(source, pf + ".bytes", "must be an integer >= 1, got " + b.dump());
      q.bytes = b.get<std::int64_t>();
      q.time_s = get_number(p, source, "time_s", pf + ".time_s");
      if (!(q.time_s > 0)) bad(source, pf + ".time_s", "must be > 0, got " + p["time_s"].dump());
      q.algbw_GBps = get_number(p, source, "algbw_GBps", pf + ".algbw_GBps");
      q.busbw_GBps = get_number(p, source, "busbw_GBps", pf + ".busbw_GBps");
      if (!out.empty() && q.bytes <= out.back().bytes)
        bad(source, pf + ".bytes", std::to_string(q.bytes) + " does not follow " + std::to_string(out.back().bytes) +
                                        " (sizes must increase strictly)");
      out.push_back(q);
    }
    s.collectives[name] = std::move(out);
  }
  return s;
}

SweepFile read_sweep_file(const std::filesystem::path& path) {
  return parse_sweep(io::read_json_text(path), path.string());
}

TimePrediction predict_time(const SweepFile& sweep, const std::string& collective, std::int64_t bytes) {
  const auto it = sweep.collectives.find(collective);
  if (it == sweep.collectives.end()) return {std::nullopt, collective + " was not measured in the sweep: no prediction"};
  const std::vector<SweepPoint>& p = it->second;
  if (bytes > p.back().bytes)
    return {std::nullopt, "beyond the measured sweep (max " + std::to_string(p.back().bytes) + " bytes): no prediction"};
  if (bytes <= p.front().bytes)
    return {p.front().time_s, "t0 = " + fmt_seconds(p.front().time_s) + " (at or below the smallest measured size, " +
                                  std::to_string(p.front().bytes) + " bytes)"};
  std::size_t i = 1;
  while (p[i].bytes < bytes) ++i;
  if (p[i].bytes == bytes) return {p[i].time_s, "measured at " + std::to_string(bytes) + " bytes"};
  const SweepPoint& lo = p[i - 1];
  const SweepPoint& hi = p[i];
  // Linear in time between the neighbours: equivalently t0 + bytes / B(bytes) with B measured.
  const double f = static_cast<double>(bytes - lo.bytes) / static_cast<double>(hi.bytes - lo.bytes);
  const double t = lo.time_s + (hi.time_s - lo.time_s) * f;
  return {t, "interpolated between " + std::to_string(lo.bytes) + " and " + std::to_string(hi.bytes) + " bytes"};
}

}  // namespace qexact::plan
