#include "checkpoint/plan.hpp"
#include "checkpoint/storage.hpp"

#include <fnmatch.h>

#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "contracts/family_table.hpp"
#include "io/printable.hpp"
#include "io/safetensors.hpp"
#include "quantize_with_amax.hpp"

// Kept equal to project(VERSION) in CMakeLists.txt unless CMake defines it.
#ifndef QEXACT_VERSION
#define QEXACT_VERSION "0.1.0"
#endif

namespace qexact::checkpoint {

const char* const kNaming =
    "<name>.payload: payload codes (F8_E4M3/F8_E5M2 for MX E4M3/E5M2, U8 for other MX elements with E2M1 packed "
    "two per byte, I8 for int8); <name>.scale: scales (F8_E8M0 for MX, F32/F16 for int8); both as `qexact "
    "quantize` writes them for the tensor alone; other tensors copied unchanged";

const char* const kNamingScaled =
    "<name>.payload: payload codes (F8_E4M3/F8_E5M2 for fp8.scaled, U8 for nvfp4 with E2M1 packed two per byte); "
    "<name>.scale: scales (F32 for fp8.scaled, F8_E4M3 for nvfp4); <name>.tensor_scale: F32 [] where the contract "
    "has a tensor scale (nvfp4 tensor_scale=amax or te); all as `qexact quantize` writes them for the tensor alone; "
    "other tensors copied unchanged";

const char* naming(const Contract& c) {
  // The MX and int8 checkpoints keep the text (and so the bytes) they always had.
  return c.family == Family::fp8_scaled || c.family == Family::nvfp4 ? kNamingScaled : kNaming;
}

namespace detail {
namespace {

bool matches_any(const std::vector<std::string>& globs, const std::string& name) {
  for (const std::string& g : globs)
    if (::fnmatch(g.c_str(), name.c_str(), 0) == 0) return true;
  return false;
}

}  // namespace

bool selected(const Options& o, const std::string& name) {
  return (o.include.empty() || matches_any(o.include, name)) && !matches_any(o.exclude, name);
}

std::string stored_dtype(const OutputSpec& o) {
  switch (o.codes) {
    case OutputCodes::e4m3: return "F8_E4M3";
    case OutputCodes::e5m2: return "F8_E5M2";
    case OutputCodes::e8m0: return "F8_E8M0";
    default: return safetensors::dtype_name_of(o.dtype);  // FP6 and packed E2M1 codes stay U8
  }
}

Shape quantized_shape(const Storage* storage, const Source& s) {
  if (!storage || !storage->transposed || s.shape.size() < 2 || !storage->transposed(s)) return s.shape;
  Shape t = s.shape;
  std::swap(t[t.size() - 1], t[t.size() - 2]);
  return t;
}

std::vector<StoredOutput> qexact_stored(const std::string& name, const std::vector<OutputSpec>& outputs) {
  std::vector<StoredOutput> out;
  for (const OutputSpec& o : outputs) out.push_back({name + "." + o.name, stored_dtype(o), o.shape, std::nullopt});
  return out;
}

void refuse_strict(const std::string& name, const std::string& reason) {
  fail(ErrorKind::bad_argument, "tensor '" + io::printable(name) + "' cannot be quantized (strict): " + reason);
}

std::optional<DType> float_dtype(const std::string& st_dtype) {
  if (st_dtype == "F32") return DType::f32;
  if (st_dtype == "F16") return DType::f16;
  if (st_dtype == "BF16") return DType::bf16;
  return std::nullopt;
}

void Plan::skip(std::size_t i, const Source& s, std::string reason, bool strict) {
  if (strict) refuse_strict(s.name, reason);
  tensors[i] = Planned{Action::skip, std::move(reason), {}, {}};
}

void check_quantizable(const Contract& c, const std::map<std::string, std::string>& metadata,
                       const std::string& source) {
  if (c.family == Family::hif4)
    fail(ErrorKind::bad_argument, "preset " + c.preset + " has no quantize (hif4 is fake-quant and pack only)");
  if (c.family == Family::pool)
    fail(ErrorKind::bad_argument, "preset " + c.preset + " is a pooled mean, not a quantizer");
  validate(c);
  for (const char* key : {"qexact.quantized", "qexact.preset"}) {
    const auto it = metadata.find(key);
    if (it == metadata.end()) continue;
    const auto preset = metadata.find("qexact.preset");
    fail(ErrorKind::bad_input,
         source + " is already quantized by qexact (its metadata has " + key +
             (preset != metadata.end() ? ", preset " + preset->second : std::string()) +
             "): quantizing it again would keep its payloads and scales as they are and replace the metadata "
             "that dequantizing them needs; quantize the original checkpoint instead");
  }
}

Plan make_plan(const Contract& c, const std::vector<Source>& sources, const Options& o,
               const std::map<std::string, std::string>& late_skips, const Storage* storage) {
  Plan plan;
  plan.tensors.resize(sources.size());
  plan.outputs = output_names(c);
  std::set<std::string> names;
  for (const Source& s : sources) names.insert(s.name);

  for (std::size_t i = 0; i < sources.size(); ++i) {
    const Source& s = sources[i];
    if (storage && storage->selected ? !storage->selected(s) : !selected(o, s.name)) continue;  // copy
    if (!float_dtype(s.dtype)) {
      plan.skip(i, s, "dtype " + s.dtype + " is not a float input (F32, F16, BF16)", o.strict);
      continue;
    }
    if (const auto late = late_skips.find(s.name); late != late_skips.end()) {
      plan.skip(i, s, late->second, o.strict);
      continue;
    }
    Planned p{Action::quantize, {}, {}, {}};
    try {
      p.outputs = output_specs(c, quantized_shape(storage, s));
    } catch (const Error& err) {
      if (err.kind() != ErrorKind::bad_argument && err.kind() != ErrorKind::bad_input) throw;
      plan.skip(i, s, err.what(), o.strict);
      continue;
    }
    // A reader takes <name>.payload for the payload of <name>: an input tensor of that name
    // would be ambiguous (and the file could not hold both). A format may store an output under
    // the tensor's own name (ModelOpt's `weight`), which the tensor itself frees.
    if (storage) {
      p.stored = storage->outputs(s, p.outputs);
    } else {
      p.stored = qexact_stored(s.name, p.outputs);
    }
    for (const StoredOutput& so : p.stored)
      if (const std::string& name = so.name; name != s.name && names.count(name) != 0)
        fail(ErrorKind::bad_input, "output name collision: tensor '" + s.name + "' would be written as '" + name +
                                       "', which is also a tensor of the input; exclude one of them");
    plan.tensors[i] = std::move(p);
  }
  return plan;
}

std::map<std::string, std::string> output_metadata(const Contract& c, const std::map<std::string, std::string>& input,
                                                   const std::vector<Source>& sources, const Plan& plan) {
  // Keyed by name (sources are sorted by name, so the order is theirs): an ordered_json would
  // look up each key among all before it.
  nlohmann::json quantized = nlohmann::json::object(), skipped = nlohmann::json::object();
  for (std::size_t i = 0; i < sources.size(); ++i) {
    const Planned& p = plan.tensors[i];
    if (p.action == Action::quantize)
      quantized[sources[i].name] = {{"dtype", dtype_name(*float_dtype(sources[i].dtype))}, {"shape", sources[i].shape}};
    else if (p.action == Action::skip)
      skipped[sources[i].name] = p.reason;
  }
  std::map<std::string, std::string> m = input;
  m["qexact.version"] = QEXACT_VERSION;
  m["qexact.preset"] = c.preset;
  m["qexact.preset_description"] = preset_description(c.preset);  // what the bytes reproduce
  m["qexact.preset_verified"] = preset_verified(c.preset);
  for (const auto& [key, value] : params(c)) m["qexact.param." + key] = value;
  m["qexact.naming"] = naming(c);
  m["qexact.quantized"] = quantized.dump();
  m["qexact.skipped"] = skipped.dump();
  return m;
}

std::optional<QuantResult> quantize_one(const Contract& c, const TensorView& x, const Planned& p, const RunOptions& run,
                                        std::string& reason, std::optional<float> amax) {
  try {
    QuantResult r = amax ? quantize_with_tensor_amax(c, x, *amax, run) : quantize(c, x, run);
    const auto named = r.named();
    bool same = named.size() == p.outputs.size();
    for (std::size_t k = 0; same && k < named.size(); ++k)
      same = named[k].first == p.outputs[k].name && named[k].second->shape() == p.outputs[k].shape &&
             named[k].second->dtype() == p.outputs[k].dtype;
    if (!same) {
      std::string got, want;
      for (const auto& [name, t] : named) got += " " + name + shape_str(t->shape());
      for (const OutputSpec& o : p.outputs) want += " " + o.name + shape_str(o.shape);
      throw std::logic_error("the quantizer returned" + got + ", the contract gives" + want);
    }
    return r;
  } catch (const Error& err) {
    // What the contract refuses for this tensor (rank, length, values) skips it.
    if (err.kind() != ErrorKind::bad_argument && err.kind() != ErrorKind::bad_input) throw;
    reason = err.what();
    return std::nullopt;
  }
}

std::uint64_t output_bytes(const QuantResult& r) {
  std::uint64_t n = 0;
  for (const auto& [name, t] : r.named()) n += t->nbytes();
  return n;
}

Summary make_summary(const std::vector<Source>& sources, const Plan& plan, std::vector<TensorSummary> rows) {
  Summary s;
  s.quantized = std::move(rows);
  for (std::size_t i = 0; i < sources.size(); ++i) {
    if (plan.tensors[i].action == Action::skip) s.skipped.emplace_back(sources[i].name, plan.tensors[i].reason);
    if (plan.tensors[i].action == Action::copy) s.copied.push_back(sources[i].name);
  }
  return s;
}

}  // namespace detail
}  // namespace qexact::checkpoint
