#include "conformance/suite.hpp"

#include "conformance/probes.hpp"

namespace qexact::conformance {

std::vector<ExportCase> Suite::exported() const {
  std::vector<ExportCase> out;
  for (const Case& k : adversarial) out.push_back({&k, "adversarial"});
  for (const Case& k : activation) out.push_back({&k, "activation"});
  for (const Case& k : probes) out.push_back({&k, "probe"});
  return out;
}

Suite build_suite(const Contract& c, std::uint64_t seed) {
  Suite s;
  s.adversarial = adversarial_cases(c, seed);
  s.activation = activation_set(c);
  s.probes = discriminating_probes(c);
  return s;
}

void export_suite(const std::filesystem::path& dir, const Contract& c, std::uint64_t seed) {
  const Suite s = build_suite(c, seed);
  write_case_dir(dir, c, s.exported());
}

}  // namespace qexact::conformance
