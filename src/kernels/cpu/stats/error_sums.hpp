// The checkpoint summary's sums for a chunk of a quantized tensor: signal Σx² and noise
// Σ(x − d)², x the input (f32, bf16 or f16), d its dequantized value (f32), both in double, and
// for coded rows the number of clamped elements. SIMD (google/highway, every x86 target,
// QEXACT_FORCE_TARGET applies), and the same doubles on every target: element i is added to
// partial i mod 32 (a tail after the last multiple of 8 to partial 0, in order), and the 32
// partials are then added pairwise (p[l] += p[l + 16], then + 8, + 4, + 2, + 1). Every term is
// exact to compute in double (x and d are f32 values; one widening each, one subtract, two
// multiplies, two adds, never fused), so the order above is the only thing that fixes the
// result, and it does not depend on the vector width. A NaN sum is the canonical quiet NaN
// (positive): which NaN an IEEE add propagates depends on its operands' order, which compilers
// treat as free.
#pragma once
#include <cstdint>

#include "qexact/tensor.hpp"

namespace qexact::kernels {

struct ErrorSums {
  double signal = 0, noise = 0;
  std::int64_t clamped = 0;
};

// n elements of x (dtype dt) against d. clamped stays 0: the caller judges clamping.
ErrorSums value_error_sums(DType dt, const void* x, std::int64_t n, const float* d);

// Where one group's elements count as clamped. Floating-point codes: an element whose code is
// the format's largest magnitude with x > above (a positive code) or x < below (a negative
// one). int8: d == hi and x > above, or d == lo and x < below. The bounds are compared in f32
// (NaN in a side that never clamps): a bound computed in double is given as the f32 that
// compares the same with every f32 x, rounded down for `above`, up for `below`.
struct ClampBounds {
  float hi, above, lo, below;
};

// The element codes of quantize_*'s payload and how each decodes: E4M3, E5M2 and int8 one per
// byte, E2M1 two per byte (element 2i in byte i's low nibble).
enum class ElementCode { e4m3, e5m2, e2m1, int8 };

// rows × k codes in row-major order, d = value(code) × scale in f32 (÷ scale where `divide`) —
// the family's own dequantize: E4M3 / E5M2 / E2M1 exactly (an FP8 NaN the canonical quiet NaN),
// int8 as float(q), always times the scale — with one scale and one ClampBounds per group of
// `group` elements of a row, shared by `row_group` consecutive rows: group g of row r at
// [(r / row_group) * stride + g]. k and group are multiples of 32.
struct CodedRows {
  ElementCode code;
  const void* codes;
  const float* scales;
  const ClampBounds* bounds;
  std::int64_t rows, k, group, stride;
  std::int64_t row_group = 1;
  bool divide = false;
  bool zero_scale_gives_zero = false;  // with divide: a group whose scale is 0 dequantizes to 0
};

// x: rows × k elements of dtype dt; the sums and the clamped count.
ErrorSums coded_error_sums(DType dt, const void* x, const CodedRows& rows);

}  // namespace qexact::kernels
