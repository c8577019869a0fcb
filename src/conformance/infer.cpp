#include "conformance/infer.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

#include "conformance/emulate.hpp"
#include "conformance/predicates.hpp"
#include "did_you_mean.hpp"
#include "contracts/family_table.hpp"
#include "io/printable.hpp"
#include "qexact/error.hpp"
#include "qexact/formats/fp16.hpp"

namespace qexact::conformance {
namespace {

struct LoadedCase {
  const CaseEntry* entry;
  Tensor input;
  std::optional<DeviceOutput> device;
};

struct Diff {
  std::int64_t payload = 0, scale = 0;
  // Device tensors of another dtype or shape than the contract's: payloads (or single outputs),
  // then scales (block and tensor scales).
  std::int64_t payload_misshapen = 0, scale_misshapen = 0;
  std::string note;
  std::int64_t total() const { return payload + scale; }
};

// The better explanation of the device: first the one that gives more of the device's payloads,
// then of its scales, their dtype and shape (a contract that cannot write a (M,) scale is not
// the device's, however few bytes it leaves), then the fewer differing bytes.
bool better(const Diff& a, const Diff& b) {
  if (a.payload_misshapen != b.payload_misshapen) return a.payload_misshapen < b.payload_misshapen;
  if (a.scale_misshapen != b.scale_misshapen) return a.scale_misshapen < b.scale_misshapen;
  return a.total() < b.total();
}
bool as_good(const Diff& a, const Diff& b) { return !better(a, b) && !better(b, a); }

// (A missing tensor, such as a tensor scale one side lacks, has no bytes: misshapen too.)
bool misshapen(const Tensor& device, const Tensor& mine) {
  return device.dtype() != mine.dtype() || device.shape() != mine.shape() || device.nbytes() != mine.nbytes();
}

// Bytes that differ; tensors of another dtype or shape differ in all their bytes.
std::int64_t differing(const Tensor& a, const Tensor& b) {
  if (misshapen(a, b)) return static_cast<std::int64_t>(std::max(a.nbytes(), b.nbytes()));
  const auto* p = static_cast<const std::uint8_t*>(a.raw());
  const auto* q = static_cast<const std::uint8_t*>(b.raw());
  std::int64_t n = 0;
  for (std::size_t i = 0; i < a.nbytes(); ++i) n += p[i] != q[i];
  return n;
}

std::int64_t payload_bytes(const DeviceOutput& o) {
  return static_cast<std::int64_t>(o.payload.nbytes() + o.output.nbytes());
}

Diff compare(const std::optional<DeviceOutput>& device, const ContractRun& run) {
  Diff d;
  if (!device && !run.output) return d;
  if (!device) {
    d.payload = payload_bytes(*run.output);
    d.scale = static_cast<std::int64_t>(run.output->scale.nbytes());
    d.note = "the device refused it; the contract does not";
    if (d.total() == 0) d.payload = 1;  // an empty output still disagrees with a refusal
    return d;
  }
  if (!run.output) {
    d.payload = payload_bytes(*device);
    d.scale = static_cast<std::int64_t>(device->scale.nbytes());
    d.note = "the contract refuses it: " + run.error;
    if (d.total() == 0) d.payload = 1;
    return d;
  }
  d.payload = differing(device->payload, run.output->payload) + differing(device->output, run.output->output);
  d.scale = differing(device->scale, run.output->scale) + differing(device->tensor_scale, run.output->tensor_scale);
  d.payload_misshapen = misshapen(device->payload, run.output->payload) + misshapen(device->output, run.output->output);
  d.scale_misshapen = misshapen(device->scale, run.output->scale) + misshapen(device->tensor_scale, run.output->tensor_scale);
  return d;
}

bool is_valid(const Contract& c) {
  try {
    validate(c);
    return true;
  } catch (const Error&) {
    return false;
  }
}

std::string key_of(const Contract& c) {
  std::string k = family_name(c.family);
  for (const auto& [name, value] : params(c)) k += ";" + name + "=" + value;
  return k;
}

std::string fmt_float(float v) {
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, p);
}

std::string param_value(const Contract& c, const std::string& key) {
  for (const auto& [name, value] : params(c))
    if (name == key) return value;
  return "";
}

class Search {
 public:
  Search(const CaseDir& dir, const InferOptions& o) : dir_(dir), run_{Engine::fast, std::max(1, o.threads)} {
    for (const CaseEntry& e : dir.cases) {
      LoadedCase k{&e, read_case_input(dir, e), read_device_output(dir, e)};
      if (k.device) ++with_outputs_;
      cases_.push_back(std::move(k));
    }
    if (with_outputs_ == 0)
      fail(ErrorKind::bad_input, dir.root.string() +
                                     " holds no device outputs: run its cases on the device (or `qexact emulate`) first");
  }

