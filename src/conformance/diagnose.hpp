// Naming why a device's bytes differ from a contract's (contracts §8.5-8.6), in stages:
//  1. granularity and layout first (§8.5): a scale tensor of another shape, or of the same
//     shape with the bytes in another order, is matched against the contract run with another
//     block / group / token block, or another scale layout, of the same values;
//  2. scales: the contract is re-run with each suspected parameter changed (bf16 pre-rounding
//     off, another scale rule or mode, reciprocal ratio, non-finite rule) and a change that
//     reproduces every device scale names the cause;
//  3. payload: the input is re-quantized with the device's own scales (ref::quantize_with_scales)
//     so that payload bytes that merely follow a different scale are told from payload errors;
//     those are classified (non-finite group, flushed group, saturation, exact tie, off-tie) and
//     matched against re-runs (rounding, quotient, overflow, byte-0 and non-finite rules) and
//     patterns (one code toward zero: truncation; wrapped mod 256: wrap-around; only in the
//     partial last block: the tail rule; sparse off-tie steps of one code: a reciprocal).
#pragma once
#include <vector>

#include "conformance/compare.hpp"
#include "conformance/contract_output.hpp"

namespace qexact::conformance {

// reference: c's reference outputs for x; device: outputs of the same dtypes and payload
// shape (compare_device checks); a scale of another shape is handled here (stage 1) and throws
// bad_input when nothing explains it.
std::vector<Diagnosis> diagnose(const Contract& c, const TensorView& x, const ContractOutput& reference,
                                const DeviceOutput& device);

}  // namespace qexact::conformance
