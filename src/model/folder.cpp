#include "model/folder.hpp"

#include <algorithm>
#include <set>

#include "io/input_file.hpp"
#include "io/printable.hpp"
#include "io/read_file.hpp"

namespace qexact::model {
namespace {

using ordered_json = nlohmann::ordered_json;

[[noreturn]] void bad(const std::filesystem::path& file, const std::string& what) {
  fail(ErrorKind::bad_file, file.string() + ": " + what);
}

ordered_json parse_json_file(const std::filesystem::path& path) {
  const std::string text = io::read_json_text(path);
  ordered_json j = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) bad(path, "not valid JSON");
  if (!j.is_object()) bad(path, std::string("JSON ") + j.type_name() + ", not an object");
  return j;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

Shard read_shard(const std::filesystem::path& dir, const std::string& file) {
  const io::InputFile in(dir / file);
  Shard s{file, safetensors::read_index(in, (dir / file).string()), in.size()};
  return s;
}

// The weight_map of an index: tensor name -> shard file, each file a plain name in the folder.
std::map<std::string, std::string> weight_map(const std::filesystem::path& path) {
  const ordered_json j = parse_json_file(path);
  const auto it = j.find("weight_map");
  if (it == j.end() || !it->is_object()) bad(path, "no 'weight_map' object");
  std::map<std::string, std::string> m;
  for (const auto& [name, file] : it->items()) {
    if (!file.is_string()) bad(path, "the shard of tensor '" + io::printable(name) + "' is not a string");
    const std::string f = file.get<std::string>();
    if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..")
      bad(path, "tensor '" + io::printable(name) + "' is in '" + io::printable(f) +
                    "', which is not a file name of this folder");
    if (!ends_with(f, ".safetensors"))
      bad(path, "tensor '" + io::printable(name) + "' is in '" + io::printable(f) + "', not a .safetensors file");
    if (!m.emplace(name, f).second) bad(path, "tensor '" + io::printable(name) + "' is listed twice");
  }
  return m;
}

}  // namespace

const safetensors::TensorInfo& Folder::info(const std::string& name) const {
  const auto it = tensors.find(name);
  if (it == tensors.end()) fail(ErrorKind::bad_argument, dir.string() + " has no tensor '" + io::printable(name) + "'");
  return shards[it->second.shard].index.tensors[it->second.tensor];
}

const Shard& Folder::shard_of(const std::string& name) const {
  info(name);
  return shards[tensors.at(name).shard];
}

std::vector<std::uint8_t> Folder::bytes(const std::string& name) const {
  const Shard& shard = shard_of(name);
  const safetensors::TensorInfo& t = info(name);
  std::shared_ptr<const io::InputFile>& in = open_[shard.file];
  if (!in) in = std::make_shared<const io::InputFile>(dir / shard.file);
  std::vector<std::uint8_t> b(static_cast<std::size_t>(t.end - t.begin));
  in->read_at(shard.index.data_start + t.begin, b);
  return b;
}


bool is_folder(const std::filesystem::path& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec);
}

Folder read_folder(const std::filesystem::path& dir) {
  Folder f;
  f.dir = dir;
  std::error_code ec;
  std::vector<std::string> names;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(".qexact-", 0) == 0) continue;  // a qexact temporary
    std::error_code type_ec;
    if (!it->is_regular_file(type_ec)) continue;  // subfolders are not part of a model folder's files here
    names.push_back(name);
  }
  if (ec) fail(ErrorKind::io, "cannot list " + dir.string() + ": " + ec.message());
  std::sort(names.begin(), names.end());
  const std::set<std::string> present(names.begin(), names.end());

  if (present.count(kConfigName)) f.config = parse_json_file(dir / kConfigName);

  std::map<std::string, std::string> listed;  // from the index
  std::vector<std::string> shard_files;
  if (present.count(kIndexName)) {
    f.indexed = true;
    listed = weight_map(dir / kIndexName);
    std::set<std::string> files;
    for (const auto& [name, file] : listed) files.insert(file);
    for (const std::string& file : files)
      if (!present.count(file))
        bad(dir / kIndexName, "lists shard '" + io::printable(file) + "' (tensor '" +
                                  io::printable(std::find_if(listed.begin(), listed.end(), [&](const auto& e) {
                                                  return e.second == file;
                                                })->first) +
                                  "'), which the folder does not hold");
    shard_files.assign(files.begin(), files.end());
  } else {
    for (const std::string& n : names)
      if (ends_with(n, ".safetensors")) shard_files.push_back(n);
    if (shard_files.empty())
      fail(ErrorKind::bad_file, dir.string() + ": no " + kIndexName + " and no .safetensors file: not a model folder");
  }

  const std::set<std::string> shard_set(shard_files.begin(), shard_files.end());
  for (const std::string& n : names)
    if (n != kConfigName && n != kIndexName && !shard_set.count(n)) f.other_files.push_back(n);

  for (const std::string& file : shard_files) {
    f.shards.push_back(read_shard(dir, file));
    const std::size_t si = f.shards.size() - 1;
    const auto& tensors = f.shards[si].index.tensors;
    for (std::size_t t = 0; t < tensors.size(); ++t) {
      const std::string& name = tensors[t].name;
      const auto [it, fresh] = f.tensors.emplace(name, Folder::Where{si, t});
      if (!fresh)
        bad(dir / file, "tensor '" + io::printable(name) + "' is also in " + f.shards[it->second.shard].file);
      if (f.indexed) {
        const auto l = listed.find(name);
        if (l == listed.end()) bad(dir / file, "holds tensor '" + io::printable(name) + "', which " + kIndexName + " does not list");
        if (l->second != file)
          bad(dir / file, "holds tensor '" + io::printable(name) + "', which " + kIndexName + " places in " + l->second);
      }
    }
  }
  if (f.indexed)
    for (const auto& [name, file] : listed)
      if (!f.tensors.count(name))
        bad(dir / kIndexName, "lists tensor '" + io::printable(name) + "' in " + file + ", which does not hold it");
  return f;
}

std::string index_json(const std::map<std::string, std::vector<std::string>>& files, std::uint64_t total_size) {
  nlohmann::json map = nlohmann::json::object();  // by tensor name, as transformers sorts it
  for (const auto& [file, names] : files)
    for (const std::string& n : names) map[n] = file;
  ordered_json j;
  j["metadata"] = {{"total_size", total_size}};
  j["weight_map"] = map;
  return j.dump(2) + "\n";
}

}  // namespace qexact::model
