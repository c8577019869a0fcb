// The sweep file written by `qexact sweep` (collective time against message size, nccl-tests
// definitions) and the time it predicts for a message: piecewise-linear in the measured times
// between neighbouring sizes, the smallest size's time t0 below the sweep, and no prediction
// beyond its largest size (bandwidth is never extrapolated).
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace qexact::plan {

inline constexpr const char* kSweepFormat = "qexact-sweep/1";

struct SweepPoint {
  std::int64_t bytes = 0;  // nccl-tests "size": all_gather the gathered total, all_to_all one rank's send buffer
  double time_s = 0;       // median over timed iterations of the max over ranks
  double algbw_GBps = 0;
  double busbw_GBps = 0;
};

struct SweepFile {
  int world = 0;
  std::string mpi, host;
  int warmup = 0, iterations = 0;
  // collective name -> points in strictly increasing size
  std::map<std::string, std::vector<SweepPoint>> collectives;
};

// Throws Error(bad_file) naming the field (and the point's index) on anything malformed:
// wrong format tag, sizes not strictly increasing, a time that is not positive and finite.
SweepFile parse_sweep(const std::string& text, const std::string& source);
SweepFile read_sweep_file(const std::filesystem::path& path);

struct TimePrediction {
  std::optional<double> seconds;  // absent: no prediction (note says why)
  std::string note;               // how it was obtained, or why there is none
};

// Predicted time of one `collective` of `bytes` (the sweep's size convention).
TimePrediction predict_time(const SweepFile& sweep, const std::string& collective, std::int64_t bytes);

}  // namespace qexact::plan
