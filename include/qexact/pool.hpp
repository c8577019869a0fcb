// Deterministic pooled side channel (CONTRACTS §6): block means over the sequence axis.
// x has shape (B, S, F...) with the sequence on axis 1; pool size P; the result has shape
// (B, ceil(S/P), F...) and each cell is the exact mean of its real elements (the tail cell
// divides by S % P, not P), rounded once to the output dtype (RNE). Sums are exact (no fp32
// accumulation), so the result does not depend on how the sequence was sharded or summed.
#pragma once
#include <cstdint>
#include <vector>

#include "qexact/quantize.hpp"
#include "qexact/tensor.hpp"

namespace qexact {

// Exact mean over the whole sequence. x: f32, bf16 or f16, any strides, finite elements;
// pool >= 1; out: f32, bf16 or f16. An exact zero mean is +0. PoolDivisor (contract.hpp):
// true_length is the contract; uniform divides the tail cell by P too, as a device that gets
// the tail rule wrong does.
Tensor pooled_block_mean(const TensorView& x, std::int64_t pool, DType out = DType::f32, const RunOptions& o = {},
                         PoolDivisor divisor = PoolDivisor::true_length);

// The same computed the way a sharded run does it: each rank holds x[:, offset : offset+len]
// and contributes, per cell it touches, an exact partial sum and its element count; the
// partials are combined in rank order and each cell is divided once.
// shards: views of the ranks' slices, in rank order, covering the sequence without gaps: each
// of rank >= 2 with the same batch and feature dimensions (a shard may hold no rows).
// Elements must be finite (NaN or +/-inf throws bad_input naming the shard and the index).
Tensor pooled_block_mean_sharded(const std::vector<TensorView>& shards, std::int64_t pool, DType out,
                                 PoolDivisor divisor = PoolDivisor::true_length);

}  // namespace qexact
