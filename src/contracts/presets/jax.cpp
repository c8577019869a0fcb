// JAX 0.12.0.1 (jaxlib 0.12.0.1) on XLA:CPU: jax._src.cudnn.scaled_matmul_stablehlo.quantize, the
// quantizer behind jax.nn.scaled_dot_general with get_scaled_dot_general_config('mxfp8' |
// 'mxfp4' | 'nvfp4'), under jax.jit. Compared byte for byte with the running library in the peer
// suite (python/peer_tests/test_jax.py, a Python 3.12 venv: jaxlib has no 3.11 wheel).
//
// What all of them share (measured): XLA:CPU runs with FTZ and DAZ on (ftz=true: a subnormal
// input or intermediate is a zero of its sign), and rewrites a division by a broadcast divisor
// as x * fp32(1 / d): the MX ratio is amax * fp32(1 / max), nvfp4's every step a product. A NaN
// keeps its sign through products and 0 * inf is the x86 default NaN (negative); XLA's convert
// to E2M1 codes a NaN 0x8. Payloads are JAX's codes packed two per byte, element 2k in the low
// nibble (JAX returns one float4 per byte). Eager (op-by-op) JAX differs in one place, the MX
// byte-0 multiplier: byte0=infinite (DAZ reads the divisor 2^-127 as 0).
#include "contracts/presets/builders.hpp"
#include "contracts/presets/preset_table.hpp"

namespace qexact::presets {
namespace {

// cast_to_e8m0_with_rounding_up on the bits of FTZ(amax * fp32(1 / max)): up unless the
// mantissa is 0 or the exponent field is 254 (there it saturates); a NaN amax wraps to byte 0,
// inf is byte 255 (x * 0). Under jit byte 0 multiplies by 2^127.
Contract jax_mx(ElemFormat e) {
  Contract c = mx_base(e);
  c.scale_rule = ScaleRule::rceil;
  c.ratio = RatioOp::reciprocal;
  c.rounding = Rounding::rne;
  c.overflow = Overflow::saturate;
  c.nonfinite = NonFiniteRule::xla;
  c.byte0 = Byte0Rule::quantize;
  c.signed_zero = SignedZero::keep;
  c.ftz = true;
  c.layout = ScaleLayout::rowmajor;
  c.tail = TailRule::reject;  // contract_dim % block_size == 0 is asserted
  return c;
}

// x' = x * fp32(1 / gs), s = e4m3(clip(amax(x') * fp32(1 / 6), 0, 448)), x' * fp32(1 / s)
// clipped to +-6: a zero block's s = 0 multiplies by inf (nonzero -> +-6, zeros -> NaN 0x8).
Contract jax_nvfp4(TensorScale t) {
  Contract c = family_base(Family::nvfp4);
  c.nvfp4_quotient = Nvfp4Quotient::prescaled;
  c.tensor_scale = t;
  c.scale_arith = t == TensorScale::amax ? ScaleArith::reciprocal : ScaleArith::fp32;
  c.block_min = 0.0f;
  c.zero_block = ZeroBlock::clamp;
  c.signed_zero = SignedZero::keep;
  c.nonfinite_input = NonFiniteInput::propagate;
  c.ftz = true;
  return c;
}

}  // namespace

std::vector<PresetDef> jax_presets() {
  return {
      {"mxfp8.jax",
       "JAX 0.12 scaled_matmul_stablehlo.quantize, mode mxfp8, jit on XLA:CPU: byte = round up of FTZ(amax * fp32(1 / "
       "448)) on its bits (NaN -> 0, inf -> 255), x * 2^(127 - byte) with DAZ / FTZ, clipped, E4M3 RNE "
       "(byte0=infinite: eager)",
       "peer", [](Contract& c) { c = jax_mx(ElemFormat::e4m3); }},
      {"mxfp4.jax",
       "JAX 0.12 quantize, mode mxfp4, jit on XLA:CPU: as mxfp8.jax with max 6 and E2M1 RNE elements (a NaN is code "
       "0x8), element 2k in the low nibble",
       "peer", [](Contract& c) { c = jax_mx(ElemFormat::e2m1); }},
      {"nvfp4.jax",
       "JAX 0.12 quantize, mode nvfp4 with the default global scale 1, jit on XLA:CPU: block scale e4m3(clip(amax * "
       "fp32(1 / 6), 0, 448)), x * fp32(1 / s) clipped to +-6, E2M1 RNE; a zero block multiplies by inf (zeros -> NaN, "
       "code 0x8); DAZ / FTZ",
       "peer", [](Contract& c) { c = jax_nvfp4(TensorScale::none); }},
      {"nvfp4.jax.global",
       "JAX 0.12 quantize, mode nvfp4 with the global scale of JAX's own tests, amax / (6 * 448) under jit = amax * "
       "fp32(1 / 2688) (stored in tensor_scale): x' = x * fp32(1 / gs), then nvfp4.jax on x' (scale_arith=fp32: the "
       "global scale computed eagerly, fp32(amax / 2688))",
       "peer", [](Contract& c) { c = jax_nvfp4(TensorScale::amax); }},
  };
}

}  // namespace qexact::presets
