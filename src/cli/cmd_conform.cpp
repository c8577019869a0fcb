// `qexact conform [--seed N]`: the conformance run (contracts §8), reference against candidate.
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "conformance/conform.hpp"

namespace qexact::cli {

void add_conform(CLI::App& app, Action& action) {
  auto opts = std::make_shared<conformance::ConformOptions>();
  CLI::App* sub = app.add_subcommand("conform", "Run the byte-for-byte conformance check and print its table");
  sub->add_option("--seed", opts->seed, "seed of the random inputs")->capture_default_str();
  sub->add_option("--preset", opts->presets, "check only this preset (repeatable; default: every preset)");
  sub->callback([opts, &action] { action = [opts] { return conformance::run_conform(*opts, std::cout); }; });
}

}  // namespace qexact::cli
