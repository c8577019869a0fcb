// compressed-tensors 0.20.1 (the checkpoint format vLLM loads, written by llm-compressor), its
// eager torch code on CPU: every preset here is compared byte for byte with the running library
// in the peer suite (python/peer_tests/test_compressed_tensors.py).
//
// What all of them share (measured): torch computes on the input's dtype, so for a bf16 tensor
// the scale amax / 448 and the quotient x / scale are each the fp32 operation rounded to bf16
// (scale_arith=input, quotient_arith=input); a scale that comes out 0 becomes
// torch.finfo(dtype).eps (zero_group=eps: 2^-23, bf16 2^-7); the quotient gets the zero point
// +0.0 added, which turns an exactly zero quotient into +0 while a negative value that rounds to
// zero in the cast keeps its sign (signed_zero=underflow); NaN and inf go through as torch
// propagates them. Scales are stored in the input's dtype (bf16 values are exact in scale.npy's
// fp32).
#include "contracts/presets/builders.hpp"
#include "contracts/presets/preset_table.hpp"

namespace qexact::presets {
namespace {

void ct_fp8(Contract& c, ScaleGrain g) {
  c = fp8_base(g);
  c.scale_kind = ScaleKind::descale;
  c.scale_arith = ScaleArith::input;
  c.quotient_arith = QuotientArith::input;
  c.fp8_quotient = Fp8Quotient::divide;
  c.zero_group = ZeroGroup::eps;
  c.signed_zero = SignedZero::underflow;
  c.nonfinite_input = NonFiniteInput::propagate;
}

// MXFP8 / MXFP4 (generate_mx_scales): amax rounded to a power of two at E2M1's precision (an
// integer add on its bits: 1.75 * 2^k goes up), byte 127 + log2 of it - emax; elements x / scale
// with the zero point's +0 (MXFP8) or the packer's sign test q < 0 (MXFP4): a zero quotient is +0.
Contract ct_mx(ElemFormat e) {
  Contract c = mx_base(e);
  c.scale_rule = ScaleRule::even;
  c.round_mbits = 1;
  c.nonfinite = NonFiniteRule::ct;
  c.byte0 = Byte0Rule::quantize;
  c.signed_zero = SignedZero::underflow;
  c.quotient_arith = QuotientArith::input;  // x / scale on a bf16 tensor: tiny quotients flush to +-0
  c.layout = ScaleLayout::rowmajor;
  c.tail = TailRule::reject;  // group_size 32 must divide the last dimension
  return c;
}

}  // namespace

std::vector<PresetDef> compressed_tensors_presets() {
  return {
      {"mxfp8.ct",
       "compressed-tensors 0.20.1 MXFP8 (weights and dynamic activations): byte from amax rounded to a power of two at "
       "E2M1 precision (amax 448 -> 0x80), E4M3(clamp(x / scale + 0)); NaN group byte 0, inf or 2^128 byte 0x7F",
       "peer", [](Contract& c) { c = ct_mx(ElemFormat::e4m3); }},
      {"nvfp4.ct",
       "compressed-tensors 0.20.1 NVFP4 (nvfp4-pack-quantized): global scale gs = D(2688 * D(1 / max(amax, tiny))) "
       "stored as a multiplier (1.0 if not finite), block scale e4m3(min(gs * D(amax_b / 6), 448)) with code 0 -> 0.125, "
       "x / fp32(s / gs) to E2M1 RNE, sign iff < 0; D the input's dtype",
       "peer",
       [](Contract& c) {
         c = nvfp4_torch_divide();
         c.tensor_scale = TensorScale::multiplier;
         c.scale_arith = ScaleArith::input;
         c.block_min = 0.0f;
         c.zero_block = ZeroBlock::eps;
       }},
      {"mxfp4.ct",
       "compressed-tensors 0.20.1 MXFP4 (mxfp4-pack-quantized): as mxfp8.ct with E2M1 RNE elements, element 2k in the "
       "low nibble",
       "peer", [](Contract& c) { c = ct_mx(ElemFormat::e2m1); }},
      {"int8.ct.token",
       "compressed-tensors 0.20.1 int8 (int-quantized, W8A8) per output channel or dynamic per token: scale = "
       "D(amax / 127.5) (the bit range 255 halved; eps if 0), RNE(clamp(D(x / scale), -128, 127)), so -amax -> -128; "
       "D the input's dtype; finite inputs only",
       "peer", [](Contract& c) { c = int8_torch(Family::int8_token, 127.5f, ZeroGroup::eps); }},
      {"int8.ct.group",
       "compressed-tensors 0.20.1 int8 per group of 128 along the last axis, as int8.ct.token",
       "peer",
       [](Contract& c) {
         c = int8_torch(Family::int8_group, 127.5f, ZeroGroup::eps);
         c.group = 128;
       }},
      {"fp8.ct.tensor",
       "compressed-tensors 0.20.1 FP8 (float-quantized) per tensor, weights or dynamic activations: scale = D(amax / 448) "
       "(eps if 0), E4M3(clamp(D(x / scale) + 0, +/-448)), D the input's dtype",
       "peer", [](Contract& c) { ct_fp8(c, {Granularity::tensor, 1, 1}); }},
      {"fp8.ct.channel",
       "compressed-tensors 0.20.1 FP8 per output channel (FP8_DYNAMIC weights): one scale per row of the [out, in] "
       "weight, as fp8.ct.tensor",
       "peer", [](Contract& c) { ct_fp8(c, {Granularity::row, 1, 1}); }},
      {"fp8.ct.token",
       "compressed-tensors 0.20.1 FP8 dynamic per-token activations of a (B, T, H) tensor: one scale per row, as "
       "fp8.ct.tensor (the library reduces a 2-D tensor to one scale: use fp8.ct.tensor there)",
       "peer", [](Contract& c) { ct_fp8(c, {Granularity::row, 1, 1}); }},
      {"fp8.ct.group",
       "compressed-tensors 0.20.1 FP8 per group of 128 along the last axis (weights or dynamic activations), as "
       "fp8.ct.tensor",
       "peer", [](Contract& c) { ct_fp8(c, {Granularity::group, 1, 128}); }},
      {"fp8.ct.block",
       "compressed-tensors 0.20.1 FP8_BLOCK weights: one scale per 128x128 tile of the [out, in] weight, as "
       "fp8.ct.tensor",
       "peer", [](Contract& c) { ct_fp8(c, {Granularity::tile, 128, 128}); }},
  };
}

}  // namespace qexact::presets
