// The summary's numbers for one quantized tensor, computed chunk by chunk: memory stays a
// constant (a chunk's temporaries), whatever the tensor's size. The chunks are also the unit in
// which a streamed file is read, quantized, measured and written (stream_tensor.hpp), so that
// the statistics of a chunk are taken while it is still in cache, with the same sums in the
// same order as measure() of the whole tensor.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cpu/stats/error_sums.hpp"
#include "qexact/checkpoint.hpp"

namespace qexact::checkpoint::detail {

// How a tensor of shape `x` (rank >= 1, at least one element) is cut: `units` units of `unit`
// elements (rows of the last dimension; batches of the first for int8.block and fp8.scaled
// head_block), `per_chunk` units per chunk (whole 128-row tiles for the padded and swizzled MX
// layouts, whole M-row tiles for fp8.scaled tile:MxN). Rows [u0, u1) of a chunk have their
// payload and scales at the offsets the contract gives a tensor of u0 units, laid out as for a
// tensor of u1 - u0 units (except a tensor-wide scale, which is every chunk's).
struct Chunking {
  std::int64_t units = 0, unit = 0, per_chunk = 0, chunks = 0;
  bool by_batch = false, whole_scale = false;
  Shape x;

  Shape shape_of(std::int64_t u) const;  // the shape of u units
  std::int64_t first_unit(std::int64_t k) const { return k * per_chunk; }
  std::int64_t end_unit(std::int64_t k) const { return std::min(units, (k + 1) * per_chunk); }
};
Chunking chunking(const Contract& c, const Shape& x);

struct Sums {
  double signal = 0, noise = 0;
  std::int64_t clamped = 0;
};

// One thread's buffers, reused from chunk to chunk.
struct Scratch {
  // Where a family's dequantized values can be decoded inside the sums (MX byte codes,
  // int8.token, int8.group), chunk_sums does so; true makes it dequantize the chunk to f32
  // first, as every other case does (tests compare the two).
  bool dequantize_always = false;
  std::vector<float> d, hi, below, lo, scales;
  std::vector<kernels::ClampBounds> bounds;
  Shape codes_shape;
  std::vector<std::int8_t> codes[3];

  float* values(std::vector<float>& v, std::size_t n) {
    if (v.size() < n) v.resize(n);
    return v.data();
  }
};

// The sums of one chunk: `x` (contiguous) quantized as `payload` and `scale` (the chunk's own
// views), `tensor_scale` empty unless the contract has one.
Sums chunk_sums(const Contract& c, const TensorView& x, const TensorView& payload, const TensorView& scale,
                const TensorView& tensor_scale, Scratch& scratch);

// row.sqnr_db and row.saturated_pct from the chunks' sums, added in chunk order (the same
// numbers for any thread count); `n` elements in all.
void finish(const std::vector<Sums>& sums, std::int64_t n, TensorSummary& row);

// SQNR and saturated share of `x` (contiguous) quantized as `r`, into row.sqnr_db and
// row.saturated_pct.
void measure(const Contract& c, const TensorView& x, const QuantResult& r, const RunOptions& run, TensorSummary& row);

}  // namespace qexact::checkpoint::detail
