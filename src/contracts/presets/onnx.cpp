// ONNX QuantizeLinear to FP8 (opset 21+: output_dtype float8e4m3fn / float8e5m2, saturate),
// measured on onnx 1.22.0's ReferenceEvaluator and onnxruntime 1.31.1 (CPU) in the peer suite
// (python/peer_tests/test_onnx_fp8.py). QuantizeLinear takes its scale as an input: the operator
// itself is `quantize_with_scales` (CLI --scale, Python scale=) under these contracts, whose
// element step is the operator's: y = cast(x / scale), a real fp32 division, RNE; saturate=1
// (overflow=saturate) sends +-inf and anything past max to +-max, saturate=0 (overflow=nan for
// E4M3FN, overflow=inf for E5M2) sends what rounds past max to NaN / inf; NaN keeps its sign;
// -0.0 and negative values that round to zero keep theirs. The scale these contracts compute
// when none is given is qexact's choice (ONNX has none): the descale fp32(amax / max), 1 for an
// all-zero domain as onnxruntime.quantization's compute_scale_zp gives one.
#include "contracts/presets/builders.hpp"
#include "contracts/presets/preset_table.hpp"

namespace qexact::presets {
namespace {

Contract onnx_fp8(ScaleGrain g) {
  Contract c = fp8_base(g);
  c.scale_kind = ScaleKind::descale;
  c.fp8_quotient = Fp8Quotient::divide;
  c.zero_group = ZeroGroup::one;
  c.nonfinite_input = NonFiniteInput::propagate;
  return c;
}

}  // namespace

std::vector<PresetDef> onnx_presets() {
  return {
      {"fp8.onnx.tensor",
       "ONNX QuantizeLinear to float8e4m3fn with a scalar scale (saturate=1; overflow=nan is saturate=0, element=e5m2 "
       "with overflow=inf its E5M2): y = E4M3(x / scale), RNE, NaN keeps its sign; with --scale the given scale, else "
       "fp32(amax / 448) (1 for an all-zero tensor)",
       "peer", [](Contract& c) { c = onnx_fp8({Granularity::tensor, 1, 1}); }},
      {"fp8.onnx.axis",
       "ONNX QuantizeLinear per axis: axis 0 of a 2-D [M, K] tensor (one scale per row; for rank > 2, one per row "
       "of the last axis), as fp8.onnx.tensor",
       "peer", [](Contract& c) { c = onnx_fp8({Granularity::row, 1, 1}); }},
      {"fp8.onnx.block",
       "ONNX QuantizeLinear blocked (opset 21 block_size) along the last axis: blocks of 128 (granularity=group:N "
       "for another block_size), a ragged last block allowed, as fp8.onnx.tensor",
       "peer", [](Contract& c) { c = onnx_fp8({Granularity::group, 1, 128}); }},
  };
}

}  // namespace qexact::presets
