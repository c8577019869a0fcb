// Quantizing a whole checkpoint: every tensor whose name matches an `include` glob (default:
// all) and no `exclude` glob is quantized under the contract, the others pass through.
//
// Outputs, per quantized tensor <name>: <name>.<output> for every output of the contract
// (output_specs: payload, scale, then tensor_scale where the contract has one):
//   <name>.payload       the payload (safetensors F8_E4M3 / F8_E5M2 for MX and fp8.scaled E4M3 /
//                        E5M2 codes, U8 for the other MX codes and nvfp4 (E2M1 packed two per
//                        byte), I8 for the int8 families)
//   <name>.scale         the scales (F8_E8M0 for MX, F8_E4M3 for nvfp4, F32 for fp8.scaled, F32
//                        or F16 for the int8 families)
//   <name>.tensor_scale  F32 [], only for a contract with a tensor scale (nvfp4 tensor_scale=amax)
// all in the shapes and bytes `quantize()` gives for that tensor alone; every unmatched (or
// skipped) tensor unchanged under its own name; and metadata: the input's plus qexact.version,
// qexact.preset, qexact.param.<key> for every contract parameter, qexact.naming,
// qexact.quantized (JSON: name -> input dtype and shape) and qexact.skipped (JSON: name -> reason).
//
// A matched tensor the contract cannot take (a dtype other than F32/F16/BF16, a rank or length
// the contract rejects, values it forbids) is skipped with its reason and passed through; with
// `strict` that is an error naming the tensor. Checked before any tensor is quantized:
//   - an input whose metadata has qexact.quantized or qexact.preset (already quantized by
//     qexact) is refused: quantizing it again would skip its payloads and scales and replace
//     the metadata that dequantization needs;
//   - an output name that collides with an input tensor (`w` quantized while the input also
//     holds `w.payload`, `w.scale` or, for a contract with one, `w.tensor_scale`) is refused,
//     naming both.
// Errors are qexact::Error: bad_argument for the options, bad_input for those refusals, bad_file
// for a malformed file, io for the file system.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "qexact/contract.hpp"
#include "qexact/quantize.hpp"
#include "qexact/tensor.hpp"

namespace qexact::checkpoint {

// The qexact.naming metadata value: kNaming for the MX and int8 families, kNamingScaled for
// fp8.scaled and nvfp4 (naming(c) picks).
extern const char* const kNaming;
extern const char* const kNamingScaled;
const char* naming(const Contract& c);

struct Options {
  std::vector<std::string> include, exclude;  // fnmatch globs on tensor names ('*' crosses '.')
  bool strict = false;
  // quantize_file: an existing `out` is replaced (atomically) only when set (the CLI's --force);
  // otherwise it is a bad_argument error before any work.
  bool replace = false;
  RunOptions run;
};

// One quantized tensor's line of the summary. SQNR (dB) and the share of saturated elements are
// computed in double against the dequantized output; an element is saturated when it lies
// beyond its group's largest magnitude by more than rounding to that value accounts for.
struct TensorSummary {
  std::string name;
  Shape shape;
  DType dtype = DType::f32;
  double sqnr_db = 0, saturated_pct = 0;
  std::uint64_t bytes_in = 0, bytes_out = 0;
};

struct Summary {
  std::vector<TensorSummary> quantized;                      // by name
  std::vector<std::pair<std::string, std::string>> skipped;  // (name, reason), by name
  std::vector<std::string> copied;                           // unmatched, by name
};

// The table `qexact quantize` prints: one line per quantized tensor, one per skipped, a total.
std::string summary_text(const Summary& s);

// ---- a .safetensors file to a .safetensors file, streamed ----
//
// The header is checked before any data is read; tensors are then taken one at a time in file
// order (the next one prefetched) and written at their final offsets into a staged temporary
// beside `out` (tensors passed through are copied by the kernel), renamed over `out` at the end
// (nothing partial, ever). A tensor whose rows quantize on their own (every contract without a
// tensor-wide scale) is read, quantized, measured and written in chunks of rows, each thread
// its own chunk; others are read whole, quantized, then measured in chunks. Memory: the largest
// tensor's input and output plus a constant, whatever the file's size (per thread a chunk's,
// for the chunked tensors). A tensor
// whose *values* the contract refuses is found only while quantizing it: the file is then
// written again without it (two passes, only in that case).

enum class Stage { read, quantize, write };
struct Progress {
  Stage stage;
  std::string tensor;
  std::uint64_t done = 0, total = 0;  // input bytes done (whole tensors, or chunks of one), of all tensors
};
using ProgressFn = std::function<void(const Progress&)>;

struct FileResult {
  Summary summary;
  std::map<std::string, std::string> metadata;  // the output's
};

FileResult quantize_file(const Contract& c, const std::filesystem::path& src, const std::filesystem::path& out,
                         const Options& o, const ProgressFn& progress = {});

// ---- tensors in memory (a state_dict) ----

struct Input {
  std::string name;
  std::string dtype;  // safetensors dtype name: F32, F16, BF16 are quantized; others (I64, BOOL...) pass through
  TensorView view;    // the values (any strides) when dtype is F32/F16/BF16, of that dtype; else only its shape is read
};

struct Output {
  std::string name;   // <name>.payload, <name>.scale or <name>.tensor_scale
  std::string dtype;  // safetensors dtype name, as the file would hold it
  Tensor tensor;
};

struct TensorsResult {
  std::vector<Output> outputs;            // by name
  std::vector<std::string> passed_through;  // input names kept unchanged (unmatched and skipped), by name
  Summary summary;
  std::map<std::string, std::string> metadata;
};

// `metadata`: the input's (a file's __metadata__), kept in the result's.
TensorsResult quantize_tensors(const Contract& c, const std::vector<Input>& inputs,
                               const std::map<std::string, std::string>& metadata, const Options& o);

}  // namespace qexact::checkpoint
