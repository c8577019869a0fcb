// vLLM's dynamic quantization custom ops, read from their source.
#include "contracts/presets/builders.hpp"
#include "contracts/presets/preset_table.hpp"

namespace qexact::presets {

std::vector<PresetDef> vllm_presets() {
  return {
      {"int8.token.vllm", "vLLM dynamic per-token int8: absmax/127, x * (127/absmax), RNE, [-128, 127]", "source",
       [](Contract& c) {
         c = family_base(Family::int8_token);
         c.scale_mode = ScaleMode::before;
         c.quotient = Quotient::reciprocal;
         c.int_rounding = IntRounding::rne;
         c.range = 128;
       }},
      {"fp8.vllm.token",
       "vLLM dynamic_per_token_scaled_fp8_quant (source-read, [unverified]): descale = max(amax / 448, 1 / (448 * 512)) "
       "per row, x / descale clamped to +/-448, E4M3 RNE",
       "source",
       [](Contract& c) {
         c = fp8_base({Granularity::row, 1, 1});
         // max(fp32(amax / 448), fp32(1 / (448 * 512))) == fp32(max(amax, 1 / 512) / 448): the fp32
         // division is monotone and 1 / 512 is exact.
         fp8_descale_floor(c, 1.0 / 512.0);
       }},
      {"fp8.vllm.group",
       "vLLM per_token_group_quant_fp8, group 128 (CUDA op and Triton fallback, source-read, [unverified]): descale = "
       "max(amax, 1e-10) / 448 per 1x128 group, x / descale clamped to +/-448, E4M3 RNE (Triton's '/' may round "
       "differently)",
       "source",
       [](Contract& c) {
         c = fp8_base({Granularity::group, 1, 128});
         fp8_descale_floor(c, 1e-10);
       }},
      {"fp8.vllm.group.ue8m0",
       "vLLM per_token_group_quant_fp8(use_ue8m0=True), CUDA op (source-read, [unverified]): descale = the power of two "
       "at or above max(max(amax, 1e-10) / 448, 1e-10) (the register path's exponent bump), x / descale",
       "source",
       [](Contract& c) {
         c = fp8_base({Granularity::group, 1, 128});
         // up(max(s, 1e-10)) == max(up(s), 2^-33) since up(1e-10) = 2^-33, and == up(fp32(max(amax, F) / 448))
         // for any F with fp32(F / 448) in (2^-34, 2^-33]: 4.48e-8 (docs/decisions.md).
         fp8_descale_floor(c, 4.48e-8);
         c.scale_pow2 = ScalePow2::up;
       }},
      {"fp8.vllm.group.ue8m0.triton",
       "vLLM per_token_group_quant_fp8(use_ue8m0=True), Triton fallback (source-read, [unverified]): descale = "
       "2^ceil(log2(max(amax, 1e-10) / 448)), no floor on the scale, x / descale",
       "source",
       [](Contract& c) {
         c = fp8_base({Granularity::group, 1, 128});
         fp8_descale_floor(c, 1e-10);
         c.scale_pow2 = ScalePow2::up;
       }},
  };
}

}  // namespace qexact::presets