  // A payload (or single output) of another dtype or shape than even the closest contract's
  // is not a near miss: it is the bad input compare refuses, and infer refuses it alike. A
  // scale of another shape is a residual (the closest may be another granularity's).
  static void expect_payload_like(const LoadedCase& k, const ContractOutput& mine, const Contract& c) {
    const bool single = mine.payload.nbytes() == 0 && mine.output.nbytes() != 0;
    const Tensor& want = single ? mine.output : mine.payload;
    const Tensor& got = single ? k.device->output : k.device->payload;
    if (got.dtype() == want.dtype() && got.shape() == want.shape()) return;
    fail(ErrorKind::bad_input, "case " + io::printable(k.entry->name) + ": the device's " +
                                   (single ? "output" : "payload") + " has shape " + shape_str(got.shape()) + " of " +
                                   dtype_name(got.dtype()) + ", and no contract gives that: the closest (" +
                                   (c.preset.empty() ? std::string(family_name(c.family)) : c.preset) + ") gives " +
                                   shape_str(want.shape()) + " of " + dtype_name(want.dtype()));
  }

  std::int64_t with_outputs() const { return with_outputs_; }
  std::int64_t evaluated() const { return evaluated_; }

  // The exact sum of c's differences over every case.
  Diff total(const Contract& c) { return *sum_of(c, std::nullopt); }

  // c's sum, or nullopt as soon as the cases summed so far show that it cannot be better than
  // `bound` (the sum only grows case by case, in every member, so `better` can only turn false).
  // Most candidates a search meets are wrong on their first cases: the rest are never run.
  std::optional<Diff> total_if_better(const Contract& c, const Diff& bound) { return sum_of(c, Cut{bound, false}); }
  // c's sum if it is as good as `bound` or better.
  std::optional<Diff> total_if_as_good(const Contract& c, const Diff& bound) { return sum_of(c, Cut{bound, true}); }
  // Whether c reproduces every byte (its differing bytes, not its shapes, decide: as `exact`).
  bool reproduces(const Contract& c) {
    Partial& p = partial(c);
    while (p.next < cases_.size() && p.sum.total() == 0) add_next(c, p);
    return p.sum.total() == 0;
  }

  // The cases c leaves differing, each with compare's diagnoses of it (into `diagnosed`).
  std::vector<CaseResidual> residuals(const Contract& c, std::vector<CaseDiagnoses>& diagnosed) {
    std::vector<CaseResidual> out;
    for (const LoadedCase& k : cases_) {
      const ContractRun run = try_contract(c, k.input.view(), run_);
      if (k.device && run.output) expect_payload_like(k, *run.output, c);
      const Diff d = compare(k.device, run);
      if (d.total() == 0) continue;
      CaseResidual residual{k.entry->name, d.payload, d.scale, d.note, ""};
      if (run.output) {
        try {
          const CompareReport rep = k.device ? compare_device(c, k.input.view(), *k.device)
                                             : compare_refusal(c, k.input.view());
          diagnosed.push_back({k.entry->name, rep.diagnoses});
        } catch (const Error& e) {
          residual.undiagnosed = e.what();
        }
      }
      out.push_back(std::move(residual));
    }
    return out;
  }

