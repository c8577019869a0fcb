// The OCP Microscaling v1.0 specification and Microsoft's reference code for it
// (microxcaling), read from the spec and the source.
#include "contracts/presets/builders.hpp"
#include "contracts/presets/preset_table.hpp"

namespace qexact::presets {

std::vector<PresetDef> ocp_presets() {
  return {
      {"mx.ocp", "OCP MX v1.0 with E4M3 elements: floor scale, RNE saturating, NaN group on non-finite", "source",
       [](Contract& c) { c = mx_base(ElemFormat::e4m3); ocp_mx(c); }},
      {"mx.ocp.e4m3", "OCP MX v1.0, MXFP8 E4M3", "source", [](Contract& c) { c = mx_base(ElemFormat::e4m3); ocp_mx(c); }},
      {"mx.ocp.e5m2", "OCP MX v1.0, MXFP8 E5M2", "source", [](Contract& c) { c = mx_base(ElemFormat::e5m2); ocp_mx(c); }},
      {"mx.ocp.e2m3", "OCP MX v1.0, MXFP6 E2M3 (one code per byte)", "source",
       [](Contract& c) { c = mx_base(ElemFormat::e2m3); ocp_mx(c); }},
      {"mx.ocp.e3m2", "OCP MX v1.0, MXFP6 E3M2 (one code per byte)", "source",
       [](Contract& c) { c = mx_base(ElemFormat::e3m2); ocp_mx(c); }},
      {"mx.ocp.e2m1", "OCP MX v1.0, MXFP4 E2M1 (two codes per byte, element 2k low nibble)", "source",
       [](Contract& c) { c = mx_base(ElemFormat::e2m1); ocp_mx(c); }},
      {"mx.microxcaling", "microsoft/microxcaling _quantize_mx (PyTorch path): floor(log2f(amax)) in fp32, sign(x) * floor(|v| + 0.5) in fp32", "source",
       [](Contract& c) {
         c = mx_base(ElemFormat::e4m3);
         ocp_mx(c);
         c.log2_fp32 = true;
         c.rounding = Rounding::half_away_fp32;
         c.signed_zero = SignedZero::underflow;  // sign(x) * floor(|v| + 0.5): torch.sign(-0.0) is +0
       }},
  };
}

}  // namespace qexact::presets
