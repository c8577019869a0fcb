// Quantizing under a tensor amax given from outside, for the contracts whose every scale depends
// on it (plan::has_tensor_amax: fp8.scaled granularity=tensor, nvfp4 tensor_scale=amax): the
// amax the ranks agree on before quantizing their shards (contracts §7), and the one a model
// folder's fused shards (q/k/v, gate/up) share so that a loader can fuse them.
//
// The reduction: each rank's amax is max |x| over its shard, carried as the bits of the fp32
// magnitude (sign cleared) in an int32, and the ranks take the integer MAX. For non-negative
// IEEE floats the bit order is the value order, so the result is the exact fp32 maximum
// whatever the order in which MPI combines the ranks. A NaN needs a rule, since MPI's float MAX
// compares and a comparison with NaN is false (the result would depend on the order): here
// every NaN bit pattern (0x7F800001..0x7FFFFFFF) is above +inf (0x7F800000), so a NaN anywhere
// makes the agreed amax NaN, as torch.max(torch.abs(x)) does in the torchao peers of these
// presets. Of several different NaNs the largest bit pattern is kept (real inputs carry the
// canonical one).
#pragma once
#include <cstdint>

#include "qexact/contract.hpp"
#include "qexact/quantize.hpp"
#include "qexact/tensor.hpp"

namespace qexact {

// max |x| over the elements of x (f32, bf16, f16; any strides), as sign-cleared fp32 bits.
std::int32_t amax_key(const TensorView& x);
float amax_from_key(std::int32_t key);

// Quantizes x under contract c as if the tensor amax were `amax` instead of x's own: what the
// rank holding x as one shard of a larger tensor must produce once the ranks agree on that
// tensor's amax. `amax` must be at least x's own amax (amax_key(x) <= its key); with x's own
// it is plain quantize().
//
// The fast engine hands `amax` to the fp8.scaled and nvfp4 kernels, which then skip their own
// amax pass (a NaN amax is the one of a many-element tensor). The reference engine takes the
// amax from its input, so there x is quantized with one extra row [amax, 0, ..., 0] appended to
// its [R, C] view, whose codes are dropped: the extra row raises the tensor amax to `amax` and
// changes no other element's code (elements are quantized one by one once the scale is set;
// nvfp4's blocks of 16 lie in one row), at the cost of one copy of x. Both give the same bytes
// (tests/collective). Throws bad_argument for a non-finite amax under a contract that rejects
// non-finite input (naming this shard's own first non-finite element when it has one).
QuantResult quantize_with_tensor_amax(const Contract& c, const TensorView& x, float amax, const RunOptions& o);

}  // namespace qexact
