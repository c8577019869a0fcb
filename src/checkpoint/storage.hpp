// How a checkpoint stores its quantized tensors. By default qexact's own layout (qexact/
// checkpoint.hpp: <name>.<output> in the quantizer's dtypes and shapes, the qexact.* metadata);
// a loader's format (src/model/format.hpp) gives each output its own name, safetensors dtype and
// shape, the shard's metadata, and the tensor amax that fused shards share.
#pragma once
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/plan.hpp"

namespace qexact::checkpoint::detail {

struct Storage {
  // Which tensors are quantized, instead of Options' include / exclude globs.
  std::function<bool(const Source&)> selected;
  // The stored form of each output of a quantized tensor (one per output_specs entry, in order).
  std::function<std::vector<StoredOutput>(const Source&, const std::vector<OutputSpec>&)> outputs;
  // The output file's metadata, from the input's.
  std::function<std::map<std::string, std::string>(const std::map<std::string, std::string>& input,
                                                   const std::vector<Source>&, const Plan&)>
      metadata;
  // The tensor amax a tensor is quantized under when it is not its own (a fused group's), or none.
  std::function<std::optional<float>(const std::string& name)> tensor_amax;
  // Whether the contract quantizes a tensor with its last two axes swapped: gpt-oss keeps its
  // experts as [E, in, out], and its loader's MX blocks run along `in` of each output row.
  std::function<bool(const Source&)> transposed;
};

// The shape the contract quantizes a source tensor as (its own, or transposed).
Shape quantized_shape(const Storage* storage, const Source& s);

// The bytes an output is stored as: the tensor's own, or narrowed (bad_input naming the stored
// tensor and the first element that the narrower dtype does not hold exactly).
std::vector<std::uint8_t> stored_bytes(const Tensor& t, const StoredOutput& o);

// quantize_file (qexact/checkpoint.hpp) storing its outputs as `storage` says (qexact's layout
// when null).
FileResult quantize_file_stored(const Contract& c, const std::filesystem::path& src, const std::filesystem::path& out,
                                const Options& o, const ProgressFn& progress, const Storage* storage);

}  // namespace qexact::checkpoint::detail
