// DeepSeek's FP8 kernels: DeepSeek-V3 inference/kernel.py and DeepGEMM's deep_gemm/utils/math.py, read from their source.
#include "contracts/presets/builders.hpp"
#include "contracts/presets/preset_table.hpp"

namespace qexact::presets {

std::vector<PresetDef> deepseek_presets() {
  return {
      {"fp8.deepseek.1x128",
       "DeepSeek-V3 inference/kernel.py act_quant (source-read, [unverified]): per 1x128 group, descale = "
       "max(amax, 1e-4) / 448, x / descale cast to E4M3 (Triton's fp32 division may round differently)",
       "source",
       [](Contract& c) {
         c = fp8_base({Granularity::group, 1, 128});
         fp8_descale_floor(c, 1e-4);
       }},
      {"fp8.deepseek.128x128",
       "DeepSeek-V3 128x128 weight blocks (kernel.py weight_quant, source-read, [unverified]): as fp8.deepseek.1x128 "
       "per 128x128 tile of the [R, C] view",
       "source",
       [](Contract& c) {
         c = fp8_base({Granularity::tile, 128, 128});
         fp8_descale_floor(c, 1e-4);
       }},
      {"fp8.deepgemm.1x128.ue8m0",
       "DeepGEMM deep_gemm/utils/math.py per_token_cast_to_fp8(x, use_ue8m0=True) (source-read, [unverified]): per 1x128 "
       "group, sf = ceil_to_ue8m0(max(amax, 1e-4) / 448) (the power of two at or above it, on the bits), "
       "x * (1 / sf) cast to E4M3; sf stored as fp32",
       "source",
       [](Contract& c) {
         c = fp8_base({Granularity::group, 1, 128});
         fp8_descale_floor(c, 1e-4);
         c.scale_pow2 = ScalePow2::up;
         c.fp8_quotient = Fp8Quotient::reciprocal;  // exact: 1 / sf is a power of two
       }},
  };
}

}  // namespace qexact::presets
