// Discriminating probes: small directed inputs, per family, each built so that one contract
// parameter changes output bytes in a known place (contracts §1's amax sweep and layout marker,
// §8.4-§8.6's signatures). Exported with the adversarial cases (`qexact cases`, kind "probe"),
// they are what make the parameters separable when `qexact infer` searches the contract space.
//
// Each probe's target is a discriminates(param) predicate: the number of output bytes (payload
// and scale together) on which the contract's variants over that parameter's values do not all
// agree, recomputed by running the reference engine. A variant is the contract with the
// parameter set to one value, in a context where the parameter matters (e.g. log2_fp32 under
// scale_rule=floor, quotient=reciprocal under scale_mode=before); a variant the contract family cannot take is
// left out. A probe whose parameter cannot change any byte under the given contract (e.g.
// overflow when no scaled value can pass the element max) is not generated, so every probe
// returned has hits > 0.
//
// No probe can separate the MX ratio parameter (rceil's amax / max vs amax * fp32(1 / max)):
// the two quotients can only fall on different sides of a power of two for amax next to
// max * 2^k, and for every element max of the family they do not (test_probes checks
// the 64 fp32 values either side of max * 2^k for every k); infer reports it as undetermined.
#pragma once
#include <string>
#include <vector>

#include "conformance/cases.hpp"
#include "qexact/contract.hpp"

namespace qexact::conformance {

// The probes for contract c (deterministic: no seed, same bytes on every platform): its
// family's, by the family's row of lab_family.
std::vector<Case> discriminating_probes(const Contract& c);
// Each family's probes, unchecked (discriminating_probes validates c first).
std::vector<Case> mx_probes(const Contract& c);
std::vector<Case> int8_probes(const Contract& c);  // int8.block, int8.token, int8.group
std::vector<Case> hif4_probes(const Contract& c);
std::vector<Case> pool_probes(const Contract& c);
std::vector<Case> fp8_scaled_probes(const Contract& c);
std::vector<Case> nvfp4_probes(const Contract& c);

// Output bytes where the variants of c over `param` = each of `values` disagree (a rejected
// input counts as no bytes; outputs of different sizes disagree everywhere). `context`:
// "key=value" overrides applied first.
Predicate discriminates(const std::string& param, const std::vector<std::string>& values,
                        const std::vector<std::string>& context = {});

}  // namespace qexact::conformance
