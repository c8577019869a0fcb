// `qexact infer DIR [--json] [--family F]`: the contract that reproduces every byte of a
// device's outputs for exported cases (conformance/infer.hpp). `qexact infer QUANTIZED --source
// ORIGINAL [--lab LAB]`: the same for a quantized model folder, through a lab of its tensors
// (model/folder_lab.hpp). Exit 0 when one does, 1 when
// only a closest one was found (its residual reported and diagnosed), 2 on bad input.
#include <iostream>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "contracts/family_table.hpp"
#include "conformance/infer.hpp"
#include "contracts/contract_json.hpp"
#include "io/json_text.hpp"
#include "io/temp_dir.hpp"
#include "model/folder_lab.hpp"

namespace qexact::cli {
namespace {

struct InferCliOptions {
  std::string dir;
  bool json = false;
  std::string family;
  int threads = 1;
  std::string source, lab, preset;  // a model folder's: its source, where to keep its lab, the start
  int tensors = 4;
};

nlohmann::ordered_json to_json(const conformance::InferResult& r) {
  nlohmann::ordered_json j;
  j["exact"] = r.exact;
  j["preset"] = r.preset.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.preset);
  j["family"] = family_name(r.contract.family);
  j["params"] = contract_params_json(r.contract);
  nlohmann::ordered_json overrides = nlohmann::ordered_json::object();
  for (const auto& [k, v] : r.overrides) overrides[k] = v;
  j["overrides"] = overrides;
  nlohmann::ordered_json undetermined = nlohmann::ordered_json::array();
  nlohmann::ordered_json alternatives = nlohmann::ordered_json::object();
  for (const auto& [k, values] : r.undetermined) {
    undetermined.push_back(k);
    alternatives[k] = values;
  }
  j["undetermined"] = undetermined;
  j["undetermined_alternatives"] = alternatives;
  j["also_exact"] = r.also_exact;
  nlohmann::ordered_json residual;
  residual["payload_bytes_differing"] = r.payload_bytes_differing;
  residual["payload_bytes_total"] = r.payload_bytes_total;
  residual["scale_bytes_differing"] = r.scale_bytes_differing;
  residual["scale_bytes_total"] = r.scale_bytes_total;
  nlohmann::ordered_json cases = nlohmann::ordered_json::object();
  for (const auto& c : r.cases) {
    nlohmann::ordered_json cj;
    cj["payload_bytes_differing"] = c.payload_bytes_differing;
    cj["scale_bytes_differing"] = c.scale_bytes_differing;
    if (!c.note.empty()) cj["note"] = c.note;
    if (!c.undiagnosed.empty()) cj["undiagnosed"] = c.undiagnosed;
    cases[c.name] = cj;
  }
  residual["cases"] = cases;
  nlohmann::ordered_json diagnoses = nlohmann::ordered_json::array();
  for (const conformance::MergedDiagnosis& m : r.diagnoses) {
    nlohmann::ordered_json d;
    d["signature"] = m.diagnosis.signature;
    nlohmann::ordered_json evidence = nlohmann::ordered_json::object();
    for (const auto& [k, v] : m.diagnosis.evidence) evidence[k] = v;
    d["evidence"] = evidence;
    d["explanation"] = m.diagnosis.explanation;
    d["confirmed"] = m.diagnosis.confirmed;
    d["cases"] = m.cases;
    diagnoses.push_back(d);
  }
  residual["diagnoses"] = diagnoses;
  j["residual"] = residual;
  j["cases_with_outputs"] = r.cases_with_outputs;
  j["candidates_evaluated"] = r.candidates_evaluated;
  return j;
}

void print_text(const conformance::InferResult& r, std::ostream& out) {
  std::string name = r.preset;
  for (const auto& [k, v] : r.overrides) name += " " + k + "=" + v;
  out << (r.exact ? "exact: " : "closest: ") << name << "\n";
  out << "  family " << family_name(r.contract.family) << ":";
  for (const auto& [k, v] : qexact::params(r.contract)) out << " " << k << "=" << v;
  out << "\n";
  out << "  payload bytes differing: " << r.payload_bytes_differing << " of " << r.payload_bytes_total
      << ", scale bytes differing: " << r.scale_bytes_differing << " of " << r.scale_bytes_total << " ("
      << r.cases_with_outputs << " cases with device outputs, " << r.candidates_evaluated << " contracts tried)\n";
  if (!r.also_exact.empty()) {
    out << "  also exact:";
    for (const auto& p : r.also_exact) out << " " << p;
    out << "\n";
  }
  for (const auto& [k, values] : r.undetermined) {
    out << "  undetermined: " << k << " (these outputs fit equally with";
    for (const auto& v : values) out << " " << v;
    out << ")\n";
  }
  for (const auto& c : r.cases) {
    out << "  case " << c.name << ": " << c.payload_bytes_differing << " payload, " << c.scale_bytes_differing
        << " scale bytes differ";
    if (!c.note.empty()) out << " (" << c.note << ")";
    if (!c.undiagnosed.empty()) out << "; not diagnosed: " << c.undiagnosed;
    out << "\n";
  }
  if (r.exact) return;
  out << "  residual: " << r.payload_bytes_differing << " payload bytes, " << r.scale_bytes_differing
      << " scale bytes in " << r.cases.size() << " case(s), diagnosis:";
  if (r.diagnoses.empty()) out << " none of the known signatures matches";
  for (std::size_t i = 0; i < r.diagnoses.size(); ++i) out << (i ? ", " : " ") << r.diagnoses[i].diagnosis.signature;
  out << "\n";
  for (const conformance::MergedDiagnosis& m : r.diagnoses) {
    out << "    " << m.diagnosis.signature << (m.diagnosis.confirmed ? " (confirmed by a re-run)" : " (from the pattern)")
        << " in " << m.cases.size() << " case(s):";
    for (const std::string& n : m.cases) out << " " << n;
    out << "\n      " << (m.cases.size() > 1 ? "in " + m.cases.front() + ": " : "") << m.diagnosis.explanation
        << "\n      evidence (all cases):";
    for (const auto& [k, v] : m.diagnosis.evidence) out << " " << k << "=" << v;
    out << "\n";
  }
}

int run_infer(const InferCliOptions& o) {
  conformance::InferOptions io;
  if (!o.family.empty()) io.family = conformance::parse_family(o.family);
  io.threads = o.threads;
  if (o.source.empty() && (!o.lab.empty() || !o.preset.empty()))
    fail(ErrorKind::bad_argument, "--lab and --preset apply to a model folder, with --source");
  std::optional<io::TempDir> tmp;
  std::string dir = o.dir;
  if (!o.source.empty()) {
    // A model folder: its quantized tensors become a lab first (kept where --lab says).
    if (o.lab.empty()) tmp.emplace("qexact-infer-");
    dir = o.lab.empty() ? (tmp->path() / "lab").string() : o.lab;
    const std::vector<std::string> names = model::write_folder_lab(o.dir, o.source, dir, {o.preset, o.tensors});
    if (!o.json) {
      std::cout << "lab" << (o.lab.empty() ? "" : " " + o.lab) << ": " << names.size() << " quantized tensors of " << o.dir << ":";
      for (const std::string& n : names) std::cout << " " << n;
      std::cout << "\n";
    }
  }
  const conformance::InferResult r = conformance::infer_contract(conformance::read_case_dir(dir), io);
  if (o.json) std::cout << io::json_text(to_json(r), 2) << "\n";
  else print_text(r, std::cout);
  return r.exact ? 0 : 1;
}

}  // namespace

