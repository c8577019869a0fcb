// Everything the fast int8 kernels (int8_block.cpp, int8_token.cpp, int8_group.cpp,
// int8_dequantize.cpp) need, resolved once per call from the Contract and the views: plain
// data, plus the scalar steps that run once per scale domain (contracts §3, §4).
#pragma once
#include <hwy/base.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "formats/float_dtype.hpp"
#include "qexact/contract.hpp"
#include "qexact/formats/fp16.hpp"
#include "qexact/tensor.hpp"

namespace qexact::kernels {

// Element offset of the start of each last-axis row of a view, rows numbered in C order. The
// leading dimensions are collapsed where their strides allow, so that a tensor whose rows are
// evenly spaced (contiguous, transposed rows, every other row, ...) costs one multiply per row.
class RowMap {
 public:
  RowMap() = default;
  explicit RowMap(const TensorView& x);
  std::int64_t offset(std::int64_t row) const;

 private:
  std::vector<std::pair<std::int64_t, std::int64_t>> dims_;  // (size, stride), outermost first
};

// How a domain's elements become their quotient v (step 4): v = x / operand (quotient=divide)
// or v = x * operand (reciprocal, inv_scale); or no arithmetic at all where the divisor is 0:
// payload 0 for the whole domain, or, under zero_group=nan, x / 0 as IEEE has it (sign_payload:
// +inf saturates to 127, -inf to the lowest code, 0 / 0 is NaN, code 0).
struct Int8Quotient {
  bool zero_payload = true;
  float operand = 0.0f;
  bool sign_payload = false;
};

struct Int8Plan {
  // Contract steps 2-5.
  ScaleMode scale_mode = ScaleMode::after;
  float scale_min = 0.0f;
  Quotient quotient = Quotient::divide;
  IntRounding rounding = IntRounding::rne;
  float lowest = -127.0f;  // -127 (range 127) or -128 (range 128); the top is always 127
  bool f16_scale = false;
  float qmax = 127.0f;                  // the scale's divisor
  DType scale_round = DType::f32;       // scale_arith=input: the scale rounded to the input's dtype
  DType quotient_round = DType::f32;    // quotient_arith=input: x / scale rounded to it
  ZeroGroup zero_group = ZeroGroup::zero;
  // The steps torch takes on the input's dtype (compressed-tensors, ModelOpt): the batched
  // group path computes scales for plain fp32 steps only.
  bool torch_steps() const {
    return scale_round != DType::f32 || quotient_round != DType::f32 || zero_group != ZeroGroup::zero;
  }

  // Input: a float view, read through `rows` (last-axis rows in C order) and `col_stride`.
  DType dtype = DType::f32;
  std::size_t elem_bytes = 4;
  const std::uint8_t* data = nullptr;
  Shape shape, strides;
  std::int64_t cols = 0;  // last dimension
  std::int64_t col_stride = 1;
  RowMap rows;

  // int8.block: (B, S, N, D), `blocks` token blocks of `token_block` tokens per (b, head).
  std::int64_t token_block = 0, blocks = 0;
  // int8.group: `group` elements per scale, cols / group groups per row.
  std::int64_t group = 0;
  // int8.token: single pass (the row in an fp32 working buffer) or two passes over the
  // source, `chunk` elements at a time.
  bool single_pass = true;
  std::int64_t chunk = 0;

  // Outputs: i8 payload in C order, scale (f32 or f16 bits) in C order.
  std::int8_t* payload = nullptr;
  void* scale = nullptr;

  // Set by a kernel that met a NaN or an infinity; every kernel stops at its next domain.
  std::atomic<bool>* nonfinite = nullptr;

  const std::uint8_t* element(std::int64_t offset) const {
    return data + offset * static_cast<std::int64_t>(elem_bytes);
  }
};

// The plan for quantizing `x` under `c` into `payload` and `scale`.
Int8Plan make_int8_plan(const Contract& c, const TensorView& x, std::int8_t* payload, void* scale,
                        std::atomic<bool>* nonfinite);

// Steps 2-4 for one domain whose amax is `amax` (finite, >= +0): stores the scale at flat
// `index` of plan.scale and returns how the domain's elements are divided or multiplied.
// Always inlined: the kernels run it once per domain, for q8_0 every 32 values.
HWY_INLINE Int8Quotient int8_scale_domain(const Int8Plan& p, float amax, std::int64_t index) {
  // Step 2. std::max keeps its first argument on ties, as the contract's max(a, b) is read.
  float s = p.scale_mode == ScaleMode::before ? std::max(amax, p.scale_min) / p.qmax
                                              : std::max(amax / p.qmax, p.scale_min);
  s = round_to_dtype(p.scale_round, s);
  if (s == 0.0f && p.zero_group == ZeroGroup::eps) s = dtype_eps(p.scale_round);
  // Step 3.
  float stored = s;
  const auto i = static_cast<std::size_t>(index);
  if (p.f16_scale) {
    const std::uint16_t h = f32_to_f16(s);
    static_cast<std::uint16_t*>(p.scale)[i] = h;
    stored = f16_to_f32(h);
  } else {
    static_cast<float*>(p.scale)[i] = s;
  }
  // Step 4.
  switch (p.quotient) {
    case Quotient::divide:
      if (stored == 0.0f) return {p.zero_group != ZeroGroup::nan, 0.0f, p.zero_group == ZeroGroup::nan};
      return {false, stored};
    case Quotient::reciprocal: {
      const float clamped = std::max(amax, p.scale_min);
      if (clamped == 0.0f) return {};
      return {false, p.qmax / clamped};
    }
    case Quotient::inv_scale:
      if (s == 0.0f) return {};
      return {false, 1.0f / s};
  }
  return {};
}

// The finite-only rejection: throws bad_input naming the first NaN or infinity of the plan's
// input in C order, `what` taking ("int8.token", ...) and `where` spelling the flat index.
[[noreturn]] void reject_first_nonfinite(const Int8Plan& p, const std::string& what,
                                         std::string (*where)(const Int8Plan&, std::int64_t flat));

// The SIMD kernels (one body per target, dispatched at run time). Each runs a contiguous range
// of independent units, stopping early once *p.nonfinite is set:
//   block: units (b, token block), each with all its heads; token: rows; group: groups in C order.
void quantize_int8_block_units(const Int8Plan& p, std::int64_t first, std::int64_t last);
void quantize_int8_token_rows(const Int8Plan& p, std::int64_t first, std::int64_t last);
void quantize_int8_group_units(const Int8Plan& p, std::int64_t first, std::int64_t last);

// Dequantization: runs of `run` payload values in C order sharing one scale (a head's D
// values of one token, a row, a group); out is C-order fp32.
struct Int8DequantPlan {
  const std::int8_t* payload = nullptr;
  const TensorView* payload_view = nullptr;  // used where the payload is not contiguous
  bool payload_contiguous = true;
  std::int64_t payload_col_stride = 1;
  const std::uint8_t* scale = nullptr;
  const TensorView* scale_view = nullptr;
  bool scale_contiguous = true;
  bool f16_scale = false;
  Family family = Family::int8_token;
  std::int64_t run = 0;
  // int8.block: scale index of run (b, s, n) is (b * heads + n) * blocks + s / token_block.
  std::int64_t seq = 0, heads = 0, blocks = 0, token_block = 1;
  float* out = nullptr;
};
void dequantize_int8_runs(const Int8DequantPlan& p, std::int64_t first, std::int64_t last);

}  // namespace qexact::kernels
