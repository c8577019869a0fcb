// A model folder as transformers, vLLM and llm-compressor write it: config.json, the weights in
// one `model.safetensors` or in shards listed by `model.safetensors.index.json` (its
// "weight_map": tensor name -> shard file), and other files (tokenizer, generation config, ...)
// that travel with it unchanged.
//
// Reading trusts nothing: an index naming a shard that is missing, a tensor the shard does not
// hold, or a shard holding a tensor the index does not list (or lists in another shard), two
// shards holding one name, a shard name with a directory part, malformed JSON: each is a
// qexact::Error (bad_file) naming the file and the tensor. Without an index, every
// `*.safetensors` file of the folder is a shard. Only headers are read here.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/safetensors.hpp"

namespace qexact::model {

inline constexpr const char* kIndexName = "model.safetensors.index.json";
inline constexpr const char* kConfigName = "config.json";

struct Shard {
  std::string file;             // its name in the folder
  safetensors::Index index;     // its header
  std::uint64_t size = 0;       // bytes
};

struct Folder {
  std::filesystem::path dir;
  std::optional<nlohmann::ordered_json> config;  // config.json, when the folder has one
  std::vector<Shard> shards;                      // by file name
  bool indexed = false;                           // the shards came from model.safetensors.index.json
  std::vector<std::string> other_files;           // neither a shard, the index nor config.json; by name

  struct Where {
    std::size_t shard, tensor;  // shards[shard].index.tensors[tensor]
  };
  std::map<std::string, Where> tensors;  // every tensor of every shard

  const safetensors::TensorInfo& info(const std::string& name) const;  // bad_argument if absent
  const Shard& shard_of(const std::string& name) const;
  // A tensor's bytes, read from its shard (only that tensor is read; the shard stays open).
  std::vector<std::uint8_t> bytes(const std::string& name) const;

 private:
  mutable std::map<std::string, std::shared_ptr<const io::InputFile>> open_;  // by shard file
};


// Whether `path` is a directory (an input given as a folder rather than as one file).
bool is_folder(const std::filesystem::path& path);

Folder read_folder(const std::filesystem::path& dir);

// The index file's text for shards `files` (name -> tensors it holds) and their total data size,
// as transformers writes it: {"metadata": {"total_size": N}, "weight_map": {name: file}}.
std::string index_json(const std::map<std::string, std::vector<std::string>>& files, std::uint64_t total_size);

}  // namespace qexact::model
