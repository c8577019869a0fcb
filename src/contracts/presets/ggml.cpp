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
  };
}

}  // namespace qexact::presets
