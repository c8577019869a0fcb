// Scalar reference of the pooled block mean (contracts §6, qexact/pool.hpp); the rules every
// reference follows are in reference/README.md.
#pragma once
#include <cstdint>

#include "qexact/pool.hpp"
#include "qexact/tensor.hpp"

namespace qexact::ref {

Tensor pooled_block_mean(const TensorView& x, std::int64_t pool, DType out,
                         PoolDivisor divisor = PoolDivisor::true_length);

}  // namespace qexact::ref
