// Contract inference (`qexact infer`): from a device's outputs for exported cases, search the
// contract parameter space for the contract that reproduces every byte.
//
// Search: start from every preset whose family fits the device's files (the manifest's family,
// and any other whose payload has the device's dtype and shape, e.g. per-tile int8.group
// scales for an int8.token export), then coordinate descent: each parameter of params(c) tried
// at each candidate value (param_choices for enumerated ones; a candidate list for numeric
// ones, plus scale_min values read from the device's scales of all-zero domains); a change the
// contract rejects is retried together with one change of another parameter that makes it
// valid (e.g. layout=swizzled with tail=reject). The best single move is taken while it explains
// the device better: first more of the device's payloads, then of its scales, given their dtype
// and shape, then fewer differing bytes; the best end point over all starts wins. Candidates run on the
// fast engine. A parameter another value of which fits the outputs just as well is reported as
// undetermined, not guessed. A case the device refused (no outputs) matches a candidate that
// rejects it too; otherwise all of the bytes of the side that has outputs count as differing.
//
// When only a closest contract is found, its residual is attributed: compare's diagnoses
// (compare.hpp) of that contract against the device, on the cases that still differ. A case
// whose device payload (or single output) has another dtype or shape than that contract's is
// ErrorKind::bad_input naming the case, as compare_device refuses it.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "conformance/case_dir.hpp"
#include "conformance/compare.hpp"
#include "qexact/contract.hpp"

namespace qexact::conformance {

struct CaseResidual {
  std::string name;
  std::int64_t payload_bytes_differing = 0, scale_bytes_differing = 0;
  std::string note;  // "" or "the device refused it; the contract does not" / the converse
  std::string undiagnosed;  // "" or why compare could not diagnose the case (e.g. a scale of another dtype)
};

struct InferResult {
  bool exact = false;
  Contract contract;                                    // the contract found
  std::string preset;                                   // the preset it is (or is based on)
  std::vector<std::pair<std::string, std::string>> overrides;  // its parameters that differ from the preset's
  std::vector<std::string> also_exact;                  // other presets that reproduce every byte
  std::map<std::string, std::vector<std::string>> undetermined;  // parameter -> other values fitting as well
  std::int64_t payload_bytes_differing = 0, scale_bytes_differing = 0;
  std::int64_t payload_bytes_total = 0, scale_bytes_total = 0;  // of the device's outputs
  std::vector<CaseResidual> cases;                      // the cases with differences
  std::vector<MergedDiagnosis> diagnoses;               // of those differences, by signature
  std::int64_t cases_with_outputs = 0;
  std::int64_t candidates_evaluated = 0;
};

struct InferOptions {
  std::optional<Family> family;  // restrict the search to one family
  int threads = 1;               // of the fast engine, per candidate
};

InferResult infer_contract(const CaseDir& dir, const InferOptions& o = {});

// The values the search tries for parameter `key` of contract c (the current value included).
// Enumerated parameters: param_choices(key); numeric ones: a list per parameter.
std::vector<std::string> candidate_values(const Contract& c, const std::string& key);

Family parse_family(const std::string& name);  // a family_table() name: "mx", "int8.block", ..., "nvfp4"

}  // namespace qexact::conformance
