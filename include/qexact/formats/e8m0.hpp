// E8M0 scale codec (OCP MX): an 8-bit biased exponent, value 2^(byte - 127).
// No sign, no zero, no mantissa: byte 0 is 2^-127 (an fp32 subnormal), byte 255 is NaN.
// The scale rules below map a group's amax (finite, >= 0; non-finite groups are the contract's
// business) to a byte, saturating into [0, 254]: a rule never produces the NaN byte from a
// finite amax. Every rule is written as a search over powers of two (no bit tricks), so it
// reads as its definition.
#pragma once
#include <cstdint>

namespace qexact {

float e8m0_decode(std::uint8_t byte);

// floor(log2(a)) for finite a > 0 (subnormals included), found by search.
int floor_log2_exact(float a);
// Smallest k with 2^k >= a, for finite a > 0.
int ceil_log2_exact(float a);

// floor: 127 + floor(log2 amax) - emax_elem, clamped to [0, 254]; amax = 0 gives 0.
std::uint8_t e8m0_floor(float amax, int emax_elem);
// floor with log2 evaluated in fp32 (torch.log2 on an fp32 tensor): an amax a hair below 2^k
// whose correctly rounded fp32 log2 is the integer k gets exponent k.
std::uint8_t e8m0_floor_log2_fp32(float amax, int emax_elem);
// floor(log2(amax)) with log2 rounded to fp32 first, for finite amax > 0: -149 .. 128.
int floor_of_fp32_log2(float amax);
// rceil: the fp32 ratio d (amax / max_elem, or amax * fp32(1 / max_elem) when `reciprocal`)
// rounded up to a power of two, 127 + ceil(log2 d) clamped to [0, 254]; d = 0 gives 0.
std::uint8_t e8m0_rceil(float amax, float max_elem, bool reciprocal);
// rceil_bits: as rceil, but no scale below 2^-126: a subnormal d > 0 gives byte 1 (rounding d's
// fp32 bit pattern up to the next exponent field reaches the smallest normal).
std::uint8_t e8m0_rceil_bits(float amax, float max_elem, bool reciprocal);
// rceil with log2 evaluated in fp32 (ModelOpt's ceil(torch.log2(d))): a d a hair above 2^k whose
// correctly rounded fp32 log2 is the integer k gets exponent k.
std::uint8_t e8m0_rceil_log2_fp32(float amax, float max_elem, bool reciprocal);
// ceil (torchao CEIL): the floor rule applied to amax rounded up to a power of two.
std::uint8_t e8m0_ceil(float amax, int emax_elem);
// even (torchao EVEN): the floor rule applied to amax rounded half-up to `mbits_elem` mantissa
// bits, i.e. the exponent moves up when amax >= 2^k * (2 - 2^-(mbits_elem + 1)).
std::uint8_t e8m0_even(float amax, int emax_elem, int mbits_elem);

}  // namespace qexact
