// The one rounding of an exact mean, for the fast pooled mean: a fixed-point sum divided by a
// count, rounded once to nearest even into f32, bf16 or f16, from integers only.
#pragma once
#include <cstdint>

#include "qexact/tensor.hpp"

namespace qexact::kernels {

__extension__ typedef unsigned __int128 UInt128;

// The bits, in dtype `out` (f32; bf16 and f16 in the low 16 bits), of magnitude * 2^exponent / n
// rounded once to nearest even, with the dtype's subnormals and overflow to infinity; negative
// gives the sign, also to a non-zero quotient that rounds to zero. A zero magnitude gives +0.
// magnitude < 2^127, n >= 1.
std::uint32_t rounded_quotient_bits(UInt128 magnitude, int exponent, std::uint64_t n, bool negative, DType out);

}  // namespace qexact::kernels
