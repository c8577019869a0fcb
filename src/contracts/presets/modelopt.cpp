// NVIDIA ModelOpt 0.47.0 (modelopt.torch.quantization), its real-quant QTensor classes and its
// FP8 fake quant on CPU: every preset here is compared byte for byte with the running library in
// the peer suite (python/peer_tests/test_modelopt.py).
//
// Like compressed-tensors, ModelOpt's QTensors compute on the input's dtype (a bf16 scale
// amax / 448 and a bf16 quotient: scale_arith=input, quotient_arith=input), but they guard no
// zero: an all-zero domain has scale 0 and 0 / 0 gives NaN codes (zero_group=nan), and they do
// not clamp (torch 2.15's E4M3 cast saturates, which is the same bytes).
#include <cmath>

#include "contracts/presets/builders.hpp"
#include "contracts/presets/preset_table.hpp"

namespace qexact::presets {
namespace {

void modelopt_fp8(Contract& c, ScaleGrain g) {
  c = fp8_base(g);
  c.scale_kind = ScaleKind::descale;
  c.scale_arith = ScaleArith::input;
  c.quotient_arith = QuotientArith::input;
  c.fp8_quotient = Fp8Quotient::divide;
  c.zero_group = ZeroGroup::nan;
  c.signed_zero = SignedZero::keep;
  c.nonfinite_input = NonFiniteInput::propagate;
}

// The HF / TensorRT-LLM export (export/quant_utils.py): an fp32 scale fp32(amax) / 448, and
// weight / scale, which torch keeps in bf16 when the scale is a 0-dim tensor (per tensor) and
// promotes to fp32 when it is per channel.
void modelopt_export_fp8(Contract& c, ScaleGrain g, QuotientArith q) {
  modelopt_fp8(c, g);
  c.scale_arith = ScaleArith::fp32;
  c.quotient_arith = q;
}

// MXFP4QTensor / MXFP8QTensor: the exponent is ceil(torch.log2(amax / max)) (log2 rounded to
// fp32 first), clamped to >= -127; byte 0 divides by 2^-127.
Contract modelopt_mx(ElemFormat e) {
  Contract c = mx_base(e);
  c.scale_rule = ScaleRule::rceil;
  c.log2_fp32 = true;
  c.ratio = RatioOp::divide;
  c.byte0 = Byte0Rule::quantize;
  c.layout = ScaleLayout::rowmajor;
  return c;
}

}  // namespace

std::vector<PresetDef> modelopt_presets() {
  return {
      {"mxfp8.modelopt",
       "ModelOpt 0.47.0 MXFP8QTensor.quantize: byte 127 + ceil(fp32 log2(amax / 448)) in [0, 254], x * 2^(127 - byte) "
       "clamped to +/-448, E4M3 RNE; a NaN group has byte 0 (finite elements saturate), an inf group byte 254",
       "peer",
       [](Contract& c) {
         c = modelopt_mx(ElemFormat::e4m3);
         c.nonfinite = NonFiniteRule::byte0_nan;
         c.tail = TailRule::partial;  // the last dimension is zero-padded to whole blocks
       }},
      {"nvfp4.modelopt",
       "ModelOpt 0.47.0 NVFP4QTensor.quantize(x, 16): t = fp32(amax / 2688) stored (weight_scale_2, a descale), block "
       "scale e4m3(clamp(amax_b / fp32(6 * t), 2^-9, 448)) with 0 -> 1.0, x / fp32(s * t) to E2M1 RNE, sign iff < 0",
       "peer",
       [](Contract& c) {
         c = nvfp4_torch_divide();
         c.tensor_scale = TensorScale::amax;
         c.block_arith = BlockArith::fused;
         c.block_min = 0x1p-9f;
         c.zero_block = ZeroBlock::one;
       }},
      {"mxfp4.modelopt",
       "ModelOpt 0.47.0 MXFP4QTensor.quantize: byte 127 + ceil(fp32 log2(amax / 6)), E2M1 nearest with ties toward zero, "
       "a zero quotient coded 0x8 (its sign bit is q <= 0); a group holding NaN or inf is byte 0 and codes 0x8",
       "peer",
       [](Contract& c) {
         c = modelopt_mx(ElemFormat::e2m1);
         c.rounding = Rounding::ties_zero;
         c.signed_zero = SignedZero::negative;
         c.nonfinite = NonFiniteRule::negative_zero;
         c.tail = TailRule::reject;  // blocks of the flattened tensor: whole groups per row only
       }},
      {"int8.modelopt.channel",
       "ModelOpt 0.47.0 INT8QTensor.quantize with axis=0: one scale per row of the [out, in] weight, scale = "
       "D(amax / 127), clamp(RNE(D(x / scale)), -128, 127), D the input's dtype; a scale of 0 divides as IEEE does "
       "(an all-zero row: codes 0; a row whose scale underflows: +-127 / -128); finite inputs only",
       "peer", [](Contract& c) { c = int8_torch(Family::int8_token, 127.0f, ZeroGroup::nan); }},
      {"fp8.modelopt.tensor",
       "ModelOpt 0.47.0 FP8QTensor.quantize per tensor (mtq.compress of FP8_DEFAULT_CFG): scale = D(amax / 448), "
       "E4M3(D(x / scale)), D the input's dtype; an all-zero tensor has scale 0 and NaN codes",
       "peer", [](Contract& c) { modelopt_fp8(c, {Granularity::tensor, 1, 1}); }},
      {"fp8.modelopt.channel",
       "ModelOpt 0.47.0 FP8QTensor.quantize with axis=0: one scale per row of the [out, in] weight, as "
       "fp8.modelopt.tensor",
       "peer", [](Contract& c) { modelopt_fp8(c, {Granularity::row, 1, 1}); }},
      {"fp8.modelopt.block",
       "ModelOpt 0.47.0 FP8QTensor.quantize with block_sizes {-1: 128, -2: 128}: one scale per 128x128 tile, as "
       "fp8.modelopt.tensor",
       "peer", [](Contract& c) { modelopt_fp8(c, {Granularity::tile, 128, 128}); }},
      {"fp8.modelopt.export.tensor",
       "ModelOpt 0.47.0 HF export of an FP8 weight, per tensor: fp32 scale fp32(amax) / 448, E4M3(D(weight / scale)) "
       "(a 0-dim fp32 scale keeps a bf16 quotient in bf16)",
       "peer",
       [](Contract& c) { modelopt_export_fp8(c, {Granularity::tensor, 1, 1}, QuotientArith::input); }},
      {"fp8.modelopt.export.channel",
       "ModelOpt 0.47.0 HF export of an FP8 weight, per output channel: fp32 scale fp32(amax) / 448, "
       "E4M3(fp32(weight / scale))",
       "peer",
       [](Contract& c) { modelopt_export_fp8(c, {Granularity::row, 1, 1}, QuotientArith::fp32); }},
      {"fp8.modelopt.eager",
       "ModelOpt 0.47.0 FP8 fake quant (tensor_quant.fp8_eager, scaled_e4m3 on CPU) with amax = max |x|: multiplier "
       "448 * fp32(1 / amax) (amax <= 2^-24 taken as 1), E4M3(clamp(fp32(x) * multiplier, +/-448)); scale.npy holds "
       "fp32(1 / multiplier), which dequantize multiplies",
       "peer",
       [](Contract& c) {
         c = fp8_base({Granularity::tensor, 1, 1});
         c.scale_kind = ScaleKind::multiplier;
         c.scale_arith = ScaleArith::reciprocal_multiplier;  // torch's 448.0 / amax
         c.fp8_quotient = Fp8Quotient::multiply;
         c.stored = StoredScale::inverse;
         c.zero_group = ZeroGroup::amax_one;
         c.amax_floor = std::ldexp(1.0, -24);
         c.nonfinite_input = NonFiniteInput::propagate;
       }},
  };
}

}  // namespace qexact::presets
