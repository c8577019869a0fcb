// Dimensions of a strided view, merged where their strides allow and with size-1 dimensions
// dropped, to find an element's offset quickly: (size, stride) pairs, outermost first, offsets
// and strides in elements.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "qexact/tensor.hpp"

namespace qexact::kernels {

class StridedDims {
 public:
  StridedDims() = default;
  // Dimensions [first, last) of a view.
  StridedDims(const Shape& shape, const Shape& strides, std::size_t first, std::size_t last) {
    for (std::size_t d = first; d < last; ++d) {
      if (shape[d] == 1) continue;
      // A dimension continues the previous one when one step of the previous one is a walk
      // over the whole of it.
      if (!dims_.empty() && dims_.back().second == strides[d] * shape[d]) {
        dims_.back() = {dims_.back().first * shape[d], strides[d]};
      } else {
        dims_.emplace_back(shape[d], strides[d]);
      }
    }
  }

  // Offset of the element with C-order index `flat` over these dimensions.
  std::int64_t offset_of(std::int64_t flat) const {
    if (dims_.empty()) return 0;
    if (dims_.size() == 1) return flat * dims_[0].second;
    std::int64_t off = 0;
    for (std::size_t d = dims_.size(); d-- > 0;) {
      off += (flat % dims_[d].first) * dims_[d].second;
      flat /= dims_[d].first;
    }
    return off;
  }
  // True when the elements are at offsets index * stride(): at most one dimension is left.
  bool single_stride() const { return dims_.size() <= 1; }
  std::int64_t stride() const { return dims_.empty() ? 1 : dims_[0].second; }
  // True when the elements are one run of unit stride (or a single element).
  bool unit_stride() const { return single_stride() && stride() == 1; }

 private:
  std::vector<std::pair<std::int64_t, std::int64_t>> dims_;
};

}  // namespace qexact::kernels