  void device_totals(InferResult& r) const {
    for (const LoadedCase& k : cases_)
      if (k.device) {
        r.payload_bytes_total += payload_bytes(*k.device);
        r.scale_bytes_total += static_cast<std::int64_t>(k.device->scale.nbytes());
      }
  }

  // A start fits when the family is the manifest's, or when it quantizes the first case the
  // device answered into a payload of the device's dtype and shape.
  bool fits(const Contract& c) const {
    if (c.family == dir_.contract.family) return true;
    for (const LoadedCase& k : cases_) {
      if (!k.device) continue;
      const ContractRun run = try_contract(c, k.input.view(), run_);
      if (!run.output) return false;
      const Tensor& want = k.device->payload.nbytes() ? k.device->payload : k.device->output;
      const Tensor& got = run.output->payload.nbytes() ? run.output->payload : run.output->output;
      return want.dtype() == got.dtype() && want.shape() == got.shape();
    }
    return false;
  }

  // scale_min candidates from the data: the device's scale of a domain whose input is all
  // zero is scale_min (scale_mode=after) or scale_min / 127 (before).
  void collect_scale_mins(const Contract& c) {
    if (c.family != Family::int8_block && c.family != Family::int8_token && c.family != Family::int8_group) return;
    for (const LoadedCase& k : cases_) {
      if (!k.device || k.input.numel() == 0) continue;
      const Tensor& s = k.device->scale;
      std::optional<Groups> groups;
      try {
        groups.emplace(c, k.input.shape());
      } catch (const Error&) {
        continue;
      }
      if (s.numel() != groups->count() || (s.dtype() != DType::f32 && s.dtype() != DType::f16)) continue;
      const std::vector<float> x = to_f32_vector(k.input.view());
      for (std::int64_t g = 0; g < groups->count() && data_scale_mins_.size() < 8; ++g) {
        bool zero = groups->size(g) > 0;
        for (std::int64_t i = 0; i < groups->size(g) && zero; ++i) zero = x[static_cast<std::size_t>(groups->member(g, i))] == 0.0f;
        if (!zero) continue;
        const float v = s.dtype() == DType::f32 ? s.data<float>()[g] : f16_to_f32(s.data<std::uint16_t>()[g]);
        if (!(v > 0.0f) || !std::isfinite(v)) continue;
        data_scale_mins_.insert(fmt_float(v));
        data_scale_mins_.insert(fmt_float(v * 127.0f));
      }
    }
  }

  std::vector<std::string> candidates(const Contract& c, const std::string& key) const {
    std::vector<std::string> v = candidate_values(c, key);
    if (key == "scale_min")
      for (const std::string& s : data_scale_mins_)
        if (std::find(v.begin(), v.end(), s) == v.end()) v.push_back(s);
    return v;
  }

  // Coordinate descent from `start`: the best single change (or a change plus the one other
  // change that makes it a valid contract) while it explains the device better (`better`).
  std::pair<Contract, Diff> descend(const Contract& start) {
    Contract cur = start;
    Diff best = total(cur);
    while (best.total() > 0) {
      std::optional<Contract> move;
      Diff move_diff = best;
      auto consider = [&](const Contract& n) {
        if (const std::optional<Diff> d = total_if_better(n, move_diff)) {
          move = n;
          move_diff = *d;
        }
      };
      for (const auto& [key, value] : params(cur)) {
        for (const std::string& cand : candidates(cur, key)) {
          if (cand == value) continue;
          Contract n = cur;
          try {
            set_param(n, key, cand);
          } catch (const Error&) {
            continue;
          }
          if (is_valid(n)) {
            consider(n);
            continue;
          }
          for (const auto& [key2, value2] : params(n)) {
            if (key2 == key) continue;
            for (const std::string& cand2 : candidates(n, key2)) {
              if (cand2 == value2) continue;
              Contract n2 = n;
              try {
                set_param(n2, key2, cand2);
              } catch (const Error&) {
                continue;
              }
              if (is_valid(n2)) consider(n2);
            }
          }
        }
      }
      if (!move) break;
      cur = *move;
      best = move_diff;
    }
    return {cur, best};
  }

