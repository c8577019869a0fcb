// --engine and --threads: which implementation runs and on how many threads (RunOptions).
#include "cli/commands.hpp"

namespace qexact::cli {

RunOptions EngineArgs::options() const { return RunOptions{parse_engine(engine), threads}; }

void add_engine_options(CLI::App& sub, EngineArgs& args) {
  sub.add_option("--engine", args.engine,
                 "fast (SIMD, threads) or reference (scalar, written to be obviously correct); same bytes")
      ->check(CLI::IsMember({"fast", "reference"}))
      ->capture_default_str();
  sub.add_option("--threads", args.threads, "threads for the fast engine (0: QEXACT_THREADS, else one per core)")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
}

}  // namespace qexact::cli
