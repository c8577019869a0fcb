// `qexact presets`: every named contract, its one-line description and all its parameters.
#include <iostream>

#include "cli/commands.hpp"
#include "qexact/contract.hpp"

namespace qexact::cli {
namespace {

int run_presets() {
  for (const std::string& name : preset_names()) {
    std::cout << name << "  " << preset_description(name) << "  [verified against: " << preset_verified(name)
              << "]\n   ";
    for (const auto& [key, value] : params(make_preset(name))) std::cout << ' ' << key << '=' << value;
    std::cout << '\n';
  }
  std::cout << std::flush;
  return 0;
}

}  // namespace

void add_presets(CLI::App& app, Action& action) {
  CLI::App* sub = app.add_subcommand("presets", "List the named contracts with their parameters");
  sub->callback([&action] { action = run_presets; });
}

}  // namespace qexact::cli
