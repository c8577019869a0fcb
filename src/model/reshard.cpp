#include "model/reshard.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <memory>

#include "io/atomic_file.hpp"
#include "io/input_file.hpp"
#include "io/safetensors.hpp"
#include "qexact/error.hpp"

namespace qexact::model {

std::uint64_t parse_shard_size(const std::string& text) {
  std::size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  const std::string digits = text.substr(0, i), unit = text.substr(i);
  const std::vector<std::pair<std::string, std::uint64_t>> units = {
      {"", 1},         {"B", 1},         {"KB", 1000},      {"MB", 1000000},    {"GB", 1000000000},
      {"KiB", 1u << 10}, {"MiB", 1u << 20}, {"GiB", 1u << 30}};
  for (const auto& [name, scale] : units)
    if (unit == name && !digits.empty() && digits.size() <= 12) {
      const std::uint64_t n = std::stoull(digits) * scale;
      if (n > 0) return n;
    }
  fail(ErrorKind::bad_argument, "--max-shard-size '" + text + "' is not a positive size (e.g. 5GB, 500MB, 2GiB, or bytes)");
}

std::vector<std::vector<std::size_t>> pack_shards(const std::vector<std::uint64_t>& sizes, std::uint64_t max_bytes) {
  std::vector<std::vector<std::size_t>> shards;
  std::uint64_t current = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (shards.empty() || (!shards.back().empty() && current + sizes[i] > max_bytes)) {
      shards.emplace_back();
      current = 0;
    }
    shards.back().push_back(i);
    current += sizes[i];
  }
  return shards;
}

std::string shard_file_name(std::size_t i, std::size_t n) {
  if (n == 1) return "model.safetensors";
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", i + 1, n);
  return buf;
}

std::map<std::string, std::vector<std::string>> reshard(const std::filesystem::path& dir, const std::vector<std::string>& files,
                                                        std::uint64_t max_bytes) {
  struct Piece {
    std::size_t file;
    safetensors::TensorInfo info;
    std::uint64_t data_start;
  };
  std::vector<std::unique_ptr<io::InputFile>> inputs;  // InputFile is neither copied nor moved
  std::vector<Piece> pieces;
  std::map<std::string, std::string> metadata;
  for (std::size_t f = 0; f < files.size(); ++f) {
    inputs.push_back(std::make_unique<io::InputFile>(dir / files[f]));
    safetensors::Index idx = safetensors::read_index(*inputs.back(), files[f]);
    if (f == 0) metadata = idx.metadata;
    std::sort(idx.tensors.begin(), idx.tensors.end(), [](const auto& a, const auto& b) { return a.begin < b.begin; });
    for (auto& t : idx.tensors) pieces.push_back({f, std::move(t), idx.data_start});
  }
  std::vector<std::uint64_t> sizes;
  for (const Piece& p : pieces) sizes.push_back(p.info.end - p.info.begin);
  const auto shards = pack_shards(sizes, max_bytes);
  // Written under temporary names first: a new shard may be named as an old one.
  std::vector<std::string> names, temps;
  std::map<std::string, std::vector<std::string>> out;
  for (std::size_t s = 0; s < shards.size(); ++s) {
    names.push_back(shard_file_name(s, shards.size()));
    temps.push_back(".resharded." + names.back());
    std::vector<safetensors::Slot> slots;
    for (std::size_t k : shards[s]) slots.push_back({pieces[k].info.name, pieces[k].info.dtype, pieces[k].info.shape, sizes[k]});
    const safetensors::Layout layout = safetensors::layout(metadata, slots);
    io::StagedFile file(dir / temps.back(), layout.file_size);
    file.write_at(0, layout.head);
    for (std::size_t j = 0; j < shards[s].size(); ++j) {
      const Piece& p = pieces[shards[s][j]];
      file.copy_at(layout.offsets[j], inputs[p.file]->fd(), p.data_start + p.info.begin, sizes[shards[s][j]], files[p.file]);
      out[names.back()].push_back(p.info.name);
    }
    file.commit();
  }
  inputs.clear();
  for (const std::string& f : files) std::filesystem::remove(dir / f);
  for (std::size_t s = 0; s < names.size(); ++s) std::filesystem::rename(dir / temps[s], dir / names[s]);
  return out;
}

}  // namespace qexact::model