void add_infer(CLI::App& app, Action& action) {
  auto opts = std::make_shared<InferCliOptions>();
  CLI::App* sub = app.add_subcommand("infer", "Find the contract that reproduces a device's outputs for exported cases");
  sub->add_option("dir", opts->dir,
                  "a directory written by `qexact cases`, with the device's outputs; with --source, a quantized model folder")
      ->required();
  sub->add_option("--source", opts->source,
                  "DIR is a quantized model folder made from this one: infer the recipe of its smallest quantized "
                  "tensors (those quantized under their own amax)");
  sub->add_option("--lab", opts->lab, "with --source: write the lab there (a new directory) and keep it, for `qexact compare`");
  sub->add_option("--preset", opts->preset, "with --source: start from this preset, not the one the folder's config names");
  sub->add_option("--tensors", opts->tensors, "with --source: how many tensors the lab holds")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  sub->add_flag("--json", opts->json, "print the result as JSON");
  std::string families;
  for (const FamilyTraits& t : family_table()) families += (families.empty() ? "" : ", ") + std::string(t.name);
  sub->add_option("--family", opts->family, "search only this family (" + families + ")");
  sub->add_option("--threads", opts->threads, "threads of the fast engine per candidate (0: QEXACT_THREADS, else one per core)")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  sub->callback([opts, &action] { action = [opts] { return run_infer(*opts); }; });
}

}  // namespace qexact::cli
