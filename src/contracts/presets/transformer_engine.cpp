// NVIDIA TransformerEngine's quantizers, modelled from reading its CUDA source (no GPU here to
// run them): every preset here is marked "source".
#include "contracts/presets/builders.hpp"
#include "contracts/presets/preset_table.hpp"

namespace qexact::presets {

std::vector<PresetDef> transformer_engine_presets() {
  return {
      {"mxfp8.te", "TransformerEngine MXFP8: cvt.rp.satfinite.ue8m0 of amax * (1/448), cvt.rn.satfinite E4M3", "source",
       [](Contract& c) {
         c = mx_base(ElemFormat::e4m3);
         c.scale_rule = ScaleRule::rceil;
         c.ratio = RatioOp::reciprocal;
         c.nonfinite = NonFiniteRule::te;
         c.byte0 = Byte0Rule::unscaled;
         c.layout = ScaleLayout::padded;
         c.tail = TailRule::reject;
       }},
      {"fp8.te.current",
       "TransformerEngine Float8CurrentScaling (source-read, [unverified]): multiplier = fp32(448 / amax) (FLT_MAX if that "
       "overflows, 1 for amax 0), cvt of x * multiplier RNE saturating, scale.npy = scale_inv = fp32(1 / multiplier)",
       "source",
       [](Contract& c) {
         c = fp8_base({Granularity::tensor, 1, 1});
         c.scale_kind = ScaleKind::multiplier;
         c.scale_arith = ScaleArith::fp32_satfinite;  // compute_scale_from_amax's value_for_inf
         c.fp8_quotient = Fp8Quotient::multiply;
         c.stored = StoredScale::inverse;              // the tensor keeps scale_inv
         c.zero_group = ZeroGroup::one;  // amax == 0 (amax_epsilon 0 by default): scale 1
       }},
      {"nvfp4.te", "TransformerEngine NVFP4 1x16 (source-read): S_enc = 2688 / tensor amax, block scale e4m3(amax * (S_enc * fp32(1/6))) saturated, x * (1 / (s * (1 / S_enc))); tensor_scale.npy holds the amax", "source",
       [](Contract& c) {
         c = family_base(Family::nvfp4);
         c.tensor_scale = TensorScale::te;
         c.nonfinite_input = NonFiniteInput::reject;
       }},
  };
}

}  // namespace qexact::presets
