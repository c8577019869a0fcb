// Fast pooled block mean (contracts §6): the reference's checks and messages, then per work
// item (one (batch, cell) and up to 256 features) an exact sum per feature and one rounding.
// The sum is a fixed-point integer in units of the column's smallest ulp: in 64-bit SIMD lanes
// (pool_mean.cpp) when the column's exponent range and row count fit 63 bits, which is the
// common case, else (and for items of fewer than 16 features) in a scalar 128-bit integer, and
// past that (a column spanning more than about 100 binades) in the reference's exact
// accumulator, ref::ExactSum. The rounding of sum / divisor is this file's own (integer quotient,
// quotient_rounding.hpp). Exact sums make the result independent of the threads and of how rows
// are grouped; no temporary grows with the input.
#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>

#include "kernels/cpu/common/parallel.hpp"
#include "kernels/cpu/common/simd_target.hpp"
#include "kernels/cpu/pool/pool_fast.hpp"
#include "kernels/cpu/pool/pool_plan.hpp"
#include "kernels/cpu/pool/quotient_rounding.hpp"
#include "qexact/formats/bf16.hpp"
#include "qexact/formats/fp16.hpp"
#include "reference/exact_sum.hpp"

namespace qexact::fast {
namespace {

using kernels::kPoolColumnChunk;
using kernels::PoolPlan;
using kernels::UInt128;

// An fp32 value is significand * 2^(exponent - 150), significand < 2^24, exponent in 1..254.
constexpr int kUnitOffset = 150;
constexpr int kSignificandBits = 24;
constexpr std::int64_t kNarrowColumns = 16;

float element(const PoolPlan& p, const std::uint8_t* row, std::int64_t f) {
  const std::uint8_t* at = row + p.feature_offset(f) * static_cast<std::int64_t>(p.esize);
  if (p.dtype == DType::f32) {
    float v;
    std::memcpy(&v, at, sizeof v);
    return v;
  }
  std::uint16_t h;
  std::memcpy(&h, at, sizeof h);
  return p.dtype == DType::bf16 ? bf16_to_f32(h) : f16_to_f32(h);
}

// Exact sum of feature f over rows [s0, s1) of batch b, in units of 2^(emin - 150), as a
// two's complement 128-bit integer: exact when the column's exponents span at most
// 127 - 24 - bit_width(rows) binades above emin.
UInt128 column_sum_128(const PoolPlan& p, std::int64_t b, std::int64_t s0, std::int64_t s1, std::int64_t f, int emin) {
  UInt128 sum = 0;
  for (std::int64_t s = s0; s < s1; ++s) {
    const auto bits = std::bit_cast<std::uint32_t>(element(p, p.row(b, s), f));
    const auto field = static_cast<int>((bits >> 23) & 0xFFu);
    const std::uint32_t fraction = bits & 0x7FFFFFu;
    if (field == 0 && fraction == 0) continue;
    const UInt128 term = static_cast<UInt128>(field == 0 ? fraction : fraction | 0x800000u)
                         << (std::max(field, 1) - emin);
    sum += (bits >> 31) != 0 ? -term : term;
  }
  return sum;
}

// The exponent range of feature f over rows [s0, s1) of batch b, as pool_column_exponents
// gives it, one element at a time: for work items narrower than a vector.
void column_exponents(const PoolPlan& p, std::int64_t b, std::int64_t s0, std::int64_t s1, std::int64_t f,
                      std::int32_t& emax, std::int32_t& emin) {
  emax = 0;
  emin = 255;
  for (std::int64_t s = s0; s < s1; ++s) {
    const std::uint32_t magnitude = std::bit_cast<std::uint32_t>(element(p, p.row(b, s), f)) & 0x7FFFFFFFu;
    if (magnitude == 0) continue;
    const auto exponent = std::max(static_cast<std::int32_t>(magnitude >> 23), std::int32_t{1});
    emax = std::max(emax, exponent);
    emin = std::min(emin, exponent);
  }
}

// The storage bits of a value `out` represents exactly.
std::uint32_t storage_bits(float v, DType out) {
  switch (out) {
    case DType::bf16: return f32_to_bf16(v);
    case DType::f16: return f32_to_f16(v);
    default: return std::bit_cast<std::uint32_t>(v);
  }
}

// The means of one work item, written to `out`; false (and nothing written) when a NaN or
// +/-inf is among its elements.
bool mean_of_item(const PoolPlan& p, std::int64_t item, DType out_dtype, PoolDivisor divisor, std::uint8_t* out) {
  const std::int64_t chunk = item % p.chunks();
  const std::int64_t b = item / p.chunks() / p.cells;
  const std::int64_t cell = item / p.chunks() % p.cells;
  const std::int64_t s0 = cell * p.pool;
  const std::int64_t s1 = std::min(p.length, s0 + p.pool);
  const auto rows = static_cast<std::uint64_t>(s1 - s0);
  const std::uint64_t n = divisor == PoolDivisor::uniform ? static_cast<std::uint64_t>(p.pool) : rows;
  const std::int64_t f0 = chunk * kPoolColumnChunk;
  const std::int64_t width = std::min(kPoolColumnChunk, p.features - f0);

  alignas(64) std::int32_t emax[kPoolColumnChunk];
  alignas(64) std::int32_t emin[kPoolColumnChunk];
  alignas(64) std::uint64_t sums[kPoolColumnChunk];
  // An item narrower than the widest vector (few features) goes one element at a time: padding
  // each row out to a vector would cost more.
  const bool narrow = width < kNarrowColumns;
  if (narrow) {
    for (std::int64_t c = 0; c < width; ++c) column_exponents(p, b, s0, s1, f0 + c, emax[c], emin[c]);
  } else {
    kernels::pool_column_exponents(p, b, s0, s1, f0, width, emax, emin);
  }
  if (std::any_of(emax, emax + width, [](std::int32_t e) { return e == 255; })) return false;

  // A column's sum is below rows * 2^(24 + span) in units of its smallest ulp.
  const int row_bits = static_cast<int>(std::bit_width(rows));
  auto fits = [&](std::int64_t c, int bits) { return emax[c] - emin[c] <= bits - 1 - kSignificandBits - row_bits; };
  bool any_fits_64 = false;
  for (std::int64_t c = 0; c < width; ++c) any_fits_64 = any_fits_64 || (emax[c] != 0 && fits(c, 64));
  if (any_fits_64 && !narrow) kernels::pool_column_sums(p, b, s0, s1, f0, width, emin, sums);

  const std::size_t out_size = dtype_size(out_dtype);
  std::uint8_t* dst = out + ((b * p.cells + cell) * p.features + f0) * static_cast<std::int64_t>(out_size);
  for (std::int64_t c = 0; c < width; ++c) {
    std::uint32_t bits = 0;  // a column of zeros: +0
    if (emax[c] != 0) {
      const int exponent = emin[c] - kUnitOffset;
      if (!narrow && fits(c, 64)) {
        const auto sum = std::bit_cast<std::int64_t>(sums[c]);
        const std::uint64_t magnitude = sum < 0 ? 0 - static_cast<std::uint64_t>(sum) : static_cast<std::uint64_t>(sum);
        bits = kernels::rounded_quotient_bits(magnitude, exponent, n, sum < 0, out_dtype);
      } else if (fits(c, 128)) {
        const UInt128 sum = column_sum_128(p, b, s0, s1, f0 + c, emin[c]);
        const bool negative = (sum >> 127) != 0;
        bits = kernels::rounded_quotient_bits(negative ? -sum : sum, exponent, n, negative, out_dtype);
      } else {
        ref::ExactSum sum;
        for (std::int64_t s = s0; s < s1; ++s) sum.add(element(p, p.row(b, s), f0 + c));
        bits = storage_bits(sum.mean(n, out_dtype), out_dtype);
      }
    }
    if (out_size == 4) {
      std::memcpy(dst + c * 4, &bits, 4);
    } else {
      const auto half = static_cast<std::uint16_t>(bits);
      std::memcpy(dst + c * 2, &half, 2);
    }
  }
  return true;
}

std::string index_str(const Shape& shape, std::int64_t flat) {
  Shape index(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return shape_str(index);
}

// Names the first (C order) NaN or +/-inf of x, which holds one.
[[noreturn]] void fail_at_first_non_finite(const TensorView& x, const std::string& where) {
  const std::int64_t n = x.numel();
  const auto esize = static_cast<std::int64_t>(dtype_size(x.dtype));
  for (std::int64_t i = 0; i < n; ++i) {
    const auto* at = static_cast<const std::uint8_t*>(x.data) + x.offset_of(i) * esize;
    float v;
    if (x.dtype == DType::f32) {
      std::memcpy(&v, at, sizeof v);
    } else {
      std::uint16_t h;
      std::memcpy(&h, at, sizeof h);
      v = x.dtype == DType::bf16 ? bf16_to_f32(h) : f16_to_f32(h);
    }
    if (!std::isfinite(v))
      fail(ErrorKind::bad_input, where +
                                     (std::isnan(v) ? "NaN"
                                      : v > 0       ? "+inf"
                                                    : "-inf") +
                                     " at " + index_str(x.shape, i) + " (the pooled mean takes finite values only)");
  }
  fail(ErrorKind::bad_input, where + "a NaN or +/-inf (the pooled mean takes finite values only)");
}

}  // namespace

Tensor pooled_block_mean(const TensorView& x, std::int64_t pool, DType out, int threads, PoolDivisor divisor) {
  kernels::apply_forced_target();
  const std::string where = "pooled_block_mean: ";
  if (pool < 1) fail(ErrorKind::bad_argument, where + "pool size must be >= 1, got " + std::to_string(pool));
  if (out != DType::f32 && out != DType::bf16 && out != DType::f16)
    fail(ErrorKind::bad_argument, where + "output dtype must be f32, bf16 or f16, got " + dtype_name(out));
  if (!is_float_dtype(x.dtype))
    fail(ErrorKind::bad_argument, where + "takes f32, bf16 or f16 input, got " + dtype_name(x.dtype));
  if (x.rank() < 2)
    fail(ErrorKind::bad_argument, where + "needs a (B, S, F...) tensor of rank >= 2, got shape " + shape_str(x.shape));

  const PoolPlan plan = kernels::make_pool_plan(x, pool);
  Shape shape{plan.batch, plan.cells};
  shape.insert(shape.end(), x.shape.begin() + 2, x.shape.end());
  Tensor result(out, shape);
  auto* dst = static_cast<std::uint8_t*>(result.raw());
  std::atomic<bool> non_finite{false};
  kernels::parallel_for(plan.batch * plan.cells * plan.chunks(), 1, threads, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t item = b; item < e; ++item)
      if (!mean_of_item(plan, item, out, divisor, dst)) non_finite.store(true, std::memory_order_relaxed);
  });
  if (non_finite.load()) fail_at_first_non_finite(x, where);
  return result;
}

}  // namespace qexact::fast
