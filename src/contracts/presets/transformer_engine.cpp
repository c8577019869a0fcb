// NVIDIA TransformerEngine's quantizers, modelled from reading its CUDA source (no GPU here to
// run them): every preset here is marked "source".
#include "contracts/presets/builders.hpp"
#include "contracts/presets/preset_table.hpp"

namespace qexact::presets {
namespace {

// NVFP4 with TE's tensor scale (S_enc = 2688 / amax, the amax stored); its NaN path is not modelled.
Contract te_nvfp4() {
  Contract c = family_base(Family::nvfp4);
  c.tensor_scale = TensorScale::te;
  c.nonfinite_input = NonFiniteInput::reject;
  return c;
}

}  // namespace

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
       [](Contract& c) { c = te_nvfp4(); }},
      // The NVFP4 recipe's weights (custom_recipes/quantization_ref_nvfp4.py, quant_tile_shape
      // (16, 16)): one block scale per 16x16 tile, kept in each of its rows' slots, so that the
      // transposed copy shares it.
      {"nvfp4.te.2d",
       "TransformerEngine NVFP4 16x16 weight tiles (source-read): as nvfp4.te with each block scale from its 16x16 "
       "tile's amax, stored in each of the tile's 16 rows",
       "source",
       [](Contract& c) {
         c = te_nvfp4();
         c.block_rows = 16;
       }},
      // nvfp4_use_4over6=True (FourOverSix), its default error MAE, nvfp4_e4m3_max 256.
      {"nvfp4.te.4over6",
       "TransformerEngine NVFP4 4over6 (source-read, its reference quantizer): S_enc = 1536 / tensor amax, each block "
       "quantized under e4m3((amax / 6) * S_enc * 1.5) and e4m3((amax / 6) * S_enc), the one of smaller summed |error| "
       "kept (a tie keeps 6)",
       "source",
       [](Contract& c) {
         c = te_nvfp4();
         c.four_over_six = FourOverSix::mae;
         c.global_e4m3_max = 256;
       }},
  };
}

}  // namespace qexact::presets
