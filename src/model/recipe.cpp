#include "model/recipe.hpp"

#include <cstring>

#include "checkpoint/storage.hpp"
#include "io/printable.hpp"
#include "qexact/formats/bf16.hpp"
#include "qexact/formats/fp16.hpp"

namespace qexact::model {

using checkpoint::detail::Source;
using checkpoint::detail::StoredOutput;
using ordered_json = nlohmann::ordered_json;

Recipe recipe_of(const Folder& q, const std::string& preset) {
  Recipe r;
  const ordered_json* config = q.config && q.config->contains("quantization_config") ? &(*q.config)["quantization_config"] : nullptr;
  if (config) {
    for (const Format* f : formats())
      if (f->recognizes(*config)) r.format = f;
    if (!r.format) {
      std::string names;
      for (const Format* f : formats()) names += std::string(names.empty() ? "" : ", ") + f->name();
      fail(ErrorKind::bad_input, q.dir.string() + "/config.json: quantization_config quant_method '" +
                                     config->value("quant_method", std::string("?")) + "' is not a format qexact reads (" +
                                     names + ", or qexact's own metadata)");
    }
    r.format_name = r.format->name();
    r.contract = make_contract(preset.empty() ? r.format->preset_of(*config) : preset);
    return r;
  }
  r.format_name = "qexact";
  for (const Shard& s : q.shards) {
    const auto it = s.index.metadata.find("qexact.preset");
    if (it == s.index.metadata.end()) continue;
    std::vector<std::string> overrides;
    for (const auto& [k, v] : s.index.metadata)
      if (k.rfind("qexact.param.", 0) == 0) overrides.push_back(k.substr(13) + "=" + v);
    r.contract = make_contract(preset.empty() ? it->second : preset, preset.empty() ? overrides : std::vector<std::string>{});
    return r;
  }
  fail(ErrorKind::bad_input, q.dir.string() + " names no quantization: its config.json has no quantization_config and "
                                              "no shard has qexact metadata");
}

Shape quantized_shape_of(const Recipe& r, const Source& s) {
  checkpoint::detail::Storage storage;
  if (r.format) storage.transposed = [&](const Source& src) { return r.format->transposed(src); };
  return checkpoint::detail::quantized_shape(&storage, s);
}

std::vector<StoredOutput> stored_of(const Recipe& r, const Source& s) {
  const std::vector<OutputSpec> outputs = output_specs(r.contract, quantized_shape_of(r, s));
  return r.format ? r.format->stored(r.contract, s, outputs) : checkpoint::detail::qexact_stored(s.name, outputs);
}

std::vector<Source> quantized_sources(const Recipe& r, const Folder& q, const Folder& source) {
  std::vector<Source> out;
  for (const auto& [name, where] : source.tensors) {
    const auto& t = source.shards[where.shard].index.tensors[where.tensor];
    const Source src{t.name, t.dtype, t.shape, t.end - t.begin};
    if (!checkpoint::detail::float_dtype(t.dtype)) continue;
    std::vector<StoredOutput> stored;
    try {
      stored = stored_of(r, src);
    } catch (const Error&) {
      continue;  // a shape this contract cannot take was not quantized
    }
    // Quantized when any of its outputs is there: one under another name, or under its own name
    // in another dtype (compressed-tensors FP8 keeps `weight`, as E4M3).
    for (const StoredOutput& so : stored)
      if (q.tensors.count(so.name) && (so.name != name || q.info(so.name).dtype != t.dtype)) {
        out.push_back(src);
        break;
      }
  }
  return out;
}

Tensor quantized_input(const Recipe& r, const Folder& source, const Source& s) {
  const std::vector<std::uint8_t> bytes = source.bytes(s.name);
  TensorView x = make_view(*checkpoint::detail::float_dtype(s.dtype), s.shape, bytes.data());
  if (r.format && x.shape.size() >= 2 && r.format->transposed(s)) {
    std::swap(x.shape[x.shape.size() - 1], x.shape[x.shape.size() - 2]);
    std::swap(x.strides[x.strides.size() - 1], x.strides[x.strides.size() - 2]);
  }
  return contiguous_copy(x);
}

std::vector<Tensor> stored_outputs(const Recipe& r, const Folder& q, const Source& s) {
  const std::vector<OutputSpec> specs = output_specs(r.contract, quantized_shape_of(r, s));
  const std::vector<StoredOutput> stored = stored_of(r, s);
  std::vector<Tensor> out;
  for (std::size_t k = 0; k < specs.size(); ++k) {
    const StoredOutput& so = stored[k];
    if (!q.tensors.count(so.name)) fail(ErrorKind::bad_input, q.dir.string() + " has no '" + io::printable(so.name) + "'");
    const std::vector<std::uint8_t> b = q.bytes(so.name);
    Tensor t(specs[k].dtype, specs[k].shape);
    // An F32 output the folder keeps narrower (compressed-tensors' bf16 FP8 scales): the stored
    // dtype says so, whatever the source's dtype was.
    const std::string stored_dtype = q.info(so.name).dtype;
    const bool widen = specs[k].dtype == DType::f32 && (stored_dtype == "BF16" || stored_dtype == "F16");
    if (b.size() != (widen ? t.nbytes() / 2 : t.nbytes()))
      fail(ErrorKind::bad_input, q.dir.string() + ": '" + io::printable(so.name) + "' holds " + std::to_string(b.size()) +
                                     " bytes, not the " + std::to_string(widen ? t.nbytes() / 2 : t.nbytes()) + " of its output");
    if (!widen) {
      if (!b.empty()) std::memcpy(t.raw(), b.data(), b.size());
    } else {
      float* f = t.data<float>();
      for (std::int64_t i = 0; i < t.numel(); ++i) {
        const std::uint16_t h = static_cast<std::uint16_t>(b[2 * i] | (b[2 * i + 1] << 8));
        f[i] = stored_dtype == "BF16" ? bf16_to_f32(h) : f16_to_f32(h);
      }
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace qexact::model
