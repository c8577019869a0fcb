#include "model/verify.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <string_view>

#include "checkpoint/plan.hpp"
#include "checkpoint/storage.hpp"
#include "io/input_file.hpp"
#include "io/printable.hpp"
#include "io/temp_dir.hpp"
#include "model/folder.hpp"
#include "model/format.hpp"
#include "model/linear_weights.hpp"
#include "model/recipe.hpp"
#include "conformance/compare.hpp"
#include "qexact/model.hpp"

namespace qexact::model {
namespace {

using checkpoint::detail::Source;
using ordered_json = nlohmann::ordered_json;

float read_f32(const Folder& f, const std::string& name) {
  const std::vector<std::uint8_t> b = f.bytes(name);
  float v = 0;
  if (b.size() == 4 && f.info(name).dtype == "F32") std::memcpy(&v, b.data(), 4);
  return v;
}

std::string fmt_float(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
  return buf;
}

// The pieces joined. (Built by appending: GCC 12's -Wrestrict misfires on `"literal" + std::string&&`.)
std::string cat(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (std::string_view p : parts) out.append(p);
  return out;
}

constexpr int kDiagnosedTensors = 8;  // compare's diagnoses run the reference engine: the first few differing tensors

// compare's diagnoses of a differing tensor (the lab's signatures, confirmed by re-running where
// they can be): the source tensor quantized by the recipe against the folder's stored outputs.
void diagnose(const Recipe& r, const Folder& q, const Folder& s, const Source& src, TensorVerdict& t, int& diagnosed) {
  if (r.format && r.format->shares_tensor_amax(r.contract) && !fused_group(src.name).empty()) {
    t.diagnoses.push_back("not diagnosed: quantized under its fused group's tensor amax, which compare does not take");
    return;
  }
  if (diagnosed >= kDiagnosedTensors) return;
  ++diagnosed;
  try {
    const Tensor x = quantized_input(r, s, src);
    std::vector<Tensor> outs = stored_outputs(r, q, src);
    conformance::DeviceOutput device;
    device.payload = std::move(outs[0]);
    device.scale = std::move(outs[1]);
    if (outs.size() > 2) device.tensor_scale = std::move(outs[2]);
    for (const conformance::Diagnosis& d : conformance::compare_device(r.contract, x.view(), device).diagnoses)
      t.diagnoses.push_back(d.signature + (d.confirmed ? " (confirmed by a re-run): " : " (from the pattern): ") + d.explanation);
    if (t.diagnoses.empty()) t.diagnoses.push_back("none of the lab's signatures matches");
  } catch (const Error& e) {
    t.diagnoses.push_back(std::string("not diagnosed: ") + e.what());
  }
}

}  // namespace

std::uint64_t TensorVerdict::differing() const {
  std::uint64_t n = 0;
  for (const StoredDiff& d : stored) n += d.differing;
  return n;
}

Verification verify_folder(const std::filesystem::path& quantized, const std::filesystem::path& source,
                           const VerifyOptions& o) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(quantized, ec)) return verify_gguf(quantized, source, o);
  const Folder q = read_folder(quantized);
  const Folder s = read_folder(source);
  const Recipe r = recipe_of(q, o.preset);
  Verification v;
  v.format = r.format_name;
  v.preset = r.contract.preset;

  // The source tensors the folder quantized: those whose stored scale it holds.
  std::vector<std::string> selected;
  std::map<std::string, Source> sources;
  for (const Source& src : quantized_sources(r, q, s)) {
    selected.push_back(src.name);
    sources.emplace(src.name, src);
  }
  if (selected.empty())
    fail(ErrorKind::bad_input, quantized.string() + " holds no tensor of " + source.string() + " quantized as " +
                                   v.format + " " + v.preset + " stores it (wrong --source, or --preset?)");

  // The folder as qexact writes it from the source, quantizing the same tensors.
  const io::TempDir tmp("qexact-verify-");
  FolderOptions fo;
  fo.format = r.format_name;
  fo.recomputing = true;
  fo.only.emplace(selected.begin(), selected.end());
  fo.options.run = o.run;
  quantize_folder(r.contract, s.dir, tmp.path() / "expected", fo);
  const Folder e = read_folder(tmp.path() / "expected");

  std::set<std::string> expected_outputs;
  int diagnosed = 0;
  for (const std::string& name : selected) {
    TensorVerdict t;
    t.source = name;
    bool comparable = true;  // every stored output there, of its dtype and shape
    for (const auto& so : stored_of(r, sources.at(name))) {
      expected_outputs.insert(so.name);
      StoredDiff d{so.name, 0, 0};
      if (!q.tensors.count(so.name)) {
        v.findings.push_back(cat({"'", io::printable(so.name), "' is missing (", v.format, " stores ", name, " with it)"}));
        t.stored.push_back(d);
        comparable = false;
        continue;
      }
      const auto& qi = q.info(so.name);
      const auto& ei = e.info(so.name);
      if (qi.dtype != ei.dtype || qi.shape != ei.shape) {
        v.findings.push_back(cat({"'", io::printable(so.name), "' is ", qi.dtype, " ", shape_str(qi.shape), ", the format stores ", ei.dtype, " ", shape_str(ei.shape)}));
        t.stored.push_back(d);
        comparable = false;
        continue;
      }
      const std::vector<std::uint8_t> a = q.bytes(so.name), b = e.bytes(so.name);
      d.bytes = b.size();
      for (std::size_t i = 0; i < b.size(); ++i) d.differing += a[i] != b[i];
      v.differing += d.differing;
      v.bytes += d.bytes;
      t.stored.push_back(d);
    }
    // A tensor scale stored as the other convention's: the reciprocal of the expected value.
    if (t.stored.size() == 3 && t.stored[2].differing != 0) {
      const float a = read_f32(q, t.stored[2].name), x = read_f32(e, t.stored[2].name);
      if (x != 0 && std::isfinite(a) && std::fabs(static_cast<double>(a) * x - 1.0) < 0.01)
        v.findings.push_back(cat({"'", io::printable(t.stored[2].name), "' = ", fmt_float(a), " is the reciprocal of ", fmt_float(x), ": stored the other way round (", v.format, " loaders read ", (r.format ? r.format->tensor_scale_meaning() : "qexact's tensor scale"), ")"}));
    }
    if (t.differing() != 0 && comparable) diagnose(r, q, s, sources.at(name), t, diagnosed);
    v.tensors.push_back(std::move(t));
  }

  // Fused shards whose global scales differ: the loader fuses them under one.
  if (r.format && r.format->shares_tensor_amax(r.contract)) {
    std::map<std::string, std::vector<const TensorVerdict*>> groups;
    for (const TensorVerdict& t : v.tensors)
      if (const std::string g = fused_group(t.source); !g.empty() && t.stored.size() == 3) groups[g].push_back(&t);
    for (const auto& [g, members] : groups) {
      std::string values;
      bool same = true;
      const float first = q.tensors.count(members[0]->stored[2].name) ? read_f32(q, members[0]->stored[2].name) : 0;
      for (const TensorVerdict* t : members) {
        const float val = q.tensors.count(t->stored[2].name) ? read_f32(q, t->stored[2].name) : 0;
        same = same && std::memcmp(&val, &first, 4) == 0;
        values += (values.empty() ? "" : ", ") + module_of(t->source).substr(module_of(t->source).rfind('.') + 1) + " " + fmt_float(val);
      }
      if (members.size() > 1 && !same)
        v.findings.push_back(cat({"fused shards of ", g, " have different global scales (", values, "): vLLM fuses them into one layer under one global scale"}));
    }
  }

  // Everything else: the tensors both hold must be the same bytes; none may be only in one.
  std::set<std::string> quantized_modules;
  for (const std::string& n : selected) quantized_modules.insert(module_of(n));
  std::map<std::string, std::map<std::string, std::vector<std::pair<std::string, float>>>> activation_groups;
  for (const auto& [name, where] : q.tensors) {
    if (expected_outputs.count(name)) continue;
    const auto dot = name.rfind('.');
    const std::string module = dot == std::string::npos ? name : name.substr(0, dot);
    const std::string leaf = dot == std::string::npos ? name : name.substr(dot + 1);
    if ((leaf == "input_scale" || leaf == "input_global_scale") && quantized_modules.count(module) && !e.tensors.count(name)) {
      ++v.activation_scales;
      const auto& info = q.info(name);
      const auto fdt = checkpoint::detail::float_dtype(info.dtype);
      float value = std::nanf("");
      if (fdt && shape_numel(info.shape) == 1) {
        const std::vector<std::uint8_t> b = q.bytes(name);
        value = to_f32_vector(make_view(*fdt, {1}, b.data()))[0];
      }
      if (!fdt || shape_numel(info.shape) != 1)
        v.findings.push_back(cat({"'", io::printable(name), "' is ", info.dtype, " ", shape_str(info.shape),
                                  ": an activation scale is one float"}));
      else if (!(std::isfinite(value) && value > 0))
        v.findings.push_back(cat({"'", io::printable(name), "' = ", fmt_float(value), ": an activation scale is positive and finite"}));
      if (const std::string g = fused_group(module + ".weight"); !g.empty())
        activation_groups[leaf][g].emplace_back(module.substr(module.rfind('.') + 1), value);
      continue;
    }
    if (!e.tensors.count(name)) {
      v.findings.push_back(cat({"'", io::printable(name), "' is a tensor the recomputed folder does not have"}));
      continue;
    }
    if (q.bytes(name) != e.bytes(name))
      v.findings.push_back(cat({"'", io::printable(name), "' (not quantized) differs from the source's"}));
  }
  for (const auto& [leaf, groups] : activation_groups)
    for (const auto& [g, members] : groups) {
      std::string values;
      bool same = true;
      for (const auto& [m, val] : members) {
        same = same && std::memcmp(&val, &members[0].second, 4) == 0;
        values += cat({values.empty() ? "" : ", ", m, " ", fmt_float(val)});
      }
      if (members.size() > 1 && !same)
        v.findings.push_back(cat({"fused shards of ", g, " have different ", leaf, " (", values,
                                  "): they read one input, and a fused layer takes one"}));
    }
  for (const auto& [name, where] : e.tensors)
    if (!q.tensors.count(name) && !expected_outputs.count(name))
      v.findings.push_back(cat({"'", io::printable(name), "' is missing"}));

  // The config's ignore list against what the folder quantized (compressed-tensors).
  if (r.format && q.config) {
    const ordered_json& qc = (*q.config)["quantization_config"];
    const ordered_json ec = e.config ? (*e.config)["quantization_config"] : ordered_json();
    if (qc.value("format", std::string()) != ec.value("format", std::string()))
      v.findings.push_back(cat({"quantization_config format is '", qc.value("format", std::string()), "', its tensors are '", ec.value("format", std::string()), "'"}));
    const std::string key = r.format->ignore_key();
    std::set<std::string> ignore;
    if (qc.contains(key) && qc[key].is_array())
      for (const auto& x : qc[key])
        if (x.is_string()) ignore.insert(x.get<std::string>());
    for (const std::string& n : selected)
      if (ignore.count(module_of(n))) v.findings.push_back(cat({"'", module_of(n), "' is quantized but listed in ", key}));
    if (ec.contains(key) && ec[key].is_array())
      for (const auto& x : ec[key])
        if (x.is_string() && !ignore.count(x.get<std::string>()) && !r.format->ignored_by_loader(x.get<std::string>()))
          v.findings.push_back(cat({"'", x.get<std::string>(), "' is not quantized but missing from ", key, ": a loader expects it quantized"}));
  }
  return v;
}

}  // namespace qexact::model
