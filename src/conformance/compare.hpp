// Comparing a device's outputs for an input with the contract's reference outputs, computed in
// the same process by the reference engine (contracts §8.1-8.2): payload and scale bytes
// differing as absolute counts, the scale deltas in the scale's own encoding (MX: E8M0 steps;
// nvfp4: E4M3 codes; float scales: units in the last place), an nvfp4 tensor scale, the groups (scale domains) and rows affected, the first differences, and the
// diagnoses of diagnose.hpp. HiF4 and pool.mean have one output, counted as the payload.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "conformance/case_dir.hpp"
#include "qexact/contract.hpp"
#include "qexact/tensor.hpp"

namespace qexact::conformance {

struct Diagnosis {
  std::string signature;  // a stable id: amax_fp32_not_bf16, rounding_mode, reciprocal_divisor, tail_rule,
                          // wraparound, granularity, scale_layout, flush_rule, nonfinite_rule, scale_rule
  std::vector<std::pair<std::string, std::int64_t>> evidence;  // counts, by name
  std::string explanation;  // one sentence in plain words
  bool confirmed = false;   // re-running the contract with the suspected change reproduced the device's bytes
};

struct CompareReport {
  std::int64_t payload_bytes_total = 0, payload_bytes_differing = 0;
  std::int64_t scale_bytes_total = 0, scale_bytes_differing = 0;
  std::string scale_delta_unit;  // "E8M0 steps", "E4M3 codes", "ulps of f32", "ulps of f16"; "" without scales
  std::int64_t max_scale_delta = 0;
  std::map<std::int64_t, std::int64_t> scale_delta_histogram;  // device - reference -> groups
  std::int64_t elements_total = 0, elements_differing = 0;
  std::int64_t scales_differing = 0;  // groups whose scale differs (every group when the scale has another shape)
  std::int64_t groups_total = 0, groups_differing = 0;  // groups with a differing scale or element
  std::int64_t rows_total = 0, rows_differing = 0;
  std::int64_t first_payload_difference = -1;  // flat element index (C order), -1: none
  std::int64_t first_scale_difference = -1;    // flat group index on the logical grid, -1: none
  // The fp32 tensor scale (nvfp4 tensor_scale=amax), when the contract or the device has one:
  // its bytes, and device - reference in ulps of f32 when both have it. 0 / 0 when neither has.
  std::int64_t tensor_scale_bytes_total = 0, tensor_scale_bytes_differing = 0;
  std::int64_t tensor_scale_delta = 0;
  std::vector<Diagnosis> diagnoses;

  bool identical() const {
    return payload_bytes_differing == 0 && scale_bytes_differing == 0 && tensor_scale_bytes_differing == 0;
  }
};

// The device's outputs for x: payload + scale for the quantizing families, `output` for HiF4
// and pool.mean (DeviceOutput of case_dir.hpp). A payload or output of the wrong dtype or
// shape, or a scale of the wrong dtype, is ErrorKind::bad_input naming both; a scale of another
// shape is diagnosed when another granularity or layout of the contract gives that shape,
// else bad_input naming both shapes.
CompareReport compare_device(const Contract& c, const TensorView& x, const DeviceOutput& device);

// Two contracts on the same input: `actual`'s outputs (run with `run`) compared with
// `expected`'s reference as compare_device compares a device's. The contracts must give the
// same payload and scale grid (same family, element, block, group, token block and scale
// store), else bad_argument naming the parameter; MX scales in another layout are laid out
// in expected's (compared on the logical grid: the same values in two layouts are identical).
CompareReport compare_contracts(const Contract& expected, const Contract& actual, const TensorView& x,
                                const RunOptions& run);

// The device refused x (it wrote no outputs) where c quantizes it: every byte of c's outputs
// differs. When x has a partial last block, the refusal is diagnosed as the tail rule (a
// device that rejects tails), from the pattern.
CompareReport compare_refusal(const Contract& c, const TensorView& x);

// One case's diagnoses, and the diagnoses of several cases merged by signature (in the order
// first seen): evidence summed, the explanation of the first case (cases.front(); its counts
// are that case's), confirmed only when every case's is.
struct CaseDiagnoses {
  std::string name;
  std::vector<Diagnosis> diagnoses;
};
struct MergedDiagnosis {
  Diagnosis diagnosis;
  std::vector<std::string> cases;
};
std::vector<MergedDiagnosis> merge_diagnoses(const std::vector<CaseDiagnoses>& cases);

}  // namespace qexact::conformance
