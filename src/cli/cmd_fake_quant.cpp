// `qexact fake-quant --preset hif4 [--qdim N] [--dtype D] [--engine E] [--threads N] IN.npy
// --out OUT.npy`: FP -> HiF4 -> FP along axis qdim; the output has the input's shape and dtype
// (bf16 written as '<u2').
#include <memory>

#include "cli/commands.hpp"
#include "io/atomic_file.hpp"
#include "io/npy.hpp"
#include "qexact/quantize.hpp"

namespace qexact::cli {
namespace {

struct FakeQuantOptions {
  std::string preset;
  CLI::Option* qdim_given = nullptr;
  int qdim = -1;
  std::string dtype;
  std::string input;
  std::string out;
  EngineArgs engine;
};

int run_fake_quant(const FakeQuantOptions& o) {
  std::vector<std::string> overrides;
  if (*o.qdim_given) overrides.push_back("qdim=" + std::to_string(o.qdim));
  const Contract c = make_contract(o.preset, overrides);
  if (c.family != Family::hif4)
    fail(ErrorKind::bad_argument, "fake-quant takes a hif4 preset; '" + o.preset + "' is a " +
                                      family_name(c.family) + " preset (use quantize)");
  io::check_output_file(o.out, {o.input});
  const Tensor x = read_float_input(o.input, o.dtype);
  const Tensor y = hifloat4_fake_quant(x.view(), c.qdim, o.engine.options());
  io::write_file_atomic(o.out, npy::encode(y.view()));
  return 0;
}

}  // namespace

void add_fake_quant(CLI::App& app, Action& action) {
  auto opts = std::make_shared<FakeQuantOptions>();
  CLI::App* sub = app.add_subcommand("fake-quant", "HiFloat4 fake quantization (FP -> HiF4 -> FP) of a .npy tensor");
  sub->add_option("--preset", opts->preset, "a hif4 preset (see `qexact presets`)")->required();
  opts->qdim_given = sub->add_option("--qdim", opts->qdim, "axis of the 64-element blocks (negative from the end)");
  add_dtype_option(*sub, opts->dtype);
  add_engine_options(*sub, opts->engine);
  sub->add_option("input", opts->input, "input tensor IN.npy")->required();
  sub->add_option("--out", opts->out, "output OUT.npy (same dtype as the input)")->required();
  sub->callback([opts, &action] { action = [opts] { return run_fake_quant(*opts); }; });
}

}  // namespace qexact::cli
