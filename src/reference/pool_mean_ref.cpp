// Pooled block mean (contracts §6). Each shard turns its rows into exact partial sums per
// (batch, cell, feature) plus a row count per cell; the partials are merged in rank order and
// each cell is divided once, by its real length (or by P for the uniform divisor). The
// unsharded reference is the one-shard case. Exact sums make the result independent of the
// sharding and of the order of any reduction.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "qexact/pool.hpp"
#include "reference/exact_sum.hpp"
#include "reference/pool_mean_ref.hpp"

namespace qexact {
namespace {

static_assert(kPoolSumLimbs == ref::ExactSum::kLimbs, "a travelling sum is one ExactSum");


struct PoolInput {
  std::int64_t batch = 0;
  Shape features;  // the dims after the sequence axis
  std::int64_t feature_count = 1;
  std::vector<std::int64_t> lengths;       // sequence length of each shard
  std::vector<std::vector<float>> values;  // each shard's elements in C order
};

std::string index_str(const Shape& shape, std::int64_t flat) {
  Shape index(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return shape_str(index);
}

void require_finite(const std::vector<float>& v, const Shape& shape, const std::string& where) {
  for (std::size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i]))
      fail(ErrorKind::bad_input, where +
                                     (std::isnan(v[i]) ? "NaN"
                                      : v[i] > 0       ? "+inf"
                                                       : "-inf") +
                                     " at " + index_str(shape, static_cast<std::int64_t>(i)) +
                                     " (the pooled mean takes finite values only)");
}

void require_pool_arguments(std::int64_t pool, DType out, const char* op) {
  if (pool < 1)
    fail(ErrorKind::bad_argument, std::string(op) + ": pool size must be >= 1, got " + std::to_string(pool));
  if (out != DType::f32 && out != DType::bf16 && out != DType::f16)
    fail(ErrorKind::bad_argument, std::string(op) + ": output dtype must be f32, bf16 or f16, got " + dtype_name(out));
}

// Checks every shard (dtype, rank, batch and feature dims, finite values) before any work.
PoolInput read_shards(const std::vector<TensorView>& shards, const char* op) {
  if (shards.empty()) fail(ErrorKind::bad_argument, std::string(op) + ": no shards given");
  PoolInput in;
  for (std::size_t r = 0; r < shards.size(); ++r) {
    const TensorView& s = shards[r];
    const std::string where =
        shards.size() > 1 ? std::string(op) + ": shard " + std::to_string(r) + ": " : std::string(op) + ": ";
    if (!is_float_dtype(s.dtype))
      fail(ErrorKind::bad_argument, where + "takes f32, bf16 or f16 input, got " + dtype_name(s.dtype));
    if (s.rank() < 2)
      fail(ErrorKind::bad_argument,
           where + "needs a (B, S, F...) tensor of rank >= 2, got shape " + shape_str(s.shape));
    const Shape features(s.shape.begin() + 2, s.shape.end());
    if (r == 0) {
      in.batch = s.shape[0];
      in.features = features;
      in.feature_count = shape_numel(features);
    } else if (s.shape[0] != in.batch || features != in.features) {
      fail(ErrorKind::bad_argument, where + "shape " + shape_str(s.shape) +
                                        " does not match shard 0 in the batch and feature dims " +
                                        shape_str(shards[0].shape));
    }
    in.lengths.push_back(s.shape[1]);
    in.values.push_back(to_f32_vector(s));
    require_finite(in.values.back(), s.shape, where);
  }
  return in;
}

// One shard's exact partial sums; `values` are its elements in C order (length rows).
PoolPartial partial_of(const std::vector<float>& v, std::int64_t batch, std::int64_t features, std::int64_t length,
                       std::int64_t offset, std::int64_t pool) {
  PoolPartial p;
  if (length == 0) return p;
  p.first_cell = offset / pool;
  p.cells = (offset + length - 1) / pool - p.first_cell + 1;
  p.rows.assign(static_cast<std::size_t>(p.cells), 0);
  std::vector<ref::ExactSum> sums(static_cast<std::size_t>(batch * p.cells * features));
  for (std::int64_t s = 0; s < length; ++s) {
    const std::int64_t cell = (offset + s) / pool - p.first_cell;
    ++p.rows[static_cast<std::size_t>(cell)];
    for (std::int64_t b = 0; b < batch; ++b)
      for (std::int64_t f = 0; f < features; ++f)
        sums[static_cast<std::size_t>((b * p.cells + cell) * features + f)].add(
            v[static_cast<std::size_t>((b * length + s) * features + f)]);
  }
  p.sums.reserve(sums.size() * kPoolSumLimbs);
  for (const ref::ExactSum& sum : sums) p.sums.insert(p.sums.end(), sum.limbs().begin(), sum.limbs().end());
  return p;
}

ref::ExactSum sum_at(const PoolPartial& p, std::size_t index) {
  std::array<std::uint64_t, ref::ExactSum::kLimbs> limbs{};
  std::copy_n(p.sums.begin() + static_cast<std::ptrdiff_t>(index * kPoolSumLimbs), kPoolSumLimbs, limbs.begin());
  return ref::ExactSum::from_limbs(limbs);
}

Tensor pooled_mean(const PoolInput& in, std::int64_t pool, DType out, PoolDivisor divisor) {
  std::vector<PoolPartial> partials;
  std::int64_t offset = 0;
  for (std::size_t r = 0; r < in.lengths.size(); ++r) {
    partials.push_back(partial_of(in.values[r], in.batch, in.feature_count, in.lengths[r], offset, pool));
    offset += in.lengths[r];
  }
  return pooled_combine(partials, in.batch, in.features, offset, pool, out, divisor);
}

}  // namespace

