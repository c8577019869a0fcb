// `qexact emulate --preset P [--param key=value ...] DIR`: plays a device. Runs the contract
// over every case of an exported DIR and writes its outputs beside each input (the files
// `qexact quantize --out DIR/<case>` writes; output.npy for HiF4); the cases it refuses get no
// outputs and are listed. Made from a deliberately altered contract, it is a synthetic device
// for compare and infer.
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "conformance/emulate.hpp"

namespace qexact::cli {
namespace {

struct EmulateOptions {
  std::string preset;
  std::vector<std::string> params;
  std::string dir;
  EngineArgs engine;
};

int run_emulate(const EmulateOptions& o) {
  const Contract c = make_contract(o.preset, o.params);
  const conformance::EmulateReport r = conformance::emulate_case_dir(o.dir, c, o.engine.options());
  std::cout << "wrote the outputs of " << r.written.size() << " cases into " << o.dir << "\n";
  if (!r.rejected.empty()) {
    std::cout << r.rejected.size() << " cases refused (no outputs):\n";
    for (const auto& [name, why] : r.rejected) std::cout << "  " << name << ": " << why << "\n";
  }
  return 0;
}

}  // namespace

void add_emulate(CLI::App& app, Action& action) {
  auto opts = std::make_shared<EmulateOptions>();
  CLI::App* sub = app.add_subcommand("emulate", "Play a device: run a contract over exported cases, write its outputs");
  sub->add_option("--preset", opts->preset, "named contract (see `qexact presets`)")->required();
  sub->add_option("--param", opts->params, "override one contract parameter: key=value (repeatable)")
      ->allow_extra_args(false);
  add_engine_options(*sub, opts->engine);
  sub->add_option("dir", opts->dir, "a directory written by `qexact cases`")->required();
  sub->callback([opts, &action] { action = [opts] { return run_emulate(*opts); }; });
}

}  // namespace qexact::cli
