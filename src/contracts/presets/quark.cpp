// AMD Quark 0.13 (amd-quark on torch 2.15, CPU): its OCP MX quantizers with the default
// scale_calculation_mode "even", as `export_safetensors` writes a statically quantized weight
// (OCP_MXFP4Spec / OCP_MXFP6E2M3Spec / OCP_MXFP6E3M2Spec, is_dynamic=False: the observer's scale,
// then get_real_quantizer's to_real_quantize_params and to_e8m0_uint8), and its fake quant for
// MXFP8, which Quark 0.13 cannot export on CPU. Compared byte for byte with the running library
// in the peer suite (python/peer_tests/test_quark.py).
//
// What they share (measured): the scale is amax rounded half up at the element's mantissa bits,
// then 2^clamp(floor(log2) - emax, -127, 127) (an all-zero block 2^-127); elements are
// fp32(x) / scale, RNE, saturating; a NaN block's scale is NaN and an inf block's 2^127
// (nonfinite=quark). The exported byte is clamp(round(log2(max(scale, 2^-126))), -127, 127) + 127:
// a scale of 2^-127 is written 0x01 though the codes used 2^-127 (byte0=written_one); read back,
// such a block decodes to twice Quark's own fake-quant values. The real quantizer writes every
// zero +0 (signed_zero=false); fake quant keeps -0. fp6 codes are one per byte here; Quark packs
// four in three bytes (w = v0 | v1 << 6 | v2 << 12 | v3 << 18, little-endian).
#include "contracts/presets/builders.hpp"
#include "contracts/presets/preset_table.hpp"

namespace qexact::presets {
namespace {

Contract quark_mx(ElemFormat e, bool exported) {
  Contract c = mx_base(e);
  c.scale_rule = ScaleRule::even;
  c.rounding = Rounding::rne;
  c.overflow = Overflow::saturate;
  c.nonfinite = NonFiniteRule::quark;
  c.byte0 = exported ? Byte0Rule::written_one : Byte0Rule::quantize;
  c.signed_zero = exported ? SignedZero::drop : SignedZero::keep;
  c.layout = ScaleLayout::rowmajor;
  c.tail = TailRule::reject;  // group_size 32 must divide the last dimension
  return c;
}

}  // namespace

std::vector<PresetDef> quark_presets() {
  return {
      {"mx.quark.e2m1",
       "AMD Quark 0.13 OCP_MXFP4Spec (scale mode even), as export_safetensors writes a weight: scale 2^(floor(log2 "
       "of amax rounded at 1 mantissa bit) - 2), clamped to 2^-127, written clamped to 2^-126 (0x01); E2M1(x / scale) "
       "RNE, every zero +0, element 2k in the low nibble",
       "peer", [](Contract& c) { c = quark_mx(ElemFormat::e2m1, true); }},
      {"mx.quark.e2m3",
       "AMD Quark 0.13 OCP_MXFP6E2M3Spec exported, as mx.quark.e2m1 with E2M3 codes (one per byte; Quark packs four in "
       "three bytes)",
       "peer", [](Contract& c) { c = quark_mx(ElemFormat::e2m3, true); }},
      {"mx.quark.e3m2",
       "AMD Quark 0.13 OCP_MXFP6E3M2Spec exported, as mx.quark.e2m1 with E3M2 codes (one per byte)",
       "peer", [](Contract& c) { c = quark_mx(ElemFormat::e3m2, true); }},
      {"mx.quark.e4m3",
       "AMD Quark 0.13 OCP_MXFP8E4M3Spec fake quant (no CPU export): the even scale, E4M3(clamp(x / scale)) RNE, -0 "
       "kept; qexact's fake-quant of these bytes is Quark's fake_quantize output",
       "peer", [](Contract& c) { c = quark_mx(ElemFormat::e4m3, false); }},
      {"mx.quark.e5m2",
       "AMD Quark 0.13 OCP_MXFP8E5M2Spec fake quant, as mx.quark.e4m3 with E5M2",
       "peer", [](Contract& c) { c = quark_mx(ElemFormat::e5m2, false); }},
  };
}

}  // namespace qexact::presets
