// Diagnosis by re-running the contract with its own parameters changed, for the families whose
// every porting mistake is a parameter value (fp8.scaled, nvfp4: contracts §9): the divisor
// recomputed as a reciprocal (quotient=reciprocal), a multiplier stored where a descale is
// wanted or 1/s stored (scale_kind, stored=inverse), power-of-two scales (scale_pow2), another
// scale arithmetic, zero-group or non-finite rule, a missing or extra tensor scale
// (tensor_scale), another granularity. Nothing is spelled here: the candidates are params(c)
// and param_choices(key) (granularity: every grain the input's shape allows), one change at a
// time, then pairs (a change the contract refuses alone, e.g. scale_kind=multiplier, is valid
// with quotient=multiply). A change that reproduces every output byte is a confirmed
// diagnosis; when none does, the pattern of the differences is named (scale deltas in the
// scale's own encoding, sparse off-tie payload steps), unconfirmed.
#pragma once
#include <vector>

#include "conformance/compare.hpp"
#include "conformance/contract_output.hpp"

namespace qexact::conformance {

// Whether c's family is diagnosed this way (one whose scale outputs the reference cannot be
// handed back, i.e. without ref::quantize_with_scales).
bool diagnosed_by_search(const Contract& c);

// reference: c's reference outputs for x; device: the device's (payload of the contract's dtype
// and shape; scale of its dtype, any shape). Throws bad_input when the device's scale has a
// shape that no granularity of the contract gives.
std::vector<Diagnosis> diagnose_by_search(const Contract& c, const TensorView& x, const ContractOutput& reference,
                                          const DeviceOutput& device);

}  // namespace qexact::conformance
