// `qexact quantize` of a whole .safetensors checkpoint: every tensor whose name matches an
// --include glob (default: all) and no --exclude glob is quantized under the contract; the
// output is ONE .safetensors file, written atomically, holding
//   <name>.payload  the payload (F8_E4M3 / F8_E5M2 for MX E4M3 / E5M2 codes, U8 for the other
//                   MX codes (E2M1 packed two per byte), I8 for the int8 families)
//   <name>.scale    the scales (F8_E8M0 for MX, F32 or F16 for the int8 families)
// both in the shapes and bytes `qexact quantize` writes for that tensor as a .npy file, every
// unmatched (or skipped) tensor copied through unchanged under its own name, and __metadata__:
// the input's metadata plus qexact.preset, qexact.param.<key> for every contract parameter,
// qexact.naming, qexact.quantized (JSON: name -> input dtype and shape) and qexact.skipped
// (JSON: name -> reason).
//
// A matched tensor the contract cannot take (a dtype other than F32/F16/BF16, a rank or length
// the contract rejects, values it forbids) is skipped with its reason and copied through; with
// `strict` that is an error naming the tensor, and nothing is written.
#pragma once
#include <iosfwd>
#include <string>
#include <vector>

#include "qexact/contract.hpp"
#include "qexact/quantize.hpp"

namespace qexact::cli {

inline constexpr const char* kCheckpointNaming =
    "<name>.payload: payload codes (F8_E4M3/F8_E5M2 for MX E4M3/E5M2, U8 for other MX elements with E2M1 packed "
    "two per byte, I8 for int8); <name>.scale: scales (F8_E8M0 for MX, F32/F16 for int8); both as `qexact "
    "quantize` writes them for the tensor alone; other tensors copied unchanged";

struct CheckpointOptions {
  std::string input, output;
  std::vector<std::string> include, exclude;  // fnmatch globs on tensor names ('*' crosses '.')
  bool strict = false;
  RunOptions run;
};

// Quantizes the checkpoint and prints the per-tensor summary on `out`; a progress bar goes to
// stderr when stderr is a terminal. Returns the exit status (0).
int quantize_checkpoint(const Contract& c, const CheckpointOptions& o, std::ostream& out);

}  // namespace qexact::cli
