// qexact: quantize tensors bit for bit as real hardware and frameworks do.
//
// Exit status: 0 on success; 2 for a usage error, bad input or a file problem, with one line
// "qexact: error: ..." on stderr and no output written; 1 for an internal error. `conform`
// and `compare` return their own status (0 when every byte matched, 1 when bytes differ); so
// does `infer` (0 exact, 1 closest only).
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <new>

#include "cli/commands.hpp"
#include "cli/omp_wait.hpp"

namespace {

constexpr int kBadInput = 2;
constexpr int kInternalError = 1;

int report(const char* prefix, std::string message, int status) {
  std::replace(message.begin(), message.end(), '\n', ' ');
  // One write of the whole line: under mpirun every rank reports, and pieces written one by one
  // interleave with the other ranks' ("qexact: qexact: error: ...").
  const std::string line = "qexact: " + std::string(prefix) + message + "\n";
  std::cerr.write(line.data(), static_cast<std::streamsize>(line.size()));
  std::cerr.flush();
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace qexact::cli;
  default_omp_spin_count(argv);
  CLI::App app{"qexact: bit-exact quantizers (MX, FP8 with fp32 scales, NVFP4, int8, ggml Q8_0, HiFloat4) and their conformance check", "qexact"};
  app.set_version_flag("--version", kVersion);
  // Left to main (not require_subcommand) so that a misspelt command is named in the error.
  app.require_subcommand(0, 1);
  Action action;
  add_presets(app, action);
  add_quantize(app, action);
  add_dequantize(app, action);
  add_fake_quant(app, action);
  add_hif4_pack(app, action);
  add_hif4_unpack(app, action);
  add_conform(app, action);
  add_bench(app, action);
  add_plan(app, action);
  add_cases(app, action);
  add_emulate(app, action);
  add_infer(app, action);
  add_compare(app, action);
  add_verify(app, action);
#ifdef QEXACT_WITH_MPI
  add_collective(app, action);
  add_sweep(app, action);
#endif

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);  // --help, --version
    return report("error: ", e.what(), kBadInput);
  }

  if (!action) return report("error: ", "a command is required (see `qexact --help`)", kBadInput);
  try {
    return action();
  } catch (const qexact::Error& e) {
    return report("error: ", e.what(), kBadInput);
  } catch (const std::filesystem::filesystem_error& e) {
    return report("error: ", e.what(), kBadInput);
  } catch (const std::bad_alloc&) {
    return report("error: ", "out of memory", kBadInput);
  } catch (const std::exception& e) {
    return report("internal error: ", e.what(), kInternalError);
  }
}
