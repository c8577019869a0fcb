// The fast pooled block mean (contracts §6, qexact/pool.hpp), the entry point of pool_fast.cpp;
// the rules every fast entry point follows (checks, threads, determinism) are in
// kernels/cpu/README.md.
#pragma once
#include <cstdint>

#include "qexact/pool.hpp"
#include "qexact/tensor.hpp"

namespace qexact::fast {

Tensor pooled_block_mean(const TensorView& x, std::int64_t pool, DType out, int threads,
                         PoolDivisor divisor = PoolDivisor::true_length);

}  // namespace qexact::fast
