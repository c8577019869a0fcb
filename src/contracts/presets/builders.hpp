// Recipes that several stacks' presets start from (a family's defaults, OCP's MX rules, a
// seed-style FP8 descale): each preset file composes these with its own parameters.
#pragma once
#include "qexact/contract.hpp"

namespace qexact::presets {

// A contract of the family with every other parameter at its default.
Contract family_base(Family f);
// An MX contract with element e.
Contract mx_base(ElemFormat e);
// OCP MX v1.0: floor scale, RNE saturating elements, a NaN group on non-finite input, byte 0
// quantizes against 2^-127, row-major scales, partial tail groups.
void ocp_mx(Contract& c);
// An fp8.scaled contract (E4M3) of granularity g.
Contract fp8_base(ScaleGrain g);
// The seed's Ascend FP8: descale = fp32(amax / 448) stored, x / stored descale, zero -> 0,
// finite inputs only.
void fp8_descale(Contract& c);
// Source-read FP8 stacks that divide by a stored fp32 descale with an amax floor (vLLM,
// DeepSeek-V3), finite inputs only (their NaN handling is not modelled).
void fp8_descale_floor(Contract& c, double amax_floor);
// The stacks' NVFP4 on torch (ModelOpt, compressed-tensors): x / fp32(the block's whole
// descale), a zero code's sign iff the quotient is < 0, finite inputs only (their NaN rules are
// measured, not modelled). Each preset adds its tensor and block scale steps.
Contract nvfp4_torch_divide();
// The stacks' int8 on torch (compressed-tensors, ModelOpt): scale = D(amax / qmax), q =
// clamp(RNE(D(x / scale)), -128, 127), D the input's dtype (scale_arith=input,
// quotient_arith=input, range 128); an all-zero domain follows `zero`. Finite inputs only.
Contract int8_torch(Family f, float qmax, ZeroGroup zero);

}  // namespace qexact::presets
