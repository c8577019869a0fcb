// A quantized model folder as a lab (conformance/case_dir.hpp) that `qexact infer` and
// `qexact compare` read: one case per chosen quantized tensor, its input the source tensor as
// the recipe quantizes it (gpt-oss experts transposed), its device outputs the folder's stored
// tensors turned back into the contract's payload, scale and tensor scale. The manifest's
// contract is the one the folder's config names, where infer's search starts.
//
// The tensors: the smallest quantized ones (infer reruns every candidate contract on each), but
// not fused shards of a format that quantizes them under their group's amax: a lab case is one
// tensor, quantized under its own.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace qexact::model {

struct FolderLabOptions {
  std::string preset;    // "" : the folder's own recipe
  int max_tensors = 4;
};

// Writes the lab into `lab` (a new directory) and returns the tensors it holds, by case name.
std::vector<std::string> write_folder_lab(const std::filesystem::path& quantized, const std::filesystem::path& source,
                                          const std::filesystem::path& lab, const FolderLabOptions& o);

}  // namespace qexact::model
