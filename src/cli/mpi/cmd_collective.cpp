// `mpirun -np W qexact collective PLAN.json [--json] [--report FILE] [--seed N] [--iterations N]
// [--threads N] [--fail-rank R]`: runs the plan's collectives with and without quantizing
// first, on the same synthetic tensors, and reports bytes, times and byte-exactness (see
// collective/collective_run.hpp). Only rank 0 prints or writes; an error is reported by every rank.
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "collective/collective_run.hpp"
#include "collective/mpi_world.hpp"
#include "collective/run_report.hpp"
#include "io/atomic_file.hpp"

namespace qexact::cli {
namespace {

struct CollectiveArgs {
  std::string plan;
  bool json = false;
  std::string report;
  std::uint64_t seed = 1;
  int iterations = 10;
  int threads = 1;
  int fail_rank = -1;
};

int run_collective(const dist::MpiSession& s, const CollectiveArgs& a) {
  dist::CollectiveOptions o;
  o.seed = a.seed;
  o.iterations = a.iterations;
  o.fail_rank = a.fail_rank;
  o.run = RunOptions{Engine::fast, a.threads};
  // Every rank checks the report's place before the run: an unwritable one is found now, not after it.
  if (!a.report.empty()) dist::agree_on(s, [&] { io::check_output_file(a.report, {a.plan}); });
  const std::vector<dist::TensorReport> reports = dist::run_collective_plan(s, a.plan, o);

  dist::RunContext ctx{s.world(), a.seed, a.iterations, a.plan, dist::mpi_library_version()};
  dist::agree_on(s, [&] {
    if (s.rank() != 0) return;
    const std::string json = dist::report_json(ctx, reports).dump(2) + "\n";
    if (!a.report.empty())
      io::write_file_atomic(a.report, {reinterpret_cast<const std::uint8_t*>(json.data()), json.size()});
    std::cout << (a.json ? json : dist::report_table(ctx, reports)) << std::flush;
  });
  return 0;
}

}  // namespace

void add_collective(CLI::App& app, Action& action) {
  auto a = std::make_shared<CollectiveArgs>();
  CLI::App* sub = app.add_subcommand(
      "collective", "Under mpirun: quantize before all_gather / all_to_all (and the pooled side channel) and check "
                    "the result byte for byte against gather-then-quantize");
  sub->add_option("plan", a->plan, "collective plan PLAN.json")->required();
  sub->add_flag("--json", a->json, "print the report as JSON instead of a table");
  sub->add_option("--report", a->report, "also write the JSON report to FILE (atomically)");
  sub->add_option("--seed", a->seed, "seed of the synthetic tensors (default 1)");
  sub->add_option("--iterations", a->iterations, "timed iterations per tensor (default 10)");
  sub->add_option("--threads", a->threads, "quantizer threads per rank (default 1: one rank per core)")
      ->check(CLI::Range(0, 4096));
  sub->add_option("--fail-rank", a->fail_rank,
                  "test hook: rank R fails while preparing, to check that every rank reports it and exits")
      ->check(CLI::Range(-1, 1 << 20));
  sub->callback([a, &action] { action = [a] { return dist::run_mpi_command([&](const dist::MpiSession& s) { return run_collective(s, *a); }); }; });
}

}  // namespace qexact::cli
