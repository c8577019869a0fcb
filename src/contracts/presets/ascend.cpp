// Huawei Ascend, as the seeds measure its devices (docs/contracts.md §1-6, §9.1): every preset
// here is checked against the seeds' contracts and check values.
#include "contracts/presets/builders.hpp"
#include "contracts/presets/preset_table.hpp"

namespace qexact::presets {

std::vector<PresetDef> ascend_presets() {
  return {
      {"mxfp8.ascend", "Ascend MXFP8: bf16 in, E8M0 = clamp(expf(amax)-8, 0, 254), E4M3 RNE saturating, byte 0 flushes", "seed",
       [](Contract& c) {
         c = mx_base(ElemFormat::e4m3);
         c.scale_rule = ScaleRule::floor;
         c.nonfinite = NonFiniteRule::zero;
         c.byte0 = Byte0Rule::flush;
         c.prequant = Prequant::bf16;
         c.layout = ScaleLayout::pairs;
         c.tail = TailRule::partial;
       }},
      {"int8.block.ascend", "int8 per (b, head, 64 tokens): scale = amax/127 stored fp32, RNE(x / stored scale)", "seed",
       [](Contract& c) {
         c = family_base(Family::int8_block);
         c.token_block = 64;
         c.scale_mode = ScaleMode::before;
         c.quotient = Quotient::divide;
         c.int_rounding = IntRounding::rne;
         c.range = 127;
       }},
      {"int8.token.blaze", "per-token int8 over the complete row: ClampAfterDiv, caller's scale_min, RNE", "seed",
       [](Contract& c) {
         c = family_base(Family::int8_token);
         c.scale_mode = ScaleMode::after;
         c.scale_min = 0.0f;
         c.quotient = Quotient::divide;
         c.int_rounding = IntRounding::rne;
         c.range = 127;
       }},
      {"fp8.ascend.block", "Ascend FP8 (seed): per (b, head, 64 tokens) of (B, S, N, D), descale = fp32(amax / 448) stored, E4M3 RNE(x / stored descale)", "seed",
       [](Contract& c) {
         c = fp8_base({Granularity::head_block, 64, 1});
         fp8_descale(c);
       }},
      {"fp8.ascend.token", "Ascend FP8 (seed), one scale per row: descale = fp32(amax / 448) stored, E4M3 RNE(x / stored descale)", "seed",
       [](Contract& c) {
         c = fp8_base({Granularity::row, 1, 1});
         fp8_descale(c);
       }},
      {"hif4", "HiFloat4: 64-element blocks, E6M2 + two micro-exponent levels, S1P2 elements (fake-quant, pack)", "seed",
       [](Contract& c) { c = family_base(Family::hif4); }},
      {"pool.mean", "pooled block mean over the sequence axis of (B, S, F...): exact, each cell / its true length", "seed",
       [](Contract& c) {
         c = family_base(Family::pool);
         c.pool = 64;
         c.divisor = PoolDivisor::true_length;
         c.pool_out = DType::f32;
       }},
  };
}

}  // namespace qexact::presets
