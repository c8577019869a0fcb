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
  };
}

}  // namespace qexact::presets
