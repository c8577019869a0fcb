// `qexact compare --preset P [--param k=v ...] --input X.npy --payload P.npy --scale S.npy
//  [--tensor-scale T.npy] [--dtype bf16] [--json]` (--tensor-scale for a contract with a tensor
// scale, nvfp4 tensor_scale=amax) (`--output O.npy` for hif4 and pool.mean), or
// `qexact compare DIR [--preset P] [--param k=v ...] [--json]` over an exported case directory
// (the contract comes from its manifest; --preset / --param override it): a device's outputs
// against the contract's reference outputs, byte for byte, with the diagnoses of contracts §8.
// Exit status: 0 when every byte matches, 1 when bytes differ, 2 on bad input.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <set>

#include "cli/commands.hpp"
#include "conformance/case_dir.hpp"
#include "conformance/compare.hpp"
#include "conformance/contract_output.hpp"
#include "contracts/contract_json.hpp"
#include "contracts/family_table.hpp"
#include "conformance/emulate.hpp"
#include "io/json_text.hpp"
#include "io/npy.hpp"

namespace qexact::cli {
namespace {

using Json = nlohmann::ordered_json;
using conformance::CompareReport;
using conformance::DeviceOutput;
using conformance::Diagnosis;

struct CompareOptions {
  std::string dir;
  std::string preset;
  std::vector<std::string> params;
  std::string input, payload, scale, tensor_scale, output;
  std::string dtype;
  bool json = false;
};

struct CaseResult {
  std::string name;
  CompareReport report;
  bool refused = false;  // the device wrote no outputs for it; the contract quantizes it
  bool accepted_forbidden = false;  // the device wrote outputs for an input the contract refuses
};

// The device wrote outputs for an input the contract refuses: a failure however its bytes look.
CompareReport accepted_forbidden(const Contract& c, const DeviceOutput& dev, const std::string& contract_error) {
  CompareReport r;
  const Tensor& first = conformance::output_kind(c) == conformance::OutputKind::single ? dev.output : dev.payload;
  r.payload_bytes_total = r.payload_bytes_differing = static_cast<std::int64_t>(first.nbytes());
  r.scale_bytes_total = r.scale_bytes_differing = static_cast<std::int64_t>(dev.scale.nbytes());
  r.diagnoses.push_back(conformance::Diagnosis{
      "accepted_forbidden_input",
      {{"accepted_cases", 1}},
      "the device wrote outputs for an input the contract refuses (" + contract_error + "); it must refuse it too",
      true});
  return r;
}

// Every byte matches and the device refused nothing it had to refuse.
bool all_agree(const std::vector<CaseResult>& results, const CompareReport& sum) {
  return sum.identical() &&
         std::none_of(results.begin(), results.end(), [](const CaseResult& r) { return r.accepted_forbidden; });
}

// A device file must exist: a missing one is bad input, not an empty comparison.
Tensor read_device_file(const std::string& path, const char* option) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    fail(ErrorKind::bad_input, std::string(option) + " " + path + ": no such file");
  return npy::read(path);
}

// The single output of hif4 / pool.mean; bf16 outputs come as '<u2' bit patterns.
Tensor read_single_output(const std::string& path, DType expected) {
  Tensor t = read_device_file(path, "--output");
  if (expected == DType::bf16 && t.dtype() == DType::u16) t = npy::reinterpret_u16_as_bf16(t);
  return t;
}

std::vector<CaseResult> compare_files(const CompareOptions& o, const Contract& c) {
  if (o.input.empty()) fail(ErrorKind::bad_argument, "compare: --input is required without a case directory");
  const Tensor x = read_float_input(o.input, o.dtype);
  DeviceOutput dev;
  if (conformance::output_kind(c) == conformance::OutputKind::single) {
    if (o.output.empty() || !o.payload.empty() || !o.scale.empty() || !o.tensor_scale.empty())
      fail(ErrorKind::bad_argument, std::string("compare: the ") + family_name(c.family) +
                                        " family has one output: give --output, not --payload/--scale");
    dev.output = read_single_output(o.output, c.family == Family::pool ? c.pool_out : x.dtype());
  } else {
    if (o.payload.empty() || o.scale.empty() || !o.output.empty())
      fail(ErrorKind::bad_argument, "compare: a quantizing contract takes --payload and --scale (not --output)");
    const bool has_tensor_scale = output_names(c).size() > 2;
    if (has_tensor_scale && o.tensor_scale.empty())
      fail(ErrorKind::bad_argument, "compare: " + c.preset + " has a tensor scale: give the device's --tensor-scale");
    if (!has_tensor_scale && !o.tensor_scale.empty())
      fail(ErrorKind::bad_argument, "compare: " + c.preset + " has no tensor scale: --tensor-scale does not apply");
    dev.payload = read_device_file(o.payload, "--payload");
    dev.scale = read_device_file(o.scale, "--scale");
    if (has_tensor_scale) dev.tensor_scale = read_device_file(o.tensor_scale, "--tensor-scale");
  }
  return {{std::filesystem::path(o.input).filename().string(), conformance::compare_device(c, x.view(), dev), false}};
}

std::vector<CaseResult> compare_dir(const CompareOptions& o, Contract& c) {
  conformance::CaseDir d = conformance::read_case_dir(o.dir);
  if (!o.preset.empty()) {
    c = make_contract(o.preset, o.params);
  } else {
    c = d.contract;
    for (const std::string& kv : o.params) set_param(c, kv);
    validate(c);
  }
  d.contract = c;
  std::vector<CaseResult> out;
  std::string first_missing;  // a case without outputs, when no case has any
  for (const conformance::CaseEntry& e : d.cases) {
    try {
      const Tensor x = conformance::read_case_input(d, e);
      const std::optional<DeviceOutput> dev = conformance::read_device_output(d, e);
      if (!e.expect_error.empty()) {
        // A case the contract must refuse: outputs for it are a failure; none are agreement. The
        // contract (perhaps overridden by --preset/--param) decides, the manifest only announces.
        if (!dev) continue;
        const conformance::ContractRun run = conformance::try_contract(c, x.view(), RunOptions{Engine::reference, 1});
        if (!run.output) {
          out.push_back({e.name, accepted_forbidden(c, *dev, run.error), false, true});
          continue;
        }
      }
      if (dev) {
        out.push_back({e.name, conformance::compare_device(c, x.view(), *dev), false});
        continue;
      }
      if (first_missing.empty()) first_missing = e.name;
      // Beside cases with outputs, a case without them is one the device refused: a difference
      // when the contract quantizes it, agreement when the contract refuses it too.
      try {
        out.push_back({e.name, conformance::compare_refusal(c, x.view()), true});
      } catch (const Error&) {
        // The contract refuses it too: device and contract agree, nothing to count.
      }
    } catch (const Error& err) {
      fail(err.kind(), "case \"" + e.name + "\": " + err.what());
    }
  }
  if (std::none_of(out.begin(), out.end(), [](const CaseResult& r) { return !r.refused; })) {
    std::string files;
    for (const std::string& f : conformance::device_output_files(c)) files += (files.empty() ? "" : ", ") + f;
    if (!first_missing.empty())
      fail(ErrorKind::bad_input, (d.root / first_missing).string() + ": no device outputs (" + files + ")");
  }
  if (out.empty()) fail(ErrorKind::bad_input, o.dir + ": no case with outputs to compare");
  return out;
}

// Diagnoses by signature over the cases, in the order first seen.
std::vector<conformance::MergedDiagnosis> aggregate(const std::vector<CaseResult>& results) {
  std::vector<conformance::CaseDiagnoses> cases;
  for (const CaseResult& r : results) cases.push_back({r.name, r.report.diagnoses});
  return conformance::merge_diagnoses(cases);
}

CompareReport totals(const std::vector<CaseResult>& results) {
  CompareReport t;
  for (const CaseResult& r : results) {
    const CompareReport& c = r.report;
    t.payload_bytes_total += c.payload_bytes_total;
    t.payload_bytes_differing += c.payload_bytes_differing;
    t.scale_bytes_total += c.scale_bytes_total;
    t.scale_bytes_differing += c.scale_bytes_differing;
    t.scales_differing += c.scales_differing;
    t.elements_total += c.elements_total;
    t.elements_differing += c.elements_differing;
    t.groups_total += c.groups_total;
    t.groups_differing += c.groups_differing;
    t.rows_total += c.rows_total;
    t.rows_differing += c.rows_differing;
    t.max_scale_delta = std::max(t.max_scale_delta, c.max_scale_delta);
    t.tensor_scale_bytes_total += c.tensor_scale_bytes_total;
    t.tensor_scale_bytes_differing += c.tensor_scale_bytes_differing;
    for (const auto& [d, n] : c.scale_delta_histogram) t.scale_delta_histogram[d] += n;
    if (t.scale_delta_unit.empty()) t.scale_delta_unit = c.scale_delta_unit;
  }
  return t;
}

void add_counts(Json& j, const CompareReport& r) {
  j["payload_bytes_total"] = r.payload_bytes_total;
  j["payload_bytes_differing"] = r.payload_bytes_differing;
  j["scale_bytes_total"] = r.scale_bytes_total;
  j["scale_bytes_differing"] = r.scale_bytes_differing;
  j["scales_differing"] = r.scales_differing;
  j["scale_delta_unit"] = r.scale_delta_unit;
  j["max_scale_delta"] = r.max_scale_delta;
  Json h = Json::object();
  for (const auto& [d, n] : r.scale_delta_histogram) h[std::to_string(d)] = n;
  j["scale_delta_histogram"] = h;
  if (r.tensor_scale_bytes_total > 0) {  // nvfp4 tensor_scale=amax (or a device that wrote one)
    j["tensor_scale_bytes_total"] = r.tensor_scale_bytes_total;
    j["tensor_scale_bytes_differing"] = r.tensor_scale_bytes_differing;
    j["tensor_scale_delta_ulps"] = r.tensor_scale_delta;
  }
  j["elements_total"] = r.elements_total;
  j["elements_differing"] = r.elements_differing;
  j["groups_total"] = r.groups_total;
  j["groups_differing"] = r.groups_differing;
  j["rows_total"] = r.rows_total;
  j["rows_differing"] = r.rows_differing;
}

Json diagnosis_json(const std::string& signature, const Json& evidence, const std::string& explanation, bool confirmed,
                    const std::vector<std::string>& cases) {
  Json j;
  j["signature"] = signature;
  j["evidence"] = evidence;
  j["explanation"] = explanation;
  j["confirmed"] = confirmed;
  j["cases"] = cases;
  return j;
}

void print_json(const Contract& c, const std::vector<CaseResult>& results) {
  const CompareReport t = totals(results);
  Json j;
  contract_to_json(j, c);
  j["identical"] = all_agree(results, t);
  add_counts(j, t);
  Json cases = Json::array();
  for (const CaseResult& r : results) {
    Json cj;
    cj["name"] = r.name;
    cj["refused_by_device"] = r.refused;
    cj["accepted_forbidden_input"] = r.accepted_forbidden;
    add_counts(cj, r.report);
    cj["first_payload_difference"] = r.report.first_payload_difference;
    cj["first_scale_difference"] = r.report.first_scale_difference;
    Json ds = Json::array();
    for (const Diagnosis& d : r.report.diagnoses) {
      Json ev = Json::object();
      for (const auto& [k, v] : d.evidence) ev[k] = v;
      ds.push_back(diagnosis_json(d.signature, ev, d.explanation, d.confirmed, {r.name}));
    }
    cj["diagnoses"] = ds;
    cases.push_back(cj);
  }
  j["cases"] = cases;
  Json ds = Json::array();
  for (const conformance::MergedDiagnosis& a : aggregate(results)) {
    Json ev = Json::object();
    for (const auto& [k, v] : a.diagnosis.evidence) ev[k] = v;
    ds.push_back(diagnosis_json(a.diagnosis.signature, ev, a.diagnosis.explanation, a.diagnosis.confirmed, a.cases));
  }
  j["diagnoses"] = ds;
  std::cout << io::json_text(j, 2) << std::endl;
}

std::string fraction(std::int64_t a, std::int64_t b) { return std::to_string(a) + " / " + std::to_string(b); }

void print_text(const Contract& c, const std::vector<CaseResult>& results) {
  std::cout << "qexact compare: the device's bytes against the reference of " << c.preset << "\n  ";
  for (const auto& [k, v] : params(c)) std::cout << ' ' << k << '=' << v;
  std::cout << "\n\n";
  char line[512];
  std::snprintf(line, sizeof line, "%-28s %24s %20s %9s %13s %13s\n", "case", "payload bytes diff/total",
                "scale bytes diff/tot", "max|dS|", "groups diff", "rows diff");
  std::cout << line;
  auto row = [&](const std::string& name, const CompareReport& r) {
    std::snprintf(line, sizeof line, "%-28s %24s %20s %9lld %13s %13s\n", name.c_str(),
                  fraction(r.payload_bytes_differing, r.payload_bytes_total).c_str(),
                  fraction(r.scale_bytes_differing, r.scale_bytes_total).c_str(),
                  static_cast<long long>(r.max_scale_delta), fraction(r.groups_differing, r.groups_total).c_str(),
                  fraction(r.rows_differing, r.rows_total).c_str());
    std::cout << line;
  };
  for (const CaseResult& r : results) row(r.name, r.report);
  const CompareReport t = totals(results);
  if (results.size() > 1) row("total", t);
  if (!t.scale_delta_histogram.empty()) {
    std::cout << "scale deltas (" << t.scale_delta_unit << ", device - reference):";
    for (const auto& [d, n] : t.scale_delta_histogram) std::cout << ' ' << (d > 0 ? "+" : "") << d << ": " << n;
    std::cout << "\n";
  }
  if (t.tensor_scale_bytes_total > 0)
    std::cout << "tensor scale bytes diff/total: " << fraction(t.tensor_scale_bytes_differing, t.tensor_scale_bytes_total)
              << "\n";
  for (const CaseResult& r : results) {
    const CompareReport& k = r.report;
    if (r.refused) {
      std::cout << r.name << ": the device refused it (no outputs); the contract quantizes it\n";
      continue;
    }
    if (r.accepted_forbidden) {
      std::cout << r.name << ": the device wrote outputs for an input the contract refuses\n";
      continue;
    }
    if (k.identical()) continue;
    std::cout << r.name << ": ";
    if (k.first_payload_difference >= 0) std::cout << "first payload difference at element " << k.first_payload_difference;
    else std::cout << "no payload byte differs";
    if (!k.scale_delta_unit.empty()) {  // a contract with scales
      if (k.first_scale_difference >= 0) std::cout << ", first scale difference at group " << k.first_scale_difference;
      else if (k.scale_bytes_differing > 0) std::cout << ", the scale tensor has another shape";
      else std::cout << ", no scale byte differs";
    }
    std::cout << "\n";
  }
  if (all_agree(results, t)) {
    std::cout << "\nidentical: every payload and scale byte matches\n";
    return;
  }
  const std::vector<conformance::MergedDiagnosis> diagnoses = aggregate(results);
  if (diagnoses.empty()) {
    std::cout << "\ndiagnoses: none of the known signatures matches\n";
    return;
  }
  std::cout << "\ndiagnoses:\n";
  for (const conformance::MergedDiagnosis& a : diagnoses) {
    std::cout << "  " << a.diagnosis.signature
              << (a.diagnosis.confirmed ? " (confirmed by a re-run)" : " (from the pattern)");
    if (results.size() > 1) {
      std::cout << " in " << a.cases.size() << " case(s):";
      for (const std::string& n : a.cases) std::cout << ' ' << n;
    }
    // The explanation is one case's (its counts are that case's); the evidence sums them all.
    std::cout << "\n    " << (a.cases.size() > 1 ? "in " + a.cases.front() + ": " : "") << a.diagnosis.explanation
              << "\n    evidence (all cases):";
    for (const auto& [k, v] : a.diagnosis.evidence) std::cout << ' ' << k << '=' << v;
    std::cout << "\n";
  }
}

int run_compare(const CompareOptions& o) {
  Contract c;
  std::vector<CaseResult> results;
  if (!o.dir.empty()) {
    if (!o.input.empty() || !o.payload.empty() || !o.scale.empty() || !o.tensor_scale.empty() || !o.output.empty() ||
        !o.dtype.empty())
      fail(ErrorKind::bad_argument,
           "compare: a case directory brings its inputs and outputs: no "
           "--input/--payload/--scale/--tensor-scale/--output/--dtype");
    results = compare_dir(o, c);
  } else {
    if (o.preset.empty()) fail(ErrorKind::bad_argument, "compare: --preset is required without a case directory");
    c = make_contract(o.preset, o.params);
    results = compare_files(o, c);
  }
  if (o.json) print_json(c, results);
  else print_text(c, results);
  return all_agree(results, totals(results)) ? 0 : 1;
}

}  // namespace

