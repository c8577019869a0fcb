#include "out_checks.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

namespace qexact::out_checks {
namespace {

// The bytes a view spans, [lo, hi), whatever its strides' signs; empty for no elements.
struct Span {
  std::uintptr_t lo = 0, hi = 0;
};

Span span_of(const TensorView& v) {
  if (v.data == nullptr || v.numel() == 0) return {};
  const auto es = static_cast<std::int64_t>(dtype_size(v.dtype));
  std::int64_t low = 0, high = 0;  // element offsets of the extreme elements
  for (std::size_t i = 0; i < v.shape.size(); ++i) {
    const std::int64_t reach = (v.shape[i] - 1) * v.strides[i];
    (reach < 0 ? low : high) += reach;
  }
  const auto base = reinterpret_cast<std::uintptr_t>(v.data);
  return {base + static_cast<std::uintptr_t>(low * es), base + static_cast<std::uintptr_t>((high + 1) * es)};
}

bool overlap(const Span& a, const Span& b) { return a.lo < a.hi && b.lo < b.hi && a.lo < b.hi && b.lo < a.hi; }

}  // namespace

void require_output(const MutableTensorView& out, DType dtype, const Shape& shape, const char* what) {
  if (out.dtype != dtype || out.shape != shape)
    fail(ErrorKind::bad_argument, std::string(what) + " must be " + dtype_name(dtype) + " of shape " +
                                      shape_str(shape) + ", got " + dtype_name(out.dtype) + " " + shape_str(out.shape));
  if (out.strides.size() != out.shape.size() || !out.is_contiguous())
    fail(ErrorKind::bad_argument, std::string(what) + " must be C-contiguous, got strides " +
                                      shape_str(out.strides) + " for shape " + shape_str(out.shape));
  if (out.data == nullptr && shape_numel(shape) > 0)
    fail(ErrorKind::bad_argument, std::string(what) + " has no memory (null data)");
}

void require_disjoint(const std::vector<Named>& outputs, const std::vector<Named>& inputs) {
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const Span o = span_of(outputs[i].view);
    for (const Named& in : inputs)
      if (overlap(o, span_of(in.view)))
        fail(ErrorKind::bad_argument, std::string(outputs[i].name) + " overlaps the input " + in.name +
                                          ": outputs must not share memory with inputs");
    for (std::size_t j = i + 1; j < outputs.size(); ++j)
      if (overlap(o, span_of(outputs[j].view)))
        fail(ErrorKind::bad_argument, std::string(outputs[i].name) + " overlaps " + outputs[j].name);
  }
}

}  // namespace qexact::out_checks
