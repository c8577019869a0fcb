// Deterministic pooled side channel (contracts §6): block means over the sequence axis.
// x has shape (B, S, F...) with the sequence on axis 1; pool size P; the result has shape
// (B, ceil(S/P), F...) and each cell is the exact mean of its real elements (the tail cell
// divides by S % P, not P), rounded once to the output dtype (RNE). Sums are exact (no fp32
// accumulation), so the result does not depend on how the sequence was sharded or summed.
#pragma once
#include <cstdint>
#include <span>
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

// ---- The same, one shard per process (the side channel of contracts §6 across ranks) ----
// A shard's contribution as data that can travel: per cell its rows touch, the exact partial
// sums (384-bit integers in units of 2^-149, kPoolSumLimbs limbs each, least significant first)
// and the row count. Exact integers make the combination independent of how the sequence was
// split; only the final division rounds.
inline constexpr int kPoolSumLimbs = 6;
struct PoolPartial {
  std::int64_t first_cell = 0;      // global index of the first cell the shard's rows fall in
  std::int64_t cells = 0;           // cells touched (0 for a shard without rows)
  std::vector<std::uint64_t> rows;  // [cells]: the shard's rows in each touched cell
  std::vector<std::uint64_t> sums;  // [batch, cells, features, kPoolSumLimbs]
};

// The partial of x = the full tensor's rows [offset, offset + x.shape[1]) (checks as
// pooled_block_mean: float dtype, rank >= 2, finite values; offset >= 0, pool >= 1).
PoolPartial pooled_partial(const TensorView& x, std::int64_t offset, std::int64_t pool);

// Merges the partials in the order given (rank order) and divides each cell once. batch and
// features are the full tensor's dims, seq_length its sequence length. Throws bad_argument when a
// partial does not fit those dims or the partials do not cover every cell's rows exactly once.
Tensor pooled_combine(const std::vector<PoolPartial>& partials, std::int64_t batch, const Shape& features,
                      std::int64_t seq_length, std::int64_t pool, DType out,
                      PoolDivisor divisor = PoolDivisor::true_length);

// Byte form of a partial (native endianness: for processes of one machine type) and back; a
// malformed buffer is bad_file.
std::vector<std::uint8_t> pool_partial_bytes(const PoolPartial& p);
PoolPartial pool_partial_from_bytes(std::span<const std::uint8_t> bytes);

}  // namespace qexact
