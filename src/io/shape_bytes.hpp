// The byte size a file claims for a tensor, checked before anything is allocated from it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>

#include "qexact/tensor.hpp"

namespace qexact::io {

// product(shape) * itemsize, or nothing when it does not fit in an int64. A zero dimension does
// not excuse the others: their product must fit too, as strides are computed from it.
// Dimensions must already be known non-negative.
inline std::optional<std::uint64_t> shape_bytes(const Shape& shape, std::size_t itemsize) {
  constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  std::uint64_t nonzero_product = itemsize;
  bool has_zero = false;
  for (std::int64_t d : shape) {
    const auto ud = static_cast<std::uint64_t>(d);
    if (ud == 0) {
      has_zero = true;
      continue;
    }
    if (nonzero_product > kMax / ud) return std::nullopt;
    nonzero_product *= ud;
  }
  return has_zero ? 0 : nonzero_product;
}

}  // namespace qexact::io
