// Fast nvfp4 quantize and dequantize (contracts §9.2): checks and the passes here, the per-block
// SIMD work in nvfp4_quantize.cpp and nvfp4_dequantize.cpp. tensor_scale=amax reads the input
// twice: a parallel |x| max (a max is exact in any order, so the thread count cannot change it),
// then the blocks.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "contracts/family_table.hpp"
#include "kernels/cpu/common/parallel.hpp"
#include "kernels/cpu/common/scalar_load.hpp"
#include "kernels/cpu/common/simd_target.hpp"
#include "kernels/cpu/nvfp4/nvfp4_block_math.hpp"
#include "kernels/cpu/nvfp4/nvfp4_fast.hpp"
#include "kernels/cpu/nvfp4/nvfp4_plan.hpp"
#include "qexact/error.hpp"

namespace qexact::fast {
namespace {

// max |x| over the whole input as fp32 bits (a max is exact in any order: thread-independent).
std::uint32_t abs_max_bits(const kernels::Nvfp4Plan& p, int threads) {
  const std::int64_t n = p.blocks * kNvfp4Block;
  const std::int64_t chunks = std::max<std::int64_t>(1, std::min<std::int64_t>(threads, n / 65536));
  std::vector<std::uint32_t> part(static_cast<std::size_t>(chunks), 0u);
  kernels::parallel_for(chunks, 1, threads, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t c = b; c < e; ++c)
      part[static_cast<std::size_t>(c)] = kernels::nvfp4_abs_max_bits(p.dtype, p.data, n * c / chunks, n * (c + 1) / chunks);
  });
  std::uint32_t m = 0;
  for (std::uint32_t v : part) m = std::max(m, v);
  return m;
}

// The first non-finite element (C order) as "(row r, column c)" of the [rows, K] view; called
// once the |x| max has shown there is one.
[[noreturn]] void reject_nonfinite(const kernels::Nvfp4Plan& p, std::int64_t k) {
  const std::int64_t n = p.blocks * kNvfp4Block;
  std::int64_t i = 0;
  while (i < n && std::isfinite(kernels::load_scalar_f32(p.dtype, p.data, i))) ++i;
  if (i == n)  // only a given tensor amax was non-finite
    fail(ErrorKind::bad_argument, "nvfp4: the given tensor amax is not finite, which nonfinite_input=reject refuses");
  const float v = kernels::load_scalar_f32(p.dtype, p.data, i);
  fail(ErrorKind::bad_input, "nvfp4: non-finite input " + std::to_string(v) + " at (row " + std::to_string(i / k) +
                                 ", column " + std::to_string(i % k) + ") (nonfinite_input=reject)");
}

// t = amax / (448 * 6), torchao's per_tensor_amax_to_scale(torch.max(torch.abs(x))); a NaN amax
// is the one torch.max returns for the dtype (f32 0xFFFFFFFF, bf16 0x7FC00000; f16 as bf16).
float tensor_scale_of(const kernels::Nvfp4Plan& p, std::uint32_t m) {
  if (m > 0x7F800000u) m = p.dtype == DType::f32 ? 0xFFFFFFFFu : 0x7FC00000u;
  return kernels::nvfp4::div_x86(kernels::nvfp4::value(m), 448.0f * 6.0f);
}

