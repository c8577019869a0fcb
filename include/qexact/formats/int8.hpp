// int8 element codec of the int8 contracts (contracts §3, §4, ggml q8_0): an fp32 quotient
// v = x / scale (however the contract forms it) becomes a signed 8-bit integer.
//
// Rounding (IntRounding), all in fp32:
//   rne             (v + 1.5*2^23) - 1.5*2^23: ties to even, exact for |v| < 2^22; larger
//                   magnitudes stay larger than 127 and saturate below.
//   half_away       ties away from zero, exact (C roundf).
//   half_away_fp32  trunc(fp32(v + copysign(0.5f, v))): the sum itself rounds in fp32, as in
//                   SageAttention's Triton kernel, so v = 0.5 - 2^-25 gives 1 (the only values
//                   where it differs from half_away are +/-(0.5 - 2^-25)).
//   trunc           toward zero (C truncf), e.g. a conversion that drops the fraction.
// Saturation: the rounded value is clamped to [-127, 127] (range 127) or [-128, 127]
// (range 128); +/-inf saturate the same way. Never wraps: a plain 8-bit conversion would.
// NaN: encodes to 0, as PTX cvt.rni.sat.s8.f32 does. Reachable from finite inputs when a
// contract's fp32 multiplier overflows to inf and meets x = 0 (0 * inf).
// Decoding is float(q) * scale, one fp32 multiply.
#pragma once
#include <cstdint>

#include "qexact/contract.hpp"

namespace qexact {

// v rounded to an integer value by rule `r` (still a float; NaN and +/-inf pass through).
float int8_round(float v, IntRounding r);

// An integer-valued float (or +/-inf, NaN) clamped into the contract's range; NaN gives 0.
std::int8_t int8_saturate(float rounded, int range);

// int8_saturate(int8_round(v, r), range).
std::int8_t int8_encode(float v, IntRounding r, int range);

float int8_decode(std::int8_t q, float scale);

}  // namespace qexact
