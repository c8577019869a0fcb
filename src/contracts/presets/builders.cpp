#include "contracts/presets/builders.hpp"

namespace qexact::presets {

Contract family_base(Family f) {
  Contract c;
  c.family = f;
  return c;
}

Contract mx_base(ElemFormat e) {
  Contract c = family_base(Family::mx);
  c.element = e;
  return c;
}

void ocp_mx(Contract& c) {
  c.scale_rule = ScaleRule::floor;
  c.rounding = Rounding::rne;
  c.overflow = Overflow::saturate;
  c.nonfinite = NonFiniteRule::nan;
  c.byte0 = Byte0Rule::quantize;
  c.layout = ScaleLayout::rowmajor;
  c.tail = TailRule::partial;
}

Contract fp8_base(ScaleGrain g) {
  Contract c = family_base(Family::fp8_scaled);
  c.element = ElemFormat::e4m3;
  c.granularity = g;
  return c;
}

void fp8_descale(Contract& c) {
  c.scale_kind = ScaleKind::descale;
  c.scale_arith = ScaleArith::fp32;
  c.fp8_quotient = Fp8Quotient::divide;
  c.zero_group = ZeroGroup::zero;
  c.nonfinite_input = NonFiniteInput::reject;
}

void fp8_descale_floor(Contract& c, double amax_floor) {
  fp8_descale(c);
  c.amax_floor = amax_floor;
  c.zero_group = ZeroGroup::floor;
}

Contract nvfp4_torch_divide() {
  Contract c = family_base(Family::nvfp4);
  c.nvfp4_quotient = Nvfp4Quotient::divide;
  c.signed_zero = SignedZero::underflow;
  c.nonfinite_input = NonFiniteInput::reject;
  return c;
}

Contract int8_torch(Family f, float qmax, ZeroGroup zero) {
  Contract c = family_base(f);
  c.qmax = qmax;
  c.range = 128;
  c.scale_arith = ScaleArith::input;
  c.quotient_arith = QuotientArith::input;
  c.zero_group = zero;
  return c;
}

}  // namespace qexact::presets