// The quantizer after its checks (theirs or quantize.cpp's).
std::string run_nvfp4(const Contract& c, const TensorView& x, std::uint8_t* payload, std::uint8_t* scale,
                      float* tensor_scale, int threads, const float* tensor_amax) {
  kernels::apply_forced_target();
  const Tensor copy = x.is_contiguous() ? Tensor() : contiguous_copy(x);
  kernels::Nvfp4Plan p;
  p.dtype = x.dtype;
  p.data = static_cast<const std::uint8_t*>(x.is_contiguous() ? x.data : copy.raw());
  p.blocks = shape_numel(x.shape) / kNvfp4Block;
  p.payload = payload;
  p.scale = scale;
  // One parallel |x| max serves the non-finite check and the tensor scale; a given tensor amax
  // (at least x's own) replaces it.
  if (tensor_amax && c.tensor_scale == TensorScale::none)
    fail(ErrorKind::bad_argument, "nvfp4: a tensor amax was given, but the contract has no tensor scale");
  const bool reject = c.nonfinite_input == NonFiniteInput::reject;
  const std::uint32_t amax_bits = tensor_amax ? kernels::nvfp4::bits(*tensor_amax) & 0x7FFFFFFFu
                                  : reject || c.tensor_scale != TensorScale::none ? abs_max_bits(p, threads)
                                                                                   : 0u;
  if (reject && amax_bits >= 0x7F800000u) reject_nonfinite(p, x.shape.back());
  p.fused = c.block_arith == BlockArith::fused;
  p.divide = c.nvfp4_quotient == Nvfp4Quotient::divide;
  p.zero_one = c.zero_block == ZeroBlock::one;
  p.zero_eps = c.zero_block == ZeroBlock::eps;
  p.block_min = c.block_min;
  p.signed_zero = c.signed_zero;
  p.multiplier = c.tensor_scale == TensorScale::multiplier;
  p.prescaled = c.nvfp4_quotient == Nvfp4Quotient::prescaled;
  p.ftz = c.ftz;
  p.general = p.fused || p.divide || p.zero_one || p.zero_eps || p.multiplier || p.block_min != 0x1p-6f ||
              p.signed_zero != SignedZero::keep || p.prescaled;
  if (p.prescaled) {
    // JAX: t = amax / 2688 (scale_arith=reciprocal: amax * fp32(1 / 2688)) or 1, then x * (1 / t).
    float t = 1.0f;
    if (c.tensor_scale == TensorScale::amax) {
      const float amax = amax_bits > 0x7F800000u ? std::numeric_limits<float>::quiet_NaN()
                                                 : kernels::nvfp4::flush_if(p.ftz, kernels::nvfp4::value(amax_bits));
      t = c.scale_arith == ScaleArith::reciprocal ? kernels::nvfp4::xla_mul(p.ftz, amax, 1.0f / (448.0f * 6.0f))
                                                  : kernels::nvfp4::flush_if(p.ftz, amax / (448.0f * 6.0f));
      *tensor_scale = t;
    }
    p.tensor_scale = t;
    p.t_reciprocal = kernels::nvfp4::xla_reciprocal(p.ftz, t);
  } else if (c.tensor_scale == TensorScale::amax) {
    p.two_level = true;
    p.tensor_scale = tensor_scale_of(p, amax_bits);
    *tensor_scale = p.tensor_scale;
  } else if (p.multiplier) {
    // compressed-tensors' global scale (finite inputs: multiplier needs nonfinite_input=reject):
    // 2688 * fp32(1 / max(amax, 2^-126)), 1.0 where it overflows.
    // scale_arith=input: both steps in the input's dtype, f16's floor its smallest normal.
    using kernels::nvfp4::in_input_dtype;
    p.input_arith = c.scale_arith == ScaleArith::input;
    const float tiny = p.input_arith && x.dtype == DType::f16 ? 0x1p-14f : 0x1p-126f;
    const float reciprocal =
        in_input_dtype(p.input_arith, x.dtype, 1.0f / std::max(kernels::nvfp4::value(amax_bits), tiny));
    const float gs = in_input_dtype(p.input_arith, x.dtype, 448.0f * 6.0f * reciprocal);
    p.tensor_scale = std::isfinite(gs) ? gs : 1.0f;
    *tensor_scale = p.tensor_scale;
  } else if (c.tensor_scale == TensorScale::te) {
    // TransformerEngine stores the amax (finite: te needs nonfinite_input=reject) and quantizes
    // with S_enc = (E * 6) / amax (E = global_e4m3_max: 448, or 4over6's 256), capped at
    // FLT_MAX, 1 where the amax is 0 or S_enc underflows.
    const float amax = kernels::nvfp4::value(amax_bits);
    const float e6 = static_cast<float>(c.global_e4m3_max) * 6.0f;
    const float s_enc = std::min(e6 / amax, std::numeric_limits<float>::max());
    p.te = true;
    p.tensor_scale = amax == 0.0f || s_enc == 0.0f ? 1.0f : s_enc;
    *tensor_scale = amax;
    p.four_over_six = c.four_over_six != FourOverSix::off;
    p.mse = c.four_over_six == FourOverSix::mse;
    p.amax_tensor = amax;
    p.error_denom = e6;
  }
  // block_rows=16: each band of 16 rows in one step, its tile maxima (a max is exact in any
  // order, so threads cannot change it) and then its blocks, which it reads again from the
  // cache (a band of 4096 bf16 columns is 128 KiB).
  if (c.block_rows > 1) {
    const std::int64_t per_row = x.shape.back() / kNvfp4Block, rows = per_row ? p.blocks / per_row : 0;
    std::vector<std::uint32_t> tiles(static_cast<std::size_t>(p.blocks), 0u);
    p.tile_amax = tiles.data();
    const std::int64_t band_rows = c.block_rows;
    kernels::parallel_for((rows + band_rows - 1) / band_rows, 1, threads, [&](std::int64_t t0, std::int64_t t1) {
      for (std::int64_t t = t0; t < t1; ++t) {
        const std::int64_t r0 = t * band_rows, r1 = std::min(rows, r0 + band_rows);
        std::uint32_t* band = tiles.data() + r0 * per_row;
        kernels::nvfp4_block_maxima(p.dtype, p.data, r0 * per_row, r1 * per_row, band);
        for (std::int64_t j = 0; j < per_row; ++j) {
          std::uint32_t m = 0;
          for (std::int64_t r = 0; r < r1 - r0; ++r) m = std::max(m, band[r * per_row + j]);
          for (std::int64_t r = 0; r < r1 - r0; ++r) band[r * per_row + j] = m;
        }
        kernels::quantize_nvfp4_blocks(p, r0 * per_row, r1 * per_row);
      }
    });
    return "blockwise";
  }
  kernels::parallel_for(p.blocks, 1024, threads,
                        [&](std::int64_t b, std::int64_t e) { kernels::quantize_nvfp4_blocks(p, b, e); });
  return "blockwise";
}

}  // namespace

