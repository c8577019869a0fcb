// Everything the fast fp8.scaled kernel needs, resolved once per call (contracts §9.1): the
// element format, the scale rules, and the scale domains as runs of consecutive elements of the
// contiguous input. Every granularity's domain is a union of such runs ("segments"): a row, a
// row's group, the rows of a tile, the tokens of a head block; the tensor is one domain.
#pragma once
#include <algorithm>
#include <cstdint>

#include "qexact/contract.hpp"
#include "qexact/tensor.hpp"

namespace qexact::kernels {

struct Fp8Plan {
  // Element format: the clamp bound and the bit layout the encoder rounds to.
  ElemFormat element = ElemFormat::e4m3;
  int mbits = 3, bias = 7;
  float max = 448.0f;
  std::uint32_t max_bits = 0;  // bits of max: the clamp on |x| bits
  // overflow=nan / inf: a finite or infinite quotient whose magnitude bits are overflow_from or
  // more rounds past max and takes overflow_code (with its sign) instead of the clamp's max.
  bool overflows = false;
  std::int32_t overflow_from = 0;
  std::int32_t overflow_code = 0;

  // Scale rules.
  Fp8Quotient quotient = Fp8Quotient::divide;
  bool multiplier = false;  // scale_kind=multiplier
  ScaleArith arith = ScaleArith::fp32;
  ScalePow2 pow2 = ScalePow2::none;
  bool stored_inverse = false;
  double amax_floor = 0.0;
  ZeroGroup zero_group = ZeroGroup::zero;
  bool propagate = false;         // nonfinite_input=propagate
  // The dtype quotients are rounded to before the element cast (quotient_arith=input): f32
  // (no rounding), bf16 or f16.
  DType quotient_round = DType::f32;
  // signed_zero: true keeps a zero's sign; false makes every zero code +0; underflow makes a
  // quotient that is exactly zero +0.
  SignedZero signed_zero = SignedZero::keep;
  std::uint32_t nan_amax = 0;     // the bits torch's abs-max gives a domain holding a NaN

  // Input (contiguous), viewed as rows x cols; head_block as (B, S, H, D).
  Granularity kind = Granularity::tensor;
  DType dtype = DType::f32;
  std::int64_t elem_size = 4;
  const std::uint8_t* data = nullptr;
  std::int64_t numel = 0, rows = 0, cols = 0;
  std::int64_t grain_rows = 1, grain_cols = 1;  // tile M x N, group N, head_block T (rows)
  std::int64_t col_blocks = 1;                  // groups per row, tiles per tile row
  std::int64_t B = 0, S = 0, H = 0, D = 0, token_blocks = 0;
  std::int64_t domains = 1;

  // Outputs: payload in the input's (C) order, scale in the granularity's shape.
  std::uint8_t* payload = nullptr;
  float* scale = nullptr;
};

// scale_shape: the checked shape of the scale output (output_specs), its numel the domains.
Fp8Plan make_fp8_plan(const Contract& c, const TensorView& contiguous_x, const Shape& scale_shape,
                      std::uint8_t* payload, float* scale);

// The NaN bits of a tensor-granularity amax: those of torch's full reduction of a tensor of
// `several` elements (more than one) or of one.
std::uint32_t fp8_tensor_nan_amax(DType dtype, bool several);

// One domain's scale: what scale.npy holds, and the operand of the quotient (the descale for
// quotient=divide, fp32(1 / descale) for reciprocal, the multiplier for multiply).
struct Fp8Scale {
  bool zero = false;    // zero_group=zero and amax 0: payload 0
  float stored = 0.0f;
  float operand = 0.0f;
  bool plain = false;   // finite, non-zero operand and finite amax: no element can make a NaN
};
Fp8Scale fp8_scale_of(const Fp8Plan& p, std::uint32_t amax_bits);
// A domain's scale given in its stored form (quantize with given scales): read back as the
// contract stores it (stored=inverse: fp32(1 / it)) and turned into the quotient's operand; a
// given 0 under zero_group=zero is a zero domain. amax_bits (the domain's own) only decides
// whether the domain is plain.
Fp8Scale fp8_scale_from_stored(const Fp8Plan& p, float stored, std::uint32_t amax_bits);

// The quotient of one element by the operand, with x86 SSE's NaN results (what torch on the CPU
// gives): for domains that are not plain.
float fp8_special_quotient(const Fp8Plan& p, float x, float operand);

// Calls f(offset, n) for each run of domain d (offsets in elements of the C-order input).
template <class F>
void fp8_for_each_segment(const Fp8Plan& p, std::int64_t d, F&& f) {
  switch (p.kind) {
    case Granularity::tensor:
      f(std::int64_t{0}, p.numel);
      return;
    case Granularity::row:
      f(d * p.cols, p.cols);
      return;
    case Granularity::group: {
      const std::int64_t r = d / p.col_blocks, c0 = (d % p.col_blocks) * p.grain_cols;
      f(r * p.cols + c0, std::min(p.grain_cols, p.cols - c0));
      return;
    }
    case Granularity::tile: {
      const std::int64_t r0 = (d / p.col_blocks) * p.grain_rows, c0 = (d % p.col_blocks) * p.grain_cols;
      const std::int64_t r1 = std::min(p.rows, r0 + p.grain_rows), n = std::min(p.grain_cols, p.cols - c0);
      for (std::int64_t r = r0; r < r1; ++r) f(r * p.cols + c0, n);
      return;
    }
    case Granularity::head_block: {
      // d = (b * H + h) * token_blocks + t: tokens [t * T, min(S, (t + 1) * T)) of head h.
      const std::int64_t t = d % p.token_blocks, bh = d / p.token_blocks;
      const std::int64_t b = bh / p.H, h = bh % p.H;
      const std::int64_t s1 = std::min(p.S, (t + 1) * p.grain_rows);
      for (std::int64_t s = t * p.grain_rows; s < s1; ++s) f(((b * p.S + s) * p.H + h) * p.D, p.D);
      return;
    }
  }
}

// The SIMD kernels (fp8_quantize.cpp), dispatched to the best target.
// max |x| of n elements from offset, as fp32 bits (NaN above inf's 0x7F800000).
std::uint32_t fp8_abs_max_bits(const Fp8Plan& p, std::int64_t offset, std::int64_t n);
// Codes of n elements from offset under a domain's scale.
void fp8_quantize_run(const Fp8Plan& p, const Fp8Scale& s, std::int64_t offset, std::int64_t n);
// Values of n codes (element E4M3 for mbits 3, E5M2 for 2) of one domain: code * s where
// `times`, else code / s (an IEEE division); a NaN value is the canonical quiet NaN. The
// values may leave in streaming stores: call hwy::FlushStream() before another thread reads them.
void fp8_dequantize_run(int mbits, const std::uint8_t* codes, std::int64_t n, float s, bool times, float* out);
// Domains [first, last) of a granularity other than tensor: scales and codes. false (the rest
// unwritten) at the first domain with a non-finite amax under nonfinite_input=reject.
bool fp8_quantize_domains(const Fp8Plan& p, std::int64_t first, std::int64_t last);
// The same for tile and head_block granularity, by bands of rows: a tile row (grain_rows rows of
// every tile column) or a token block of one batch (every head); fp8_band_count gives their number.
bool fp8_quantize_bands(const Fp8Plan& p, std::int64_t first, std::int64_t last);
inline std::int64_t fp8_band_count(const Fp8Plan& p) {
  if (p.kind == Granularity::tile) return (p.rows + p.grain_rows - 1) / p.grain_rows;
  return p.B * p.token_blocks;
}

}  // namespace qexact::kernels
