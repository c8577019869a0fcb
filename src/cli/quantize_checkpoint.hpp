// `qexact quantize` of a whole .safetensors checkpoint: the library's checkpoint::quantize_file
// (qexact/checkpoint.hpp says what the output holds), with a progress bar on a terminal and
// the per-tensor summary on stdout.
#pragma once
#include <iosfwd>
#include <string>
#include <vector>

#include "qexact/checkpoint.hpp"
#include "qexact/model.hpp"

namespace qexact::cli {

struct CheckpointOptions {
  std::string input, output;
  checkpoint::Options options;
};

// Quantizes the checkpoint and prints the per-tensor summary on `out`; a progress bar goes to
// stderr when stderr is a terminal. Returns the exit status (0).
int quantize_checkpoint(const Contract& c, const CheckpointOptions& o, std::ostream& out);

struct FolderCliOptions {
  std::string input, output;
  model::FolderOptions options;
};

// The same for a model folder (qexact/model.hpp): one bar across its shards.
int quantize_model_folder(const Contract& c, const FolderCliOptions& o, std::ostream& out);

}  // namespace qexact::cli
