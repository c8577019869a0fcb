// Everything an MX kernel needs, resolved once per call from the Contract and the input view:
// plain data, so that the per-target SIMD code sees no strings or enums to decode per group.
#pragma once
#include <cstdint>

#include "qexact/contract.hpp"
#include "qexact/tensor.hpp"

namespace qexact::kernels {

struct MxPlan {
  // Element format.
  ElemFormat element = ElemFormat::e4m3;
  int elem_bits = 8, mbits = 3, bias = 7, emax = 8, max_code = 0x7E;
  bool has_nan = true, has_inf = false, fp4 = false;
  // Scale rule.
  ScaleRule rule = ScaleRule::floor;
  bool log2_fp32 = false;
  bool scale_wrap = false;  // floor: a negative byte wraps modulo 256; byte 255 is 2^128
  bool ratio_reciprocal = false;
  int round_mbits = 3;  // scale_rule=even: the mantissa bits amax is rounded to
  float max_value = 448.0f, inv_max_value = 1.0f / 448.0f;
  const std::uint32_t* log2_up_from = nullptr;  // [256]: fp32 log2 reaches e+1 from these bits
  // [256]: rceil with log2_fp32: d of exponent field e (and the subnormal band [2^-127, 2^-126)
  // at 0) whose fp32 log2 leaves the integer e - 127 from these bits on.
  const std::uint32_t* log2_above_from = nullptr;
  // Element rounding and degenerate groups.
  Rounding rounding = Rounding::rne;
  Overflow overflow = Overflow::saturate;
  NonFiniteRule nonfinite = NonFiniteRule::zero;
  Byte0Rule byte0 = Byte0Rule::flush;
  SignedZero signed_zero = SignedZero::keep;
  bool nan_keeps_sign = false;  // a NaN element's code keeps its sign (byte0_nan, ct, xla with a NaN
                                // code; triton in every format)
  std::int32_t nan_code = 0x7F;  // a NaN element's code, sign aside: 0x7F, or for formats without
                                 // NaN 0 (xla: 0x8, XLA's convert to E2M1; triton: max_code)
  // ftz (XLA:CPU): subnormal inputs read as signed zeros, rceil's ratio and the multiplier of
  // byte 254 flushed. Batches take groups of byte >= batch_min_byte only: from byte 32 on a
  // subnormal input's product is below 2^-31, a zero code read or not, so the per-group path
  // (which flushes) takes every group that could tell.
  bool ftz = false;
  int batch_min_byte = 1;
  // finite_products: for bytes 240..255 (index byte - 240), the largest code magnitude whose
  // value times 2^(byte - 127) is finite in fp32 (max_code where all are; below 240 all are).
  bool finite_products = false;
  const float* code_values = nullptr;  // [256]: the element value of each code (NaN / inf codes too)
  std::uint8_t product_cap[16] = {};
  // quotient_arith=input: the scaled values' dtype. Scaling by a power of two, its rounding can
  // change only values below that dtype's normals, all of which are a zero code: what it decides
  // is the zero's sign (the largest magnitude bits that round to zero there) and, in bf16, a
  // NaN's sign (canonical positive).
  std::uint32_t rounds_to_zero_below = 0;  // |v| bits <= this round to zero (0: f32, no rounding)
  bool canonical_nan = false;
  bool prequant_bf16 = false;
  int block = 32;
  ScaleLayout layout = ScaleLayout::rowmajor;
  bool packing_halves = false;  // E2M1: byte j of a group holds elements j and j + block / 2

  // Input: rows x k values; row r starts at element offset row_offset(r) of `data`.
  DType dtype = DType::f32;
  const std::uint8_t* data = nullptr;
  std::int64_t rows = 0, k = 0, groups = 0;
  std::int64_t col_stride = 1;  // elements between neighbours along the last axis
  const TensorView* view = nullptr;
  bool rows_regular = true;     // row r starts at r * row_stride
  std::int64_t row_stride = 0;

  // Output.
  std::uint8_t* payload = nullptr;
  std::int64_t payload_row_bytes = 0;
  std::uint8_t* scale = nullptr;
};

MxPlan make_mx_plan(const Contract& c, const TensorView& x, std::uint8_t* payload, std::uint8_t* scale);

// Flat offset of (row, group) in the plan's scale layout.
std::int64_t mx_scale_offset(const MxPlan& p, std::int64_t row, std::int64_t group);

// Offset in elements of the first value of `row`.
inline std::int64_t mx_row_offset(const MxPlan& p, std::int64_t row) {
  return p.rows_regular ? row * p.row_stride : p.view->offset_of(row * p.k);
}

}  // namespace qexact::kernels
