// torchao 0.18.0 on torch 2.15, CPU, eager and torch.compile'd: every preset here is compared
// byte for byte with the running library in the peer suite (python/peer_tests).
#include "contracts/presets/builders.hpp"
#include "contracts/presets/preset_table.hpp"

namespace qexact::presets {
namespace {

// to_mx RCEIL, eager or compiled: they differ in NaN groups only.
void torchao_rceil(Contract& c) {
  c = mx_base(ElemFormat::e4m3);
  c.scale_rule = ScaleRule::rceil;
  c.ratio = RatioOp::reciprocal;
  c.byte0 = Byte0Rule::unscaled;  // byte 0 multiplies by 1.0
  c.layout = ScaleLayout::rowmajor;
  c.tail = TailRule::reject;
}

// float8 dynamic scaling (float8_utils.amax_to_scale, to_fp8_saturated).
void fp8_torchao(Contract& c) {
  c.scale_kind = ScaleKind::multiplier;
  c.scale_arith = ScaleArith::fp64;
  c.amax_floor = 1e-12;  // EPS in float8_utils, a Python float
  c.zero_group = ZeroGroup::floor;
  c.fp8_quotient = Fp8Quotient::multiply;
  c.nonfinite_input = NonFiniteInput::propagate;
}

}  // namespace

std::vector<PresetDef> torchao_presets() {
  return {
      {"mxfp8.torchao.floor", "torchao 0.18.0 to_mx FLOOR, eager and torch.compile'd (CPU): byte from the exponent field of amax, x / max(2^(byte-127), 2^-126) RNE clamped to +/-448", "peer",
       [](Contract& c) {
         c = mx_base(ElemFormat::e4m3);
         c.scale_rule = ScaleRule::floor;
         c.nonfinite = NonFiniteRule::torchao;
         c.byte0 = Byte0Rule::min_normal;  // the fp32 scale is clamped to 2^-126
         c.layout = ScaleLayout::rowmajor;
         c.tail = TailRule::reject;
       }},
      {"mxfp8.torchao.rceil", "torchao 0.18.0 to_mx RCEIL, eager (CPU): fp32 amax * (1/448) rounded up to a power of two, byte 0 multiplies by 1.0", "peer",
       [](Contract& c) {
         torchao_rceil(c);
         c.nonfinite = NonFiniteRule::torchao_rceil;
       }},
      {"mxfp8.torchao.rceil.compiled",
       "torchao 0.18.0 to_mx RCEIL under torch.compile (CPU, torch 2.15): as mxfp8.torchao.rceil, a NaN group is 0xFF throughout",
       "peer",
       [](Contract& c) {
         torchao_rceil(c);
         c.nonfinite = NonFiniteRule::torchao_rceil_compiled;
       }},
      {"fp8.torchao.tensorwise", "torchao 0.18.0 float8 tensorwise dynamic scaling (CPU, measured): multiplier = fp32(max / max(amax, 1e-12)) in fp64, "
       "saturated cast of x * multiplier, NaN/inf as torch propagates them; round_scales_to_power_of_2 is scale_pow2=down_log2f",
       "peer",
       [](Contract& c) {
         c = fp8_base({Granularity::tensor, 1, 1});
         fp8_torchao(c);
       }},
      {"fp8.torchao.rowwise", "torchao 0.18.0 float8 rowwise (axiswise, dim -1) dynamic scaling (CPU, measured): one multiplier per row, as "
       "tensorwise",
       "peer",
       [](Contract& c) {
         c = fp8_base({Granularity::row, 1, 1});
         fp8_torchao(c);
       }},
      {"nvfp4.torchao", "torchao 0.18.0 nvfp4_quantize: E2M1 in blocks of 16, E4M3 block scale e4m3(clamp(amax / 6, 2^-6, 448)), x * (1 / scale) clamped to +/-6", "peer",
       [](Contract& c) {
         c = family_base(Family::nvfp4);
         c.tensor_scale = TensorScale::none;
         c.nonfinite_input = NonFiniteInput::propagate;
       }},
  };
}

}  // namespace qexact::presets
