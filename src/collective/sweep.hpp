// `qexact sweep`: the time of all_gather and all_to_all against message size, nccl-tests style
// (sizes in x2 steps, warm-up then timed iterations, algbw and busbw), in the sweep format that
// `qexact plan` reads to predict a collective's time.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "collective/mpi_world.hpp"

namespace qexact::dist {

struct SweepOptions {
  std::int64_t min_bytes = 8;
  std::int64_t max_bytes = 268435456;
  int warmup = 5;
  int iterations = 20;
  std::vector<std::string> collectives{"all_gather", "all_to_all"};
};

struct SweepPoint {
  std::int64_t bytes = 0;  // nccl-tests "size"
  double time_s = 0.0;     // median of the slowest rank's time
  double algbw_GBps = 0.0, busbw_GBps = 0.0;
};

struct SweepResult {
  std::vector<std::pair<std::string, std::vector<SweepPoint>>> curves;
};

// Checks the options (throws bad_argument) without running anything.
void check_sweep_options(const SweepOptions& o);
SweepResult run_sweep(const MpiSession& s, const SweepOptions& o);
nlohmann::ordered_json sweep_json(const MpiSession& s, const SweepOptions& o, const SweepResult& r);
std::string sweep_table(const MpiSession& s, const SweepResult& r);

}  // namespace qexact::dist
