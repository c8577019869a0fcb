// The qexact command-line tool: one add_* per subcommand (cmd_*.cpp), each registering its
// options on the CLI11 app and, once its arguments parse, setting the Action main() runs.
// Commands check their output places before any work (io/output_guard.hpp: no link, special
// file or input replaced, a writable place, --force for an existing directory), compute every
// output before writing any, then publish them atomically (io/atomic_file.hpp); a failure is a
// qexact::Error that main() prints as one line, with exit status 2.
#pragma once
#include <filesystem>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "qexact/quantize.hpp"
#include "qexact/tensor.hpp"

namespace qexact::cli {

// Kept equal to project(VERSION) in CMakeLists.txt unless CMake defines it.
#ifndef QEXACT_VERSION
#define QEXACT_VERSION "0.1.0"
#endif
inline constexpr const char* kVersion = QEXACT_VERSION;

// The work of the subcommand that parsed; returns the exit status.
using Action = std::function<int()>;

void add_presets(CLI::App& app, Action& action);
void add_quantize(CLI::App& app, Action& action);
void add_dequantize(CLI::App& app, Action& action);
void add_fake_quant(CLI::App& app, Action& action);
void add_hif4_pack(CLI::App& app, Action& action);
void add_hif4_unpack(CLI::App& app, Action& action);
void add_conform(CLI::App& app, Action& action);
void add_bench(CLI::App& app, Action& action);
void add_plan(CLI::App& app, Action& action);
void add_cases(CLI::App& app, Action& action);
void add_emulate(CLI::App& app, Action& action);
void add_infer(CLI::App& app, Action& action);
void add_compare(CLI::App& app, Action& action);
void add_verify(CLI::App& app, Action& action);
#ifdef QEXACT_WITH_MPI
// Under mpirun (src/cli/mpi/): built only with -DQEXACT_WITH_MPI=ON.
void add_collective(CLI::App& app, Action& action);
void add_sweep(CLI::App& app, Action& action);
#endif

// ---- shared by the commands (cli_io.cpp) ----

// --engine reference|fast (default fast) and --threads N (default 0: QEXACT_THREADS, else one per
// core) on the commands that run a kernel (cli_engine.cpp).
struct EngineArgs {
  std::string engine = "fast";
  int threads = 0;
  RunOptions options() const;
};
void add_engine_options(CLI::App& sub, EngineArgs& args);

// --dtype on the commands that read a float tensor: "" (the file's dtype), "f32", "f16", "bf16".
CLI::Option* add_dtype_option(CLI::App& sub, std::string& dtype);

// A float input tensor from a .npy file. With --dtype bf16 a '<u2' array is read as bf16 bit
// patterns; an f32 or f16 array must match --dtype when it is given. Anything else (including a
// '<u2' array without --dtype bf16) is a bad_argument error naming the file.
Tensor read_float_input(const std::filesystem::path& path, const std::string& dtype);

// The bytes of .npy file `source` as a tensor whose dtype must be `expected` (as recorded in
// meta.json; bf16 from '<u2'); ErrorKind::bad_file otherwise.
Tensor decode_npy_expecting(std::span<const std::uint8_t> bytes, DType expected, const std::string& source);

// JSON from the bytes of file `path` (named in the error); malformed JSON is ErrorKind::bad_file.
nlohmann::ordered_json parse_json(std::span<const std::uint8_t> bytes, const std::filesystem::path& path);

}  // namespace qexact::cli
