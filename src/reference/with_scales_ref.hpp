// The reference's "quantize with these scales", for every family that has one, to tell a
// device's scale errors from its payload errors; the rules every reference follows are in
// reference/README.md.
#pragma once
#include "qexact/contract.hpp"
#include "qexact/quantize.hpp"
#include "qexact/tensor.hpp"

namespace qexact::ref {

// The contract's element steps with scales given from outside (a device's), in the contract's
// scale shape, layout and dtype, for the MX, int8, nvfp4 and fp8.scaled families: each group's
// payload is what the contract makes of its elements with that scale. MX: the given byte replaces
// the computed one (the non-finite rules, which read the input, still decide those groups). int8:
// a domain whose given scale equals the contract's own uses the contract's quotient; another one
// is divided by it (quotient=divide) or multiplied by fp32(1 / it) (the multiplying quotients).
// nvfp4: the given E4M3 codes replace the computed ones; the tensor scale is the computed one.
// fp8.scaled: as int8, a given scale equal to the contract's own uses the contract's own; another
// is read back from its stored form (stored=inverse: fp32(1 / it)) and used by the contract's
// quotient; a given 0 under zero_group=zero is a zero domain (payload 0).
// The result's scale is the given one.
QuantResult quantize_with_scales(const Contract& c, const TensorView& x, const TensorView& scale);

}  // namespace qexact::ref
