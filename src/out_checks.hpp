// Checks of caller-provided outputs (the out= entry points, quantize_into and its siblings):
// dtype, shape, contiguity and overlap, all run before a kernel writes anything.
#pragma once
#include <vector>

#include "qexact/tensor.hpp"

namespace qexact::out_checks {

// `out` must be C-contiguous `dtype` of `shape` over non-null memory; bad_argument naming `what`.
void require_output(const MutableTensorView& out, DType dtype, const Shape& shape, const char* what);

struct Named {
  const char* name;
  TensorView view;
};
// No output may share a byte with an input or another output: bad_argument naming both.
void require_disjoint(const std::vector<Named>& outputs, const std::vector<Named>& inputs);

}  // namespace qexact::out_checks
