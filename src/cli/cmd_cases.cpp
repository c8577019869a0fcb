// `qexact cases --preset P [--param key=value ...] --out DIR [--seed N]`: exports the contract's
// adversarial cases, activation set and discriminating probes (conformance/suite.hpp) as
// DIR/manifest.json + DIR/<case>/input.npy, for a device to run. DIR must not exist.
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "conformance/suite.hpp"
#include "io/output_guard.hpp"

namespace qexact::cli {
namespace {

struct CasesOptions {
  std::string preset;
  std::vector<std::string> params;
  std::string out;
  std::uint64_t seed = 1;
};

int run_cases(const CasesOptions& o) {
  const Contract c = make_contract(o.preset, o.params);
  std::error_code ec;
  if (std::filesystem::exists(o.out, ec))
    fail(ErrorKind::bad_argument, o.out + " already exists: cases are exported into a new directory");
  io::check_output_dir(o.out, {}, /*force=*/false);  // before the suite is built
  const conformance::Suite suite = conformance::build_suite(c, o.seed);
  const std::vector<conformance::ExportCase> cases = suite.exported();
  conformance::write_case_dir(o.out, c, cases);
  std::int64_t rejections = 0;
  for (const auto& e : cases) rejections += e.c->expect_error.has_value();
  std::cout << "wrote " << cases.size() << " cases to " << o.out << " (" << suite.adversarial.size() << " adversarial, "
            << suite.activation.size() << " activation, " << suite.probes.size() << " probes; " << rejections
            << " the contract must refuse)\n";
  return 0;
}

}  // namespace

void add_cases(CLI::App& app, Action& action) {
  auto opts = std::make_shared<CasesOptions>();
  CLI::App* sub = app.add_subcommand("cases", "Export the adversarial cases and discriminating probes for a device");
  sub->add_option("--preset", opts->preset, "named contract (see `qexact presets`)")->required();
  sub->add_option("--param", opts->params, "override one contract parameter: key=value (repeatable)")
      ->allow_extra_args(false);
  sub->add_option("--out", opts->out, "output directory (must not exist)")->required();
  sub->add_option("--seed", opts->seed, "seed of the random inputs")->capture_default_str();
  sub->callback([opts, &action] { action = [opts] { return run_cases(*opts); }; });
}

}  // namespace qexact::cli
