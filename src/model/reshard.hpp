// Output shards of a chosen size (--max-shard-size), as transformers' save_pretrained cuts them:
// the tensors, in order, packed greedily into shards of at most the size (a larger tensor alone
// in its own), named model-00001-of-0000N.safetensors, or model.safetensors when one.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace qexact::model {

// "5GB" (10^9), "500MB", "2GiB" (2^30), "64KiB", "1000" (bytes): bad_argument naming the text
// for anything else, or 0.
std::uint64_t parse_shard_size(const std::string& text);

// Each shard's members, as indices into `sizes` (in order).
std::vector<std::vector<std::size_t>> pack_shards(const std::vector<std::uint64_t>& sizes, std::uint64_t max_bytes);

// The name of shard i of n.
std::string shard_file_name(std::size_t i, std::size_t n);

// Rewrites the safetensors files `files` of `dir` (in this order; their tensors in file order)
// as shards of at most `max_bytes`, the first file's metadata in each; the old files are
// removed. Returns each new shard's tensors by file name.
std::map<std::string, std::vector<std::string>> reshard(const std::filesystem::path& dir, const std::vector<std::string>& files,
                                                        std::uint64_t max_bytes);

}  // namespace qexact::model
