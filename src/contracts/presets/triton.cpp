// triton-lang/triton's triton_kernels (python/triton_kernels/triton_kernels/numerics_details/
// mxfp.py), read from its source: downcast_to_mxfp, the MX quantizer that transformers' gpt-oss
// integration calls (integrations/mxfp4.py quantize_to_mxfp4) when it quantizes a bf16 gpt-oss
// to MXFP4, and whose torch twin downcast_to_mxfp_torch states its steps. It needs a GPU and a
// package that PyPI does not serve, so nothing here runs it: `source`.
//
// ROUND_UP (the default): the fp32 ratio amax / 6 rounded up to a power of two on its bits,
// (bits + 0x7FFFFF) & 0x7F800000 -- a subnormal ratio becomes 2^-126, a NaN amax wraps to 0, inf
// stays inf; the byte is those bits >> 23. Elements are x * (scale == 0 ? 0 : 1 / scale), then
// E2M1 by bit manipulation, round to nearest even, saturating at 6 (so NaN and inf give the
// largest code of their sign); element 2k in the low nibble.
#include "contracts/presets/builders.hpp"
#include "contracts/presets/preset_table.hpp"

namespace qexact::presets {

std::vector<PresetDef> triton_presets() {
  return {
      {"mxfp4.triton",
       "triton_kernels downcast_to_mxfp(x, uint8, ROUND_UP) (transformers' gpt-oss MXFP4 quantizer): byte = fp32 amax / 6 "
       "rounded up to a power of two on its bits (a subnormal ratio gives byte 1), x * 2^(127 - byte) to E2M1 RNE "
       "saturating; a NaN group is byte 0 and an inf group byte 255, each element x * 0 (NaN and inf elements the "
       "largest code of the NaN's sign)",
       "source",
       [](Contract& c) {
         c = mx_base(ElemFormat::e2m1);
         c.scale_rule = ScaleRule::rceil_bits;
         c.ratio = RatioOp::divide;
         c.rounding = Rounding::rne;
         c.overflow = Overflow::saturate;
         c.nonfinite = NonFiniteRule::triton;
         c.byte0 = Byte0Rule::quantize;  // reached by all-zero groups only: their codes are signed zeros
         c.signed_zero = SignedZero::keep;
         c.layout = ScaleLayout::rowmajor;
         c.tail = TailRule::reject;  // the kernel asserts whole blocks along the quantized axis
       }},
  };
}

}  // namespace qexact::presets
