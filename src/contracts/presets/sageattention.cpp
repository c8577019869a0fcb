// SageAttention's int8 quantizers (CUDA and Triton), read from their source.
#include "contracts/presets/builders.hpp"
#include "contracts/presets/preset_table.hpp"

namespace qexact::presets {

std::vector<PresetDef> sageattention_presets() {
  return {
      {"int8.block.sage.cuda", "SageAttention CUDA QuantInt8Kernel: max(amax, 1e-7)/127, x * (127/amax'), RNE, [-128, 127]", "source",
       [](Contract& c) {
         c = family_base(Family::int8_block);
         c.token_block = 64;
         c.scale_mode = ScaleMode::before;
         c.scale_min = 1e-7f;
         c.quotient = Quotient::reciprocal;
         c.int_rounding = IntRounding::rne;
         c.range = 128;
       }},
      {"int8.block.sage.triton", "SageAttention Triton quant_per_block: amax/127, x/scale + 0.5*sign truncated", "source",
       [](Contract& c) {
         c = family_base(Family::int8_block);
         c.token_block = 64;
         c.scale_mode = ScaleMode::before;
         c.quotient = Quotient::divide;
         c.int_rounding = IntRounding::half_away_fp32;
         c.range = 128;
       }},
  };
}

}  // namespace qexact::presets
