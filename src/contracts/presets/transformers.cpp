// Hugging Face transformers 5.24.0's own quantizers, the ones it runs when it quantizes a bf16
// model on load and whose layouts it reads back (quant_method "fp8": FineGrainedFP8Config).
// Measured in the peer suite (python/peer_tests/test_transformers_fp8.py) by calling the op
// transformers' loader calls (integrations/finegrained_fp8.py Fp8Quantize) on CPU; its loader
// refuses to run it without a GPU, the op itself is plain torch.
#include "contracts/presets/builders.hpp"
#include "contracts/presets/preset_table.hpp"

namespace qexact::presets {

std::vector<PresetDef> transformers_presets() {
  return {
      {"fp8.hf.block",
       "transformers 5.24.0 FineGrainedFP8 (quant_method fp8, weight_block_size [128, 128]), DeepSeek-V3's checkpoint "
       "layout: per 128x128 tile of the fp32 weight a multiplier 448 * fp32(1 / amax) (torch's 448.0 / tensor), 1 for a "
       "tile whose amax is not > 0 (all zero, or NaN); E4M3(clamp(x * multiplier, +/-448)); weight_scale_inv holds "
       "fp32(1 / multiplier), which dequantize multiplies; ragged edge tiles as whole ones",
       "peer",
       [](Contract& c) {
         c = fp8_base({Granularity::tile, 128, 128});
         c.scale_kind = ScaleKind::multiplier;
         c.scale_arith = ScaleArith::reciprocal_multiplier;
         c.fp8_quotient = Fp8Quotient::multiply;
         c.stored = StoredScale::inverse;
         c.zero_group = ZeroGroup::one_unless_positive;
         c.nonfinite_input = NonFiniteInput::propagate;
       }},
  };
}

}  // namespace qexact::presets
