// The test tensors of a distributed run: every rank builds the same full tensor from the seed
// and the tensor's name, with no communication, so each can take its shard and also compute
// the single-process reference. Values come from a counter-based hash of (seed, name, index):
// roughly normal, scaled per channel (last axis) and per token (axis 1) by powers of two from
// 1/4 to 4, with about one element in 2000 an outlier 32x larger, then rounded to the dtype.
#pragma once
#include <cstdint>
#include <string>

#include "qexact/tensor.hpp"

namespace qexact::dist {

Tensor synthetic_tensor(const Shape& shape, DType dtype, std::uint64_t seed, const std::string& name);

}  // namespace qexact::dist