 private:
  struct Cut {
    Diff bound;
    bool inclusive;  // as good as the bound passes, not only better
  };
  // A candidate's sum over the cases before `next`: resumed, never recomputed, when a later
  // question needs more of it.
  struct Partial {
    Diff sum;
    std::size_t next = 0;
  };

  Partial& partial(const Contract& c) {
    auto [it, added] = cache_.try_emplace(key_of(c));
    if (added) ++evaluated_;
    return it->second;
  }

  void add_next(const Contract& c, Partial& p) {
    const Diff d = compare(cases_[p.next].device, try_contract(c, cases_[p.next].input.view(), run_));
    p.sum.payload += d.payload;
    p.sum.scale += d.scale;
    p.sum.payload_misshapen += d.payload_misshapen;
    p.sum.scale_misshapen += d.scale_misshapen;
    ++p.next;
  }

  static bool passes(const Diff& d, const Cut& cut) {
    return better(d, cut.bound) || (cut.inclusive && as_good(d, cut.bound));
  }

  std::optional<Diff> sum_of(const Contract& c, const std::optional<Cut>& cut) {
    Partial& p = partial(c);
    while (p.next < cases_.size()) {
      if (cut && !passes(p.sum, *cut)) return std::nullopt;
      add_next(c, p);
    }
    if (cut && !passes(p.sum, *cut)) return std::nullopt;
    return p.sum;
  }

  const CaseDir& dir_;
  RunOptions run_;
  std::vector<LoadedCase> cases_;
  std::int64_t with_outputs_ = 0, evaluated_ = 0;
  std::map<std::string, Partial> cache_;
  std::set<std::string> data_scale_mins_;
};

std::vector<std::pair<std::string, std::string>> overrides_of(const Contract& c, const Contract& base) {
  std::vector<std::pair<std::string, std::string>> out;
  const auto mine = params(c);
  const auto theirs = params(base);
  if (c.family != base.family) return mine;
  for (std::size_t i = 0; i < mine.size(); ++i)
    if (mine[i].second != theirs[i].second) out.push_back(mine[i]);
  return out;
}

}  // namespace

Family parse_family(const std::string& name) {
  std::string known;
  std::vector<std::string> names;
  for (const FamilyTraits& t : family_table()) {
    if (name == t.name) return t.family;
    known += (known.empty() ? "" : ", ") + std::string(t.name);
    names.emplace_back(t.name);
  }
  fail(ErrorKind::bad_argument, "unknown family '" + name + "'" + did_you_mean(name, names) + " (" + known + ")");
}

std::vector<std::string> candidate_values(const Contract& c, const std::string& key) {
  std::vector<std::string> v = param_choices(c.family, key);
  if (v.empty()) {
    if (key == "block") v = {"16", "32"};
    else if (key == "token_block") v = {"32", "64", "128"};
    else if (key == "group") v = {"16", "32", "64", "128"};
    else if (key == "scale_min") v = {"0", "1e-08", "1e-07", "1e-06", "1e-05"};
    else if (key == "granularity")
      v = {"tensor", "row", "group:32", "group:64", "group:128", "tile:32x32", "tile:128x128", "head_block:64"};
    else if (key == "amax_floor") v = {"0", "1e-12", "0.001953125", "5.960464477539063e-08"};  // none, torchao's EPS, vLLM's 1/512, ModelOpt's 2^-24
    else if (key == "round_mbits") v = {"-1", "1"};  // the element's, compressed-tensors' E2M1 precision
    else if (key == "block_min") v = {"0.015625", "0.001953125", "0"};  // E4M3's smallest normal (torchao), subnormal (ModelOpt), none (compressed-tensors)
    else if (key == "range") v = {"127", "128"};
    else if (key == "qmax") v = {"127", "127.5"};  // the seed's, compressed-tensors' (255 / 2)
    else if (key == "budget") v = {"1"};  // the path changes, never the bytes
    else if (key == "qdim") v = {"-1", "0"};
    else if (key == "block_rows") v = {"1", "16"};            // 1x16 blocks, TransformerEngine's 16x16 weight tiles
    else if (key == "global_e4m3_max") v = {"448", "256"};  // E4M3's max, 4over6's
    else if (key == "pool") v = {"16", "32", "64", "128", "256"};
  }
  const std::string current = param_value(c, key);
  if (!current.empty() && std::find(v.begin(), v.end(), current) == v.end()) v.insert(v.begin(), current);
  return v;
}

