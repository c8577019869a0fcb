// The exported conformance suite of a contract: the adversarial cases (contracts §8.4), the
// synthetic activation set and the discriminating probes, as `qexact cases` writes them.
#pragma once
#include <cstdint>
#include <filesystem>
#include <vector>

#include "conformance/case_dir.hpp"
#include "conformance/cases.hpp"

namespace qexact::conformance {

struct Suite {
  std::vector<Case> adversarial, activation, probes;
  // Every case with its kind ("adversarial", "activation", "probe"), in that order.
  std::vector<ExportCase> exported() const;
};

Suite build_suite(const Contract& c, std::uint64_t seed);

// build_suite + write_case_dir: `dir` must not exist yet.
void export_suite(const std::filesystem::path& dir, const Contract& c, std::uint64_t seed);

}  // namespace qexact::conformance
