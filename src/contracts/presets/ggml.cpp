// ggml / llama.cpp quantization types, compared byte for byte with gguf-py 0.19.0's gguf.quants
// (a numpy port of ggml-quants.c's reference routines) in the peer suite.
#include "contracts/presets/builders.hpp"
#include "contracts/presets/preset_table.hpp"

namespace qexact::presets {

std::vector<PresetDef> ggml_presets() {
  return {
      {"q8_0.ggml", "ggml Q8_0 reference (quantize_row_q8_0_ref, = gguf-py 0.19.0 gguf.quants): blocks of 32, d = amax/127 stored fp16, roundf(x * (1/d))", "peer",
       [](Contract& c) {
         c = family_base(Family::int8_group);
         c.group = 32;
         c.scale_mode = ScaleMode::before;
         c.quotient = Quotient::inv_scale;
         c.int_rounding = IntRounding::half_away;
         c.range = 127;
         c.scale_store = ScaleStore::f16;
       }},
      {"mxfp4.ggml",
       "ggml MXFP4 (quantize_row_mxfp4_ref as gguf-py 0.19.0 gguf.quants runs it): blocks of 32, byte "
       "uint8(floor(fp32 log2(amax)) - 2 + 127) wrapping below 2^-125, each element the nearest of the E2M1 values "
       "times the scale (ties toward zero, every zero +0, a product that overflows never chosen); a NaN or inf "
       "block has byte 0 and codes 0 for NaN and inf; byte j of a block's 16 holds elements j and j + 16",
       "peer",
       [](Contract& c) {
         c = mx_base(ElemFormat::e2m1);
         c.scale_rule = ScaleRule::floor;
         c.log2_fp32 = true;
         c.scale_wrap = true;
         c.byte0 = Byte0Rule::quantize;
         c.rounding = Rounding::ties_zero;
         c.signed_zero = SignedZero::drop;
         c.finite_products = true;
         c.nonfinite = NonFiniteRule::ggml;
         c.packing = Packing::halves;
         c.layout = ScaleLayout::rowmajor;
         c.tail = TailRule::reject;  // ggml rows are whole blocks
       }},
  };
}

}  // namespace qexact::presets