PoolPartial pooled_partial(const TensorView& x, std::int64_t offset, std::int64_t pool) {
  const char* op = "pooled_partial";
  require_pool_arguments(pool, DType::f32, op);
  if (offset < 0) fail(ErrorKind::bad_argument, std::string(op) + ": offset must be >= 0, got " + std::to_string(offset));
  const PoolInput in = read_shards({x}, op);
  return partial_of(in.values[0], in.batch, in.feature_count, in.lengths[0], offset, pool);
}

Tensor pooled_combine(const std::vector<PoolPartial>& partials, std::int64_t batch, const Shape& features,
                      std::int64_t seq_length, std::int64_t pool, DType out, PoolDivisor divisor) {
  const char* op = "pooled_combine";
  require_pool_arguments(pool, out, op);
  if (batch < 0 || seq_length < 0)
    fail(ErrorKind::bad_argument, std::string(op) + ": batch and sequence length must be >= 0");
  const std::int64_t feature_count = shape_numel(features);
  const std::int64_t cells = (seq_length + pool - 1) / pool;

  std::vector<ref::ExactSum> sums(static_cast<std::size_t>(batch * cells * feature_count));
  std::vector<std::uint64_t> rows(static_cast<std::size_t>(cells), 0);
  for (std::size_t r = 0; r < partials.size(); ++r) {  // rank order
    const PoolPartial& p = partials[r];
    const std::string where = std::string(op) + ": partial " + std::to_string(r) + ": ";
    if (p.cells < 0 || p.first_cell < 0 || p.first_cell + p.cells > cells)
      fail(ErrorKind::bad_argument, where + "cells [" + std::to_string(p.first_cell) + ", " +
                                        std::to_string(p.first_cell + p.cells) + ") outside the " +
                                        std::to_string(cells) + " cells of the sequence");
    if (p.rows.size() != static_cast<std::size_t>(p.cells) ||
        p.sums.size() != static_cast<std::size_t>(batch * p.cells * feature_count * kPoolSumLimbs))
      fail(ErrorKind::bad_argument, where + "holds " + std::to_string(p.rows.size()) + " row counts and " +
                                        std::to_string(p.sums.size()) + " limbs, not those of " +
                                        std::to_string(p.cells) + " cells of batch " + std::to_string(batch) +
                                        " x " + std::to_string(feature_count) + " features");
    for (std::int64_t c = 0; c < p.cells; ++c) {
      const std::int64_t cell = p.first_cell + c;
      rows[static_cast<std::size_t>(cell)] += p.rows[static_cast<std::size_t>(c)];
      for (std::int64_t b = 0; b < batch; ++b)
        for (std::int64_t f = 0; f < feature_count; ++f)
          sums[static_cast<std::size_t>((b * cells + cell) * feature_count + f)].merge(
              sum_at(p, static_cast<std::size_t>((b * p.cells + c) * feature_count + f)));
    }
  }
  for (std::int64_t cell = 0; cell < cells; ++cell) {
    const auto expected = static_cast<std::uint64_t>(std::min(pool, seq_length - cell * pool));
    if (rows[static_cast<std::size_t>(cell)] != expected)
      fail(ErrorKind::bad_argument, std::string(op) + ": the partials hold " +
                                        std::to_string(rows[static_cast<std::size_t>(cell)]) + " rows of cell " +
                                        std::to_string(cell) + ", which has " + std::to_string(expected));
  }

  std::vector<float> means(sums.size());
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t cell = 0; cell < cells; ++cell) {
      const std::uint64_t n =
          divisor == PoolDivisor::true_length ? rows[static_cast<std::size_t>(cell)] : static_cast<std::uint64_t>(pool);
      for (std::int64_t f = 0; f < feature_count; ++f) {
        const auto i = static_cast<std::size_t>((b * cells + cell) * feature_count + f);
        means[i] = sums[i].mean(n, out);
      }
    }
  Shape shape{batch, cells};
  shape.insert(shape.end(), features.begin(), features.end());
  return from_f32_vector(means, shape, out);
}

