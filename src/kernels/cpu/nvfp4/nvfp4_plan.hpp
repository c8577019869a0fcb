// What the nvfp4 fast kernels need, resolved once per call: plain data for the per-target code.
#pragma once
#include <cstdint>

#include "qexact/contract.hpp"
#include "qexact/tensor.hpp"

namespace qexact::kernels {

struct Nvfp4Plan {
  DType dtype = DType::f32;
  const std::uint8_t* data = nullptr;  // contiguous input, blocks of 16 back to back
  std::int64_t blocks = 0;
  bool two_level = false;
  bool te = false;            // TransformerEngine's arithmetic (tensor_scale=te)
  float tensor_scale = 1.0f;  // two_level: t; te: S_enc; multiplier: gs
  // The steps beyond torchao's (ModelOpt, compressed-tensors): any of them set takes the
  // one-block path with the general block scale below (nvfp4_block_math.hpp).
  bool general = false;
  bool multiplier = false;    // tensor_scale=multiplier: s = gs * (amax / 6), d = s / gs
  bool fused = false;         // block_arith=fused: s = amax / fp32(6 * t)
  bool divide = false;        // quotient=divide: x / d
  bool zero_one = false;      // zero_block=one
  bool zero_eps = false;      // zero_block=eps
  float block_min = 0x1p-6f;  // the clamp's lower end
  bool input_arith = false;   // scale_arith=input (multiplier): amax / 6 rounded to the input's dtype
  // quotient=prescaled (JAX on XLA:CPU, one block at a time): x' = x * t_reciprocal, the block
  // scale of amax(x') * fp32(1 / 6), x' * fp32(1 / s); ftz flushes subnormal operands and results.
  bool prescaled = false;
  bool ftz = false;
  float t_reciprocal = 1.0f;
  SignedZero signed_zero = SignedZero::keep;
  // block_rows=16: each block's scale amax is its 16x16 tile's (fp32 bits, one per block); the
  // blocks then take the one-block path.
  const std::uint32_t* tile_amax = nullptr;
  // te four_over_six: both candidate scales of a block, the one of smaller error (one-block path).
  bool four_over_six = false;
  bool mse = false;           // the error's terms squared (else absolute)
  float amax_tensor = 0.0f;   // the stored tensor amax, a factor of the error's values
  float error_denom = 2688.0f;  // 6 * global_e4m3_max
  std::uint8_t* payload = nullptr;
  std::uint8_t* scale = nullptr;
};

// Dequantize: block b's 16 elements are the E2M1 codes of payload bytes 8b..8b+7 (low nibble
// first) times multiplier[scale[b]], into out[16b..16b+15].
struct Nvfp4DequantPlan {
  const std::uint8_t* payload = nullptr;
  const std::uint8_t* scale = nullptr;
  const float* multiplier = nullptr;  // 256 entries, one per E4M3 scale code
  float* out = nullptr;
};

// Largest |x| of n contiguous elements as fp32 bits with the sign cleared: above 0x7F800000
// when any is a NaN (integer order of non-negative fp32 bits is their value order, NaN last).
std::uint32_t nvfp4_abs_max_bits(DType dtype, const std::uint8_t* data, std::int64_t first, std::int64_t last);
// |x| max bits of each block of 16 in [first, last), into out[0 .. last - first).
void nvfp4_block_maxima(DType dtype, const std::uint8_t* data, std::int64_t first, std::int64_t last,
                        std::uint32_t* out);
void quantize_nvfp4_blocks(const Nvfp4Plan& p, std::int64_t first, std::int64_t last);
void dequantize_nvfp4_blocks(const Nvfp4DequantPlan& p, std::int64_t first, std::int64_t last);

}  // namespace qexact::kernels