std::string quantize_nvfp4_into(const Contract& c, const TensorView& x, std::uint8_t* payload, std::uint8_t* scale,
                                float* tensor_scale, int threads, const float* tensor_amax) {
  validate(c);
  if (c.family != Family::nvfp4) fail(ErrorKind::bad_argument, "quantize_nvfp4 takes an nvfp4 contract");
  if (!is_float_dtype(x.dtype))
    fail(ErrorKind::bad_argument, std::string("nvfp4 quantize takes f32, bf16 or f16 input, got ") + dtype_name(x.dtype));
  (void)output_specs(c, x.shape);  // rank >= 1, K % 16 == 0
  return run_nvfp4(c, x, payload, scale, tensor_scale, threads, tensor_amax);
}

std::string quantize_nvfp4_prechecked(const Contract& c, const TensorView& x, const MutableTensorView& payload,
                                      const MutableTensorView& scale, const MutableTensorView& tensor_scale,
                                      int threads) {
  return run_nvfp4(c, x, static_cast<std::uint8_t*>(payload.data), static_cast<std::uint8_t*>(scale.data),
                   static_cast<float*>(tensor_scale.data), threads, nullptr);
}

void dequantize_nvfp4_into(const Contract& c, const TensorView& payload, const TensorView& scale,
                           const TensorView& tensor_scale, const Shape& x_shape, float* out, int threads) {
  validate(c);
  require_quantized(c, payload, scale, tensor_scale, x_shape);
  float t = 1.0f;
  const bool two_level = c.tensor_scale != TensorScale::none;
  if (two_level) t = *static_cast<const float*>(tensor_scale.data);
  const Tensor pc = payload.is_contiguous() ? Tensor() : contiguous_copy(payload);
  const Tensor sc = scale.is_contiguous() ? Tensor() : contiguous_copy(scale);
  const auto* pp = static_cast<const std::uint8_t*>(payload.is_contiguous() ? payload.data : pc.raw());
  const auto* sp = static_cast<const std::uint8_t*>(scale.is_contiguous() ? scale.data : sc.raw());
  // The block multiplier of each E4M3 scale code, with the reference's operations in its order.
  float multiplier[256];
  for (int code = 0; code < 256; ++code) {
    float m = kernels::nvfp4::e4m3_scale_value(static_cast<std::uint8_t>(code));
    if (c.tensor_scale == TensorScale::amax) m = t * m;  // torchao's get_hp_scales: t * s rounded first
    if (c.tensor_scale == TensorScale::multiplier) m = m / t;  // compressed-tensors: s / gs
    if (c.tensor_scale == TensorScale::te)  // TE: (s * amax) * fp32(1 / (E * 6)), E = global_e4m3_max
      m = (m * t) * (1.0f / (static_cast<float>(c.global_e4m3_max) * 6.0f));
    multiplier[code] = m;
  }
  const kernels::Nvfp4DequantPlan plan{pp, sp, multiplier, out};
  const std::int64_t blocks = shape_numel(x_shape) / kNvfp4Block;
  kernels::parallel_for(blocks, 1024, threads,
                        [&](std::int64_t first, std::int64_t last) { kernels::dequantize_nvfp4_blocks(plan, first, last); });
}

}  // namespace qexact::fast
