// What torch's arithmetic on a bf16 / f16 tensor does to an fp32 result, as one place for the
// engines and the lab: the fp32 value rounded once more, to nearest even, to the tensor's dtype
// (overflow to inf, NaN kept as the formats' conversions keep it), and torch.finfo(dtype).eps.
// Facts of the float formats (bf16.hpp, fp16.hpp), shared as the element tables are; each
// engine still applies them in its own steps.
#pragma once
#include "qexact/formats/bf16.hpp"
#include "qexact/formats/fp16.hpp"
#include "qexact/tensor.hpp"

namespace qexact {

// v rounded (RNE) to dtype d: bf16 or f16; v itself for f32.
inline float round_to_dtype(DType d, float v) {
  return d == DType::bf16 ? round_bf16(v) : d == DType::f16 ? round_f16(v) : v;
}

// torch.finfo(d).eps: 2^-7 (bf16), 2^-10 (f16), 2^-23 (f32).
inline float dtype_eps(DType d) { return d == DType::bf16 ? 0x1p-7f : d == DType::f16 ? 0x1p-10f : 0x1p-23f; }

}  // namespace qexact
