// Pooled block mean (CONTRACTS §6). Each shard turns its rows into exact partial sums per
// (batch, cell, feature) plus a row count per cell; the partials are merged in rank order and
// each cell is divided once, by its real length (or by P for the uniform divisor). The
// unsharded reference is the one-shard case. Exact sums make the result independent of the
// sharding and of the order of any reduction.
#include <cmath>
#include <string>
#include <vector>

#include "qexact/pool.hpp"
#include "reference/exact_sum.hpp"
#include "reference/reference.hpp"

namespace qexact {
namespace {

// One shard's contribution: the cells [first_cell, first_cell + cells) its rows fall in.
struct PoolPartial {
  std::int64_t first_cell = 0;
  std::int64_t cells = 0;
  std::vector<std::uint64_t> rows;  // per touched cell: how many of the shard's rows it holds
  std::vector<ref::ExactSum> sums;  // [batch, cells, features]
};

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

PoolPartial shard_partial(const PoolInput& in, std::size_t shard, std::int64_t offset, std::int64_t pool) {
  const std::int64_t length = in.lengths[shard];
  const std::int64_t features = in.feature_count;
  PoolPartial p;
  if (length == 0) return p;
  p.first_cell = offset / pool;
  p.cells = (offset + length - 1) / pool - p.first_cell + 1;
  p.rows.assign(static_cast<std::size_t>(p.cells), 0);
  p.sums.assign(static_cast<std::size_t>(in.batch * p.cells * features), ref::ExactSum{});
  const std::vector<float>& v = in.values[shard];
  for (std::int64_t s = 0; s < length; ++s) {
    const std::int64_t cell = (offset + s) / pool - p.first_cell;
    ++p.rows[static_cast<std::size_t>(cell)];
    for (std::int64_t b = 0; b < in.batch; ++b)
      for (std::int64_t f = 0; f < features; ++f)
        p.sums[static_cast<std::size_t>((b * p.cells + cell) * features + f)].add(
            v[static_cast<std::size_t>((b * length + s) * features + f)]);
  }
  return p;
}

Tensor pooled_mean(const PoolInput& in, std::int64_t pool, DType out, PoolDivisor divisor) {
  std::int64_t total_length = 0;
  for (std::int64_t len : in.lengths) total_length += len;
  const std::int64_t cells = (total_length + pool - 1) / pool;
  const std::int64_t features = in.feature_count;

  std::vector<ref::ExactSum> sums(static_cast<std::size_t>(in.batch * cells * features));
  std::vector<std::uint64_t> rows(static_cast<std::size_t>(cells), 0);
  std::int64_t offset = 0;
  for (std::size_t r = 0; r < in.lengths.size(); ++r) {  // rank order
    const PoolPartial p = shard_partial(in, r, offset, pool);
    for (std::int64_t c = 0; c < p.cells; ++c) {
      const std::int64_t cell = p.first_cell + c;
      rows[static_cast<std::size_t>(cell)] += p.rows[static_cast<std::size_t>(c)];
      for (std::int64_t b = 0; b < in.batch; ++b)
        for (std::int64_t f = 0; f < features; ++f)
          sums[static_cast<std::size_t>((b * cells + cell) * features + f)].merge(
              p.sums[static_cast<std::size_t>((b * p.cells + c) * features + f)]);
    }
    offset += in.lengths[r];
  }

  std::vector<float> means(sums.size());
  for (std::int64_t b = 0; b < in.batch; ++b)
    for (std::int64_t cell = 0; cell < cells; ++cell) {
      const std::uint64_t n =
          divisor == PoolDivisor::true_length ? rows[static_cast<std::size_t>(cell)] : static_cast<std::uint64_t>(pool);
      for (std::int64_t f = 0; f < features; ++f) {
        const auto i = static_cast<std::size_t>((b * cells + cell) * features + f);
        means[i] = sums[i].mean(n, out);
      }
    }
  Shape shape{in.batch, cells};
  shape.insert(shape.end(), in.features.begin(), in.features.end());
  return from_f32_vector(means, shape, out);
}

}  // namespace

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
