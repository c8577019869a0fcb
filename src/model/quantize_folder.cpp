// A model folder quantized shard by shard (qexact/model.hpp): each shard through the streamed
// checkpoint writer (checkpoint/quantize_file.cpp) into a staged folder, under the format's
// storage; then the index, config.json and the other files; then one rename.
#include <algorithm>
#include <memory>
#include <set>

#include "checkpoint/storage.hpp"
#include "io/atomic_file.hpp"
#include "io/input_file.hpp"
#include "io/output_guard.hpp"
#include "io/printable.hpp"
#include "io/read_file.hpp"
#include "model/folder.hpp"
#include "model/format.hpp"
#include "model/linear_weights.hpp"
#include "model/reshard.hpp"
#include "qexact/model.hpp"
#include "quantize_with_amax.hpp"

namespace qexact::model {
namespace {

using checkpoint::detail::Source;
using checkpoint::detail::Storage;
using ordered_json = nlohmann::ordered_json;

// The tensors a loader format quantizes: the user's globs when given, else the format's own
// choice; only float tensors either way (the plan skips the others).
bool loader_selects(const Format* f, const FolderOptions& fo, const Source& s) {
  if (fo.only) return fo.only->count(s.name) != 0;
  const checkpoint::Options& o = fo.options;
  if (!f || !o.include.empty() || !o.exclude.empty()) return checkpoint::detail::selected(o, s.name);
  return f->selects(s);
}

std::vector<std::uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

// max |x| of every fused group of selected tensors, read tensor by tensor: name -> group amax,
// for the members of groups of two or more.
std::map<std::string, float> fused_amax(const Format& format, const Folder& f, const FolderOptions& o) {
  std::map<std::string, std::vector<std::string>> groups;
  for (const auto& [name, where] : f.tensors) {
    const safetensors::TensorInfo& t = f.shards[where.shard].index.tensors[where.tensor];
    const Source s{t.name, t.dtype, t.shape, t.end - t.begin};
    if (!loader_selects(&format, o, s) || !checkpoint::detail::float_dtype(t.dtype)) continue;
    const std::string g = fused_group(name);
    if (!g.empty()) groups[g].push_back(name);
  }
  std::map<std::string, float> out;
  for (const auto& [group, members] : groups) {
    if (members.size() < 2) continue;
    std::int32_t key = 0;
    for (const std::string& name : members) {
      const safetensors::TensorInfo& t = f.info(name);
      const std::vector<std::uint8_t> bytes = f.bytes(name);
      key = std::max(key, amax_key(make_view(*checkpoint::detail::float_dtype(t.dtype), t.shape, bytes.data())));
    }
    for (const std::string& name : members) out[name] = amax_from_key(key);
  }
  return out;
}

}  // namespace

std::string default_preset(const std::string& format) {
  if (format == "qexact") return "";
  return format_named(format).default_preset();
}

std::vector<FormatInfo> folder_formats() {
  std::vector<FormatInfo> out = {{"qexact", "each shard in qexact's layout and metadata", ""}};
  for (const Format* f : formats()) out.push_back({f->name(), f->about(), f->default_preset()});
  return out;
}

FolderResult quantize_folder(const Contract& c, const std::filesystem::path& in_arg, const std::filesystem::path& out_arg,
                             const FolderOptions& o, const checkpoint::ProgressFn& progress) {
  const std::filesystem::path in = io::without_trailing_slash(in_arg), out = io::without_trailing_slash(out_arg);
  const Format* format = o.format == "qexact" ? nullptr : &format_named(o.format);
  if (format) format->check(c, o.recomputing);
  // (verify's recomputation names the tensors the folder holds, which the format chose.)
  if (format && !o.recomputing && (!o.options.include.empty() || !o.options.exclude.empty()) &&
      !format->fixed_selection().empty())
    fail(ErrorKind::bad_argument, std::string("--include / --exclude: --format ") + format->name() + " " + format->fixed_selection());
  if (o.dynamic_activations) {
    if (!format) fail(ErrorKind::bad_argument, "--activations dynamic needs a loader --format");
    format->check_dynamic_activations(c);
  }
  const Folder f = read_folder(in);
  if (format) {
    if (!f.config)
      fail(ErrorKind::bad_input, in.string() + " has no config.json, which a " + format->name() +
                                     " loader reads (its quantization_config goes there)");
    if (f.config->contains("quantization_config"))
      fail(ErrorKind::bad_input, in.string() + "/config.json already has a quantization_config (quant_method " +
                                     (*f.config)["quantization_config"].value("quant_method", std::string("?")) +
                                     "): quantize the unquantized model instead");
  }
  for (const Shard& s : f.shards) checkpoint::detail::check_quantizable(c, s.index.metadata, (in / s.file).string());
  return format ? format->write(c, f, out, o, progress) : write_shards(nullptr, c, f, out, o, progress);
}

FolderResult Format::write(const Contract& c, const Folder& f, const std::filesystem::path& out, const FolderOptions& o,
                           const checkpoint::ProgressFn& progress) const {
  return write_shards(this, c, f, out, o, progress);
}

FolderResult write_shards(const Format* format, const Contract& c, const Folder& f, const std::filesystem::path& out,
                          const FolderOptions& o, const checkpoint::ProgressFn& progress) {
  const std::filesystem::path& in = f.dir;
  if (o.max_shard_bytes && !format)
    fail(ErrorKind::bad_argument, "--max-shard-size applies to a loader --format: qexact's layout records each shard's "
                                  "tensors in that shard's metadata");

  Storage storage;
  storage.selected = [&](const Source& s) { return loader_selects(format, o, s); };
  if (format) storage.transposed = [&](const Source& s) { return format->transposed(s); };
  if (format)
    storage.outputs = [&](const Source& s, const std::vector<OutputSpec>& outputs) { return format->stored(c, s, outputs); };

  // What the output folder holds, declared before any work (check_output_dir).
  std::vector<std::string> shard_names;
  for (const Shard& s : f.shards) shard_names.push_back(s.file);
  if (o.max_shard_bytes) {
    // The shards the planned outputs pack into (a tensor refused later for its values is copied
    // instead, which may change them: the shards written are then packed from what was written).
    std::vector<std::uint64_t> sizes;
    for (const Shard& s : f.shards) {
      std::vector<Source> sources;
      for (const auto& t : s.index.tensors) sources.push_back({t.name, t.dtype, t.shape, t.end - t.begin});
      const checkpoint::detail::Plan plan = checkpoint::detail::make_plan(c, sources, o.options, {}, &storage);
      std::vector<std::pair<std::string, std::uint64_t>> outputs;
      for (std::size_t i = 0; i < sources.size(); ++i) {
        if (plan.tensors[i].action != checkpoint::detail::Action::quantize) {
          outputs.emplace_back(sources[i].name, sources[i].nbytes);
          continue;
        }
        for (const auto& so : plan.tensors[i].stored)
          outputs.emplace_back(so.name, static_cast<std::uint64_t>(shape_numel(so.shape)) * safetensors::itemsize(so.dtype));
      }
      std::sort(outputs.begin(), outputs.end());
      for (const auto& [name, n] : outputs) sizes.push_back(n);
    }
    const std::size_t n = pack_shards(sizes, o.max_shard_bytes).size();
    shard_names.clear();
    for (std::size_t i = 0; i < n; ++i) shard_names.push_back(shard_file_name(i, n));
  }
  const bool write_index = o.max_shard_bytes ? shard_names.size() > 1 : f.indexed || f.shards.size() > 1;
  std::vector<std::string> names = shard_names;
  if (write_index) names.push_back(kIndexName);
  if (f.config) names.push_back(kConfigName);
  for (const std::string& n : f.other_files) names.push_back(n);
  if (format)
    for (const std::string& n : format->extra_files()) names.push_back(n);
  io::check_output_dir(out, names, o.options.replace, {in});

  // A format that quantizes a fixed set of tensors cannot leave one of them out: a tensor the
  // contract refuses is an error naming it, as --strict makes it.
  checkpoint::Options options = o.options;
  if (format && !format->fixed_selection().empty()) options.strict = true;

  std::map<std::string, float> shared;
  if (format) {
    if (format->shares_tensor_amax(c)) shared = fused_amax(*format, f, o);
    storage.metadata = [&](const std::map<std::string, std::string>& input, const std::vector<Source>&,
                           const checkpoint::detail::Plan&) { return format->shard_metadata(c, input); };
    storage.tensor_amax = [&](const std::string& name) -> std::optional<float> {
      const auto it = shared.find(name);
      return it == shared.end() ? std::nullopt : std::optional<float>(it->second);
    };
  } else {  // qexact's own layout (reached with `only`)
    storage.outputs = [&](const Source& s, const std::vector<OutputSpec>& outputs) {
      return checkpoint::detail::qexact_stored(s.name, outputs);
    };
    storage.metadata = [&](const std::map<std::string, std::string>& input, const std::vector<Source>& sources,
                           const checkpoint::detail::Plan& plan) {
      return checkpoint::detail::output_metadata(c, input, sources, plan);
    };
  }

  std::uint64_t total = 0;
  for (const Shard& s : f.shards) total += s.size - s.index.data_start;
  io::StagedDir staged(out);
  FolderResult result;
  std::map<std::string, std::vector<std::string>> index;
  std::uint64_t done = 0, data_size = 0;
  for (const Shard& s : f.shards) {
    const std::uint64_t base = done;
    const checkpoint::ProgressFn shard_progress = [&](const checkpoint::Progress& p) {
      if (progress) progress(checkpoint::Progress{p.stage, p.tensor, base + p.done, total});
    };
    const checkpoint::FileResult r = checkpoint::detail::quantize_file_stored(
        c, in / s.file, staged.path() / s.file, options, shard_progress, format || o.only ? &storage : nullptr);
    for (const auto& row : r.summary.quantized) result.summary.quantized.push_back(row);
    for (const auto& skip : r.summary.skipped) result.summary.skipped.push_back(skip);
    for (const auto& copied : r.summary.copied) result.summary.copied.push_back(copied);
    const io::InputFile written(staged.path() / s.file);
    const safetensors::Index idx = safetensors::read_index(written, s.file);
    for (const auto& t : idx.tensors) index[s.file].push_back(t.name);
    data_size += written.size() - idx.data_start;
    result.shards.push_back(s.file);
    done += s.size - s.index.data_start;
  }
  if (o.max_shard_bytes) {
    index = reshard(staged.path(), result.shards, o.max_shard_bytes);
    result.shards.clear();
    for (const auto& [file, tensors] : index) result.shards.push_back(file);
  }
  const auto by_name = [](const auto& a, const auto& b) { return a.name < b.name; };
  std::sort(result.summary.quantized.begin(), result.summary.quantized.end(), by_name);
  std::sort(result.summary.skipped.begin(), result.summary.skipped.end());
  std::sort(result.summary.copied.begin(), result.summary.copied.end());

  if (o.max_shard_bytes ? index.size() > 1 : write_index)
    io::write_new_file(staged.path() / kIndexName, bytes_of(index_json(index, data_size)));
  if (f.config) {
    ordered_json config = *f.config;
    std::map<std::string, std::string> extra;
    if (format) {
      Written w;
      w.dynamic_activations = o.dynamic_activations;
      std::set<std::string> quantized;
      for (const auto& row : result.summary.quantized) quantized.insert(row.name);
      for (const auto& [name, where] : f.tensors) {
        const auto& t = f.shards[where.shard].index.tensors[where.tensor];
        if (!is_linear_weight(name, t.shape) || quantized.count(name)) continue;
        (module_of(name).find("embed") == std::string::npos ? w.unquantized_linear : w.embeddings).push_back(name);
      }
      extra = format->write_config(config, c, w);
    }
    io::write_new_file(staged.path() / kConfigName, bytes_of(config.dump(2) + "\n"));
    for (const auto& [name, text] : extra) io::write_new_file(staged.path() / name, bytes_of(text));
  }
  // Copied by the kernel, never held whole: a folder may carry large files beside its shards (a
  // consolidated checkpoint the index does not list).
  for (const std::string& n : f.other_files) {
    const io::InputFile src(in / n);
    io::StagedFile copy(staged.path() / n, src.size());
    copy.copy_at(0, src.fd(), 0, src.size(), (in / n).string());
    copy.commit();
  }
  io::sync_directory(staged.path());
  staged.publish(o.options.replace);
  return result;
}

}  // namespace qexact::model
