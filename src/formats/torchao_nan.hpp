// The element code torchao 0.18 gives a NaN (fp32 bits `bits`) when it converts to an MX element.
// E4M3 and E5M2 go through torch's cast: the NaN code 0x7F with the NaN's sign. E2M3, E3M2 and
// E2M1 hold no NaN; torchao's bit-twiddling conversion (custom_fp_utils
// _f32_to_floatx_unpacked) sends a NaN down its normal-number branch, so the code is that
// branch's arithmetic on the NaN's bits: canonical +NaN gives 0x0C (E2M3), 0x0E (E3M2), 0x3 (E2M1).
#pragma once
#include <cstdint>

#include "qexact/formats/element.hpp"

namespace qexact {

inline std::uint8_t torchao_nan_code(ElemFormat e, std::uint32_t bits) {
  const ElemTraits& t = elem_traits(e);
  const std::uint32_t sign = bits >> 31;
  if (t.has_nan) return static_cast<std::uint8_t>((sign << 7) | 0x7Fu);
  const std::uint32_t mag = bits & 0x7FFFFFFFu;
  const int drop = 23 - t.mbits;
  // normal_x = mag + ((bias - 127) << 23) + (2^(drop-1) - 1) + mant_odd, >> drop, to uint8.
  const std::uint32_t odd = (mag >> drop) & 1u;
  const std::uint32_t v = mag - (static_cast<std::uint32_t>(127 - t.bias) << 23) + ((1u << (drop - 1)) - 1u) + odd;
  return static_cast<std::uint8_t>(((v >> drop) & 0xFFu) | (sign << (t.bits - 1)));
}

// The NaN x86 produces for inf / inf and 0 * inf (the "real indefinite"): negative, quiet.
constexpr std::uint32_t kX86DefaultNaN = 0xFFC00000u;

}  // namespace qexact
