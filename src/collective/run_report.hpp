// The run report of `qexact collective`: JSON (--json / --report) and a text table.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "collective/collective_run.hpp"

namespace qexact::dist {

struct RunContext {
  int world = 1;
  std::uint64_t seed = 1;
  int iterations = 1;
  std::string plan;
  std::string mpi;
};

nlohmann::ordered_json report_json(const RunContext& ctx, const std::vector<TensorReport>& tensors);
std::string report_table(const RunContext& ctx, const std::vector<TensorReport>& tensors);

}  // namespace qexact::dist
