// What the conformance lab needs of each family, one row per family (beside
// contracts/family_table's rows, which say what a family *is*): how the lab's cases lay out
// scale groups, the shape of the tail case and the largest code a group's scale maps its amax
// onto (which elements share a scale is the family row's grain). The lab asks this table instead
// of switching on the family; a new family is one row here.
#pragma once
#include <cstdint>
#include <vector>

#include "qexact/contract.hpp"
#include "qexact/tensor.hpp"

namespace qexact::conformance {

inline constexpr std::int64_t kCaseRowLen = 256;  // int8.token row length Q; fp8.scaled tensor/row rows
inline constexpr std::int64_t kCaseHeadDim = 16;  // int8.block D (small: the references are scalar)

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
  // fp8.scaled), 127 (int8), 7 (HiF4), 6 (nvfp4).
  float (*top_code)(const Contract& c);
  // The amaxes of the amax_sweep case: top * 2^k and values that stress the scale rule.
  std::vector<double> (*sweep_amaxes)(const Contract& c);
};

const LabFamily& lab_family(Family f);

}  // namespace qexact::conformance
