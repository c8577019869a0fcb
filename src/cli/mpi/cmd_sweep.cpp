// `mpirun -np W qexact sweep --out sweep.json [--min-bytes 8] [--max-bytes 268435456]
// [--warmup N] [--iterations N] [--collectives all_gather,all_to_all]`: the message-size sweep
// (collective/sweep.hpp), written atomically by rank 0, with a table on stdout.
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "collective/mpi_world.hpp"
#include "collective/sweep.hpp"
#include "io/atomic_file.hpp"

namespace qexact::cli {
namespace {

struct SweepArgs {
  std::string out;
  dist::SweepOptions options;
};

int run_sweep_command(const dist::MpiSession& s, const SweepArgs& a) {
  dist::agree_on(s, [&] {
    dist::check_sweep_options(a.options);
    io::check_output_file(a.out);  // on every rank, before the run
  });
  dist::SweepResult r;
  dist::or_abort(s, [&] { r = dist::run_sweep(s, a.options); });
  dist::agree_on(s, [&] {
    if (s.rank() != 0) return;
    const std::string json = dist::sweep_json(s, a.options, r).dump(2) + "\n";
    io::write_file_atomic(a.out, {reinterpret_cast<const std::uint8_t*>(json.data()), json.size()});
    std::cout << dist::sweep_table(s, r) << std::flush;
  });
  return 0;
}

}  // namespace

void add_sweep(CLI::App& app, Action& action) {
  auto a = std::make_shared<SweepArgs>();
  CLI::App* sub = app.add_subcommand(
      "sweep", "Under mpirun: time all_gather and all_to_all from --min-bytes to --max-bytes in x2 steps (nccl-tests "
               "algbw / busbw) and write the sweep file `qexact plan` reads");
  sub->add_option("--out", a->out, "sweep file to write (JSON)")->required();
  sub->add_option("--min-bytes", a->options.min_bytes, "smallest message size (default 8)");
  sub->add_option("--max-bytes", a->options.max_bytes, "largest message size (default 268435456 = 256 MiB)");
  sub->add_option("--warmup", a->options.warmup, "untimed iterations per size (default 5)");
  sub->add_option("--iterations", a->options.iterations, "timed iterations per size (default 20)");
  sub->add_option("--collectives", a->options.collectives, "comma-separated: all_gather, all_to_all (default both)")
      ->delimiter(',');
  sub->callback([a, &action] { action = [a] { return dist::run_mpi_command([&](const dist::MpiSession& s) { return run_sweep_command(s, *a); }); }; });
}

}  // namespace qexact::cli