void add_compare(CLI::App& app, Action& action) {
  auto opts = std::make_shared<CompareOptions>();
  CLI::App* sub = app.add_subcommand(
      "compare", "Compare a device's outputs with a contract's reference, byte for byte, and diagnose the differences");
  sub->add_option("dir", opts->dir, "an exported case directory with the device's outputs beside each input");
  sub->add_option("--preset", opts->preset, "named contract (default with DIR: the manifest's)");
  sub->add_option("--param", opts->params, "override one contract parameter: key=value (repeatable)")
      ->allow_extra_args(false);
  sub->add_option("--input", opts->input, "the input X.npy the device quantized");
  sub->add_option("--payload", opts->payload, "the device's payload.npy");
  sub->add_option("--scale", opts->scale, "the device's scale.npy");
  sub->add_option("--tensor-scale", opts->tensor_scale,
                  "the device's tensor_scale.npy (contracts with a tensor scale: nvfp4 tensor_scale=amax)");
  sub->add_option("--output", opts->output, "the device's output.npy (hif4 fake-quant, pool.mean)");
  add_dtype_option(*sub, opts->dtype);
  sub->add_flag("--json", opts->json, "print JSON instead of text");
  sub->callback([opts, &action] { action = [opts] { return run_compare(*opts); }; });
}

}  // namespace qexact::cli
