// int8 with one fp32 scale per (head, channel) of a (B, S, N, D) tensor: the cross-shard global
// scale of contracts §7 (`quantize: "int8.channel"`, `scale: "global"` in a collective plan).
//   amax[n, d]  = max |x[b, s, n, d]| over the whole (b, s) extent
//   scale[n, d] = amax / 127 (a correctly rounded fp32 division), stored
//   q           = clamp(rne(x / scale), -127, 127); a scale of 0 gives payload 0
// The amax is a max, exact in any order, so ranks holding slices of (b, s) reach the global
// scale with one all_reduce(MAX) of their local amax tensors and then quantize their slices with
// it: the gathered payload equals the payload of the gathered tensor, byte for byte.
#pragma once
#include "qexact/quantize.hpp"
#include "qexact/tensor.hpp"

namespace qexact {

// Local amax of x (f32, bf16 or f16, any strides, finite values): f32 of shape (N, D).
Tensor int8_channel_abs_max(const TensorView& x);

// Quantizes x with the scales amax / 127, amax being an f32 (N, D) tensor at least as large as
// |x| per (head, channel) (the global amax, or int8_channel_abs_max(x) for a single process).
// payload: i8 (B, S, N, D); scale: f32 (N, D); path "global_channel".
QuantResult quantize_int8_channel(const TensorView& x, const TensorView& amax);

}  // namespace qexact
