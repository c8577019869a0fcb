// `qexact hif4-pack IN.npy --out DIR` (DIR/scale.npy, DIR/value.npy) and
// `qexact hif4-unpack DIR --out OUT.npy` (fp32): HiFloat4 storage (contracts §5). Both take
// --engine and --threads.
#include <memory>

#include "cli/commands.hpp"
#include "io/atomic_file.hpp"
#include "io/dir_files.hpp"
#include "io/npy.hpp"
#include "qexact/quantize.hpp"

namespace qexact::cli {
namespace {

constexpr const char* kHif4ScaleFile = "scale.npy";
constexpr const char* kHif4ValueFile = "value.npy";

struct PackOptions {
  std::string dtype;
  std::string input;
  std::string out;
  EngineArgs engine;
  bool force = false;
};

struct UnpackOptions {
  std::string dir;
  std::string out;
  EngineArgs engine;
};

int run_pack(const PackOptions& o) {
  io::OutputDir out(o.out, {kHif4ScaleFile, kHif4ValueFile}, o.force, {o.input});
  const Tensor x = read_float_input(o.input, o.dtype);
  const Hif4Packed packed = hif4_pack(x.view(), o.engine.options());
  out.add(kHif4ScaleFile, npy::encode(packed.scale.view()));
  out.add(kHif4ValueFile, npy::encode(packed.value.view()));
  out.publish();
  return 0;
}

int run_unpack(const UnpackOptions& o) {
  const std::filesystem::path dir = o.dir;
  io::check_output_file(o.out, {dir / kHif4ScaleFile, dir / kHif4ValueFile});
  // One directory handle for both files: a directory replaced meanwhile is never read half old, half new.
  const io::DirFiles files(dir);
  auto read_u8 = [&](const char* name) { return decode_npy_expecting(files.read(name), DType::u8, files.path(name).string()); };
  const Tensor scale = read_u8(kHif4ScaleFile);
  const Tensor value = read_u8(kHif4ValueFile);
  const Tensor x = hif4_unpack(scale.view(), value.view(), o.engine.options());
  io::write_file_atomic(o.out, npy::encode(x.view()));
  return 0;
}

}  // namespace

void add_hif4_pack(CLI::App& app, Action& action) {
  auto opts = std::make_shared<PackOptions>();
  CLI::App* sub = app.add_subcommand("hif4-pack", "Pack a 2-D tensor (columns % 64 == 0) into HiFloat4 storage");
  add_dtype_option(*sub, opts->dtype);
  sub->add_option("input", opts->input, "input tensor IN.npy")->required();
  sub->add_option("--out", opts->out, "output directory: scale.npy (u1), value.npy (u1)")->required();
  add_engine_options(*sub, opts->engine);
  sub->add_flag("--force", opts->force,
                "replace an existing output directory (atomically, as a whole; only one holding just scale.npy "
                "and value.npy)");
  sub->callback([opts, &action] { action = [opts] { return run_pack(*opts); }; });
}

void add_hif4_unpack(CLI::App& app, Action& action) {
  auto opts = std::make_shared<UnpackOptions>();
  CLI::App* sub = app.add_subcommand("hif4-unpack", "fp32 values of a `qexact hif4-pack` output directory");
  sub->add_option("dir", opts->dir, "directory written by `qexact hif4-pack`")->required();
  sub->add_option("--out", opts->out, "output OUT.npy (fp32)")->required();
  add_engine_options(*sub, opts->engine);
  sub->callback([opts, &action] { action = [opts] { return run_unpack(*opts); }; });
}

}  // namespace qexact::cli