InferResult infer_contract(const CaseDir& dir, const InferOptions& o) {
  Search search(dir, o);
  InferResult r;
  r.cases_with_outputs = search.with_outputs();
  search.device_totals(r);

  std::vector<Contract> starts;
  std::set<std::string> seen;
  for (const std::string& name : preset_names()) {
    const Contract c = make_preset(name);
    if (o.family && c.family != *o.family) continue;
    if (!search.fits(c) || !seen.insert(key_of(c)).second) continue;
    starts.push_back(c);
  }
  if (starts.empty())
    fail(ErrorKind::bad_argument, "no preset of the requested family fits the device's outputs in " + dir.root.string());
  for (const Contract& c : starts) search.collect_scale_mins(c);

  // The manifest's preset first: among equally good end points the first is kept.
  std::stable_sort(starts.begin(), starts.end(), [&](const Contract& a, const Contract& b) {
    return (a.preset == dir.contract.preset) > (b.preset == dir.contract.preset);
  });
  std::optional<std::pair<Contract, Diff>> best;
  std::string best_start;
  for (const Contract& s : starts) {
    auto end = search.descend(s);
    if (!best || better(end.second, best->second)) {
      best = end;
      best_start = s.preset;
    }
    if (best->second.total() == 0) break;
  }

  r.exact = best->second.total() == 0;
  r.contract = best->first;
  r.preset = best_start;
  if (r.exact) {
    // Name it by a preset that reproduces every byte as it stands (the manifest's first).
    std::vector<std::string> exact_presets;
    for (const std::string& name : preset_names()) {
      const Contract c = make_preset(name);
      if (o.family && c.family != *o.family) continue;
      if (search.fits(c) && search.reproduces(c)) exact_presets.push_back(name);
    }
    auto it = std::find(exact_presets.begin(), exact_presets.end(), dir.contract.preset);
    if (it == exact_presets.end()) it = exact_presets.begin();
    if (it != exact_presets.end()) {
      r.preset = *it;
      r.contract = make_preset(*it);
      for (const std::string& p : exact_presets)
        if (p != *it) r.also_exact.push_back(p);
    }
  }
  r.overrides = overrides_of(r.contract, make_preset(r.preset));

  const Diff found = search.total(r.contract);
  r.payload_bytes_differing = found.payload;
  r.scale_bytes_differing = found.scale;
  for (const auto& [key, value] : params(r.contract)) {
    for (const std::string& cand : search.candidates(r.contract, key)) {
      if (cand == value) continue;
      Contract n = r.contract;
      try {
        set_param(n, key, cand);
      } catch (const Error&) {
        continue;
      }
      if (!is_valid(n)) continue;
      if (const std::optional<Diff> d = search.total_if_as_good(n, found); d && as_good(*d, found))
        r.undetermined[key].push_back(cand);
    }
  }
  std::vector<CaseDiagnoses> diagnosed;
  r.cases = search.residuals(r.contract, diagnosed);
  r.diagnoses = merge_diagnoses(diagnosed);
  r.candidates_evaluated = search.evaluated();
  return r;
}

}  // namespace qexact::conformance