// Layout: first_cell, cells, rows[cells], sums[...]: all uint64, native byte order (the ranks
// of one run share it). Words first, then one copy: GCC 12 misreads byte-wise vector inserts
// (-Wstringop-overflow at -O3).
std::vector<std::uint8_t> pool_partial_bytes(const PoolPartial& p) {
  std::vector<std::uint64_t> words;
  words.reserve(2 + p.rows.size() + p.sums.size());
  words.push_back(static_cast<std::uint64_t>(p.first_cell));
  words.push_back(static_cast<std::uint64_t>(p.cells));
  words.insert(words.end(), p.rows.begin(), p.rows.end());
  words.insert(words.end(), p.sums.begin(), p.sums.end());
  std::vector<std::uint8_t> out(words.size() * sizeof(std::uint64_t));
  std::memcpy(out.data(), words.data(), out.size());
  return out;
}

PoolPartial pool_partial_from_bytes(std::span<const std::uint8_t> bytes) {
  constexpr std::size_t w = sizeof(std::uint64_t);
  if (bytes.size() % w != 0 || bytes.size() < 2 * w)
    fail(ErrorKind::bad_file, "a pool partial is a whole number (>= 2) of uint64 words, got " +
                                  std::to_string(bytes.size()) + " bytes");
  std::vector<std::uint64_t> words(bytes.size() / w);
  std::memcpy(words.data(), bytes.data(), bytes.size());
  PoolPartial p;
  p.first_cell = static_cast<std::int64_t>(words[0]);
  p.cells = static_cast<std::int64_t>(words[1]);
  if (p.first_cell < 0 || p.cells < 0 || static_cast<std::uint64_t>(p.cells) > words.size() - 2)
    fail(ErrorKind::bad_file, "a pool partial's header (first cell " + std::to_string(p.first_cell) + ", cells " +
                                  std::to_string(p.cells) + ") does not fit its " + std::to_string(words.size()) +
                                  " words");
  const auto cells = static_cast<std::size_t>(p.cells);
  p.rows.assign(words.begin() + 2, words.begin() + 2 + static_cast<std::ptrdiff_t>(cells));
  p.sums.assign(words.begin() + 2 + static_cast<std::ptrdiff_t>(cells), words.end());
  if (p.sums.size() % kPoolSumLimbs != 0)
    fail(ErrorKind::bad_file, "a pool partial's sums are not whole " + std::to_string(kPoolSumLimbs) + "-limb integers");
  return p;
}

Tensor pooled_block_mean_sharded(const std::vector<TensorView>& shards, std::int64_t pool, DType out,
                                 PoolDivisor divisor) {
  const char* op = "pooled_block_mean_sharded";
  require_pool_arguments(pool, out, op);
  return pooled_mean(read_shards(shards, op), pool, out, divisor);
}

namespace ref {

Tensor pooled_block_mean(const TensorView& x, std::int64_t pool, DType out, PoolDivisor divisor) {
  const char* op = "pooled_block_mean";
  require_pool_arguments(pool, out, op);
  return pooled_mean(read_shards({x}, op), pool, out, divisor);
}

}  // namespace ref
}  // namespace qexact
