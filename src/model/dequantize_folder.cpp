#include "model/dequantize_folder.hpp"

#include <algorithm>
#include <cstring>
#include <set>

#include "checkpoint/plan.hpp"
#include "io/atomic_file.hpp"
#include "io/input_file.hpp"
#include "io/output_guard.hpp"
#include "io/printable.hpp"
#include "io/safetensors.hpp"
#include "model/recipe.hpp"
#include "qexact/formats/bf16.hpp"
#include "qexact/formats/fp16.hpp"

namespace qexact::model {
namespace {

using checkpoint::detail::Source;

// The model's dtype as config.json names it (transformers 5: "dtype"; before: "torch_dtype").
std::string model_dtype(const Folder& q) {
  if (!q.config) return "F32";
  for (const char* key : {"dtype", "torch_dtype"})
    if (q.config->contains(key) && (*q.config)[key].is_string()) {
      const std::string d = (*q.config)[key].get<std::string>();
      if (d == "bfloat16") return "BF16";
      if (d == "float16") return "F16";
      if (d == "float32") return "F32";
    }
  return "F32";
}

// The sources qexact's own layout quantized: its metadata records each one's dtype and shape.
std::vector<Source> qexact_sources(const Folder& q, const std::string& dtype) {
  std::vector<Source> out;
  for (const Shard& s : q.shards) {
    const auto it = s.index.metadata.find("qexact.quantized");
    if (it == s.index.metadata.end()) continue;
    const nlohmann::json j = nlohmann::json::parse(it->second, nullptr, false);
    if (!j.is_object()) fail(ErrorKind::bad_file, (q.dir / s.file).string() + ": qexact.quantized is not a JSON object");
    for (const auto& [name, v] : j.items()) {
      if (!v.is_object() || !v.contains("shape") || !v["shape"].is_array())
        fail(ErrorKind::bad_file, (q.dir / s.file).string() + ": qexact.quantized['" + io::printable(name) + "'] has no shape");
      Shape shape;
      for (const auto& d : v["shape"]) {
        if (!d.is_number_integer() || d.get<std::int64_t>() < 0)
          fail(ErrorKind::bad_file, (q.dir / s.file).string() + ": qexact.quantized['" + io::printable(name) + "'] has a bad shape");
        shape.push_back(d.get<std::int64_t>());
      }
      out.push_back({name, dtype, shape, 0});
    }
  }
  return out;
}

std::vector<std::uint8_t> narrowed(const Tensor& values, const std::string& dtype) {
  const float* f = values.data<float>();
  const std::size_t n = static_cast<std::size_t>(values.numel());
  if (dtype == "F32") return std::vector<std::uint8_t>(reinterpret_cast<const std::uint8_t*>(f), reinterpret_cast<const std::uint8_t*>(f) + 4 * n);
  std::vector<std::uint8_t> out(2 * n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint16_t h = dtype == "BF16" ? f32_to_bf16(f[i]) : f32_to_f16(f[i]);
    out[2 * i] = static_cast<std::uint8_t>(h);
    out[2 * i + 1] = static_cast<std::uint8_t>(h >> 8);
  }
  return out;
}

}  // namespace

std::vector<std::string> dequantize_folder(const std::filesystem::path& quantized, const std::filesystem::path& out_arg,
                                           const DequantizeFolderOptions& o) {
  const std::filesystem::path out = io::without_trailing_slash(out_arg);
  const Folder q = read_folder(quantized);
  const Recipe r = recipe_of(q, "");
  const std::string dtype = o.dtype.empty() ? model_dtype(q) : o.dtype;
  if (dtype != "F32" && dtype != "BF16" && dtype != "F16")
    fail(ErrorKind::bad_argument, "--dtype " + dtype + ": dequantized tensors are F32, BF16 or F16");
  const std::vector<Source> sources = r.format ? r.format->sources_in(q, dtype) : qexact_sources(q, dtype);

  // Each source replaces its stored outputs, in the shard holding its first one.
  std::map<std::string, std::vector<const Source*>> by_shard;
  std::set<std::string> stored_names;
  for (const Source& s : sources) {
    const auto stored = stored_of(r, s);
    for (const auto& so : stored) stored_names.insert(so.name);
    by_shard[q.shard_of(stored.front().name).file].push_back(&s);
  }

  std::vector<std::string> names;
  for (const Shard& s : q.shards) names.push_back(s.file);
  if (q.indexed || q.shards.size() > 1) names.push_back(kIndexName);
  if (q.config) names.push_back(kConfigName);
  const std::vector<std::string> format_files = r.format ? r.format->extra_files() : std::vector<std::string>{};
  for (const std::string& n : q.other_files)
    if (std::find(format_files.begin(), format_files.end(), n) == format_files.end()) names.push_back(n);
  io::check_output_dir(out, names, o.replace, {quantized});

  io::StagedDir staged(out);
  std::map<std::string, std::vector<std::string>> index;
  std::uint64_t data_size = 0;
  std::vector<std::string> done;
  for (const Shard& shard : q.shards) {
    std::vector<safetensors::Slot> slots;
    std::vector<std::pair<const safetensors::TensorInfo*, const Source*>> what;  // a copy, or a dequantized source
    for (const auto& t : shard.index.tensors)
      if (!stored_names.count(t.name)) {
        slots.push_back({t.name, t.dtype, t.shape, t.end - t.begin});
        what.emplace_back(&t, nullptr);
      }
    for (const Source* s : by_shard[shard.file]) {
      slots.push_back({s->name, dtype, s->shape, static_cast<std::uint64_t>(shape_numel(s->shape)) * safetensors::itemsize(dtype)});
      what.emplace_back(nullptr, s);
    }
    std::map<std::string, std::string> metadata;
    if (const auto f = shard.index.metadata.find("format"); f != shard.index.metadata.end()) metadata["format"] = f->second;
    const safetensors::Layout layout = safetensors::layout(metadata, slots);
    io::StagedFile file(staged.path() / shard.file, layout.file_size);
    file.write_at(0, layout.head);
    const io::InputFile in(q.dir / shard.file);
    for (std::size_t k = 0; k < slots.size(); ++k) {
      index[shard.file].push_back(slots[k].name);
      if (what[k].first) {
        file.copy_at(layout.offsets[k], in.fd(), shard.index.data_start + what[k].first->begin, slots[k].nbytes, (q.dir / shard.file).string());
        continue;
      }
      const Source& s = *what[k].second;
      std::vector<Tensor> outs = stored_outputs(r, q, s);
      const Shape qshape = quantized_shape_of(r, s);
      Tensor values = dequantize(r.contract, outs[0].view(), outs[1].view(), outs.size() > 2 ? outs[2].view() : TensorView{},
                                 qshape, o.run);
      if (r.format && r.format->transposed(s)) {  // gpt-oss: back to [E, in, out]
        TensorView v = values.view();
        std::swap(v.shape[v.shape.size() - 1], v.shape[v.shape.size() - 2]);
        std::swap(v.strides[v.strides.size() - 1], v.strides[v.strides.size() - 2]);
        values = contiguous_copy(v);
      }
      file.write_at(layout.offsets[k], narrowed(values, dtype));
      done.push_back(s.name);
    }
    file.commit();
    data_size += layout.file_size - layout.head.size();
  }
  if (q.indexed || q.shards.size() > 1) {
    const std::string text = index_json(index, data_size);
    io::write_new_file(staged.path() / kIndexName, std::vector<std::uint8_t>(text.begin(), text.end()));
  }
  if (q.config) {
    nlohmann::ordered_json config = *q.config;
    config.erase("quantization_config");
    const std::string text = config.dump(2) + "\n";
    io::write_new_file(staged.path() / kConfigName, std::vector<std::uint8_t>(text.begin(), text.end()));
  }
  for (const std::string& n : q.other_files) {
    if (std::find(format_files.begin(), format_files.end(), n) != format_files.end()) continue;
    const io::InputFile src(q.dir / n);
    io::StagedFile copy(staged.path() / n, src.size());
    copy.copy_at(0, src.fd(), 0, src.size(), (q.dir / n).string());
    copy.commit();
  }
  io::sync_directory(staged.path());
  staged.publish(o.replace);
  std::sort(done.begin(), done.end());
  return done;
}

}  // namespace qexact::model
