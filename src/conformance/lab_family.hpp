// What the conformance lab needs of each family, one row per family (beside
// contracts/family_table's rows, which say what a family *is*): how the lab's cases lay out
// scale groups, the shape of the tail case, the largest code a group's scale maps its amax onto
// (which elements share a scale is the family row's grain), the family's probes and what
// diagnose tries in place of its granularity. The lab asks this table instead of switching on
// the family; a new family is one row here.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "conformance/cases.hpp"
#include "qexact/contract.hpp"
#include "qexact/tensor.hpp"

namespace qexact::conformance {

inline constexpr std::int64_t kCaseRowLen = 256;  // int8.token row length Q; fp8.scaled tensor/row rows
inline constexpr std::int64_t kCaseHeadDim = 16;  // int8.block D (small: the references are scalar)

// Another granularity or scale layout of a contract, for diagnose's stage 1 (contracts §8.5).
struct ScaleAlternative {
  Contract c;
  std::string signature;  // "granularity" or "scale_layout"
  std::string what;       // the change, in words
};

struct LabFamily {
  Family family;
  // Elements that share one scale in the cases (pool: one pooling window).
  std::int64_t (*group_len)(const Contract& c);
  // A shape of at least n full groups.
  Shape (*shape_for_groups)(const Contract& c, std::int64_t n);
  // The tail case's shape: partial groups along axis 1 (K of [T, K], S of (B, S, N, D)); the
  // pooled mean has its own cases (empty shape).
  Shape (*tail_shape)(const Contract& c);
  // The largest code magnitude a group's scale maps amax onto: the element max (MX,
  // fp8.scaled), qmax (int8: 127, or 127.5 for compressed-tensors), 7 (HiF4), 6 (nvfp4).
  float (*top_code)(const Contract& c);
  // The amaxes of the amax_sweep case: top * 2^k and values that stress the scale rule.
  std::vector<double> (*sweep_amaxes)(const Contract& c);
  // The discriminating probes for c (probes.hpp).
  std::vector<Case> (*probes)(const Contract& c);
  // Diagnose's stage 1: the other granularities and scale layouts of c on input shape x whose
  // scale shape may be the device's (none where the family has no such parameters, or where
  // the search over its parameters diagnoses it, fp8.scaled and nvfp4).
  std::vector<ScaleAlternative> (*scale_alternatives)(const Contract& c, const Shape& x);
  // c's granularity in words, for diagnose's granularity finding ("one scale per complete row").
  std::string (*granularity_words)(const Contract& c);
};

const LabFamily& lab_family(Family f);

}  // namespace qexact::conformance
