// The steps of the int8 contracts (contracts §3, §4; docs/presets.md int8 presets), shared by the
// three int8 reference quantizers, which differ only in which elements share a scale
// (a (b, head, token block), a row, a group). In contract order, all in fp32:
//   1. amax     = max |x| over the scale's domain
//   2. s        = max(amax, scale_min) / qmax  (before)  or  max(amax / qmax, scale_min)  (after),
//                 qmax 127 or 127.5; with scale_arith=input rounded (RNE) to the input's dtype;
//                 a 0 becomes the eps of that arithmetic under zero_group=eps
//   3. stored   = s as fp32, or f32_to_f16(s) (scale_store)
//   4. quotient = x / stored | x * fp32(qmax / max(amax, scale_min)) | x * fp32(1 / s); a zero
//                 divisor gives payload 0 for the whole domain, except under zero_group=nan,
//                 where x / 0 is IEEE's (+-inf, 0 / 0 NaN); with quotient_arith=input x / stored
//                 is rounded (RNE) to the input's dtype
//   5. q        = int8_encode(quotient, int_rounding, range)  (formats/int8.hpp; NaN -> 0)
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "qexact/contract.hpp"
#include "qexact/tensor.hpp"

namespace qexact::ref::int8 {

// Step 1, one element at a time: max is exact and independent of order, so any split of a
// domain into chunks reduces to the same bits.
float fold_abs_max(float amax, float x);

// Steps 2 to 4 need the scale spec alone, step 5 the element spec alone.

// Step 2; `input` is the input's dtype (scale_arith=input).
float scale_from_amax(const ScaleSpec& c, float amax, DType input);

// Step 3: the value the scale tensor holds, as fp32.
float stored_scale(const ScaleSpec& c, float s);

// Step 4: what every element of one domain is divided by or multiplied with.
struct QuotientOp {
  enum class Op { zero_payload, divide, multiply };
  Op op = Op::zero_payload;
  float operand = 0.0f;
  DType round_to = DType::f32;  // the quotient's rounding before the element's (quotient_arith)
};
QuotientOp quotient_for(const ScaleSpec& c, float amax, float s, DType input);
// Step 4 with a scale `given` from outside (a device's stored scale): the contract's own
// quotient when it equals the contract's stored scale, else x / given (quotient=divide) or
// x * fp32(1 / given); a zero or non-finite given scale gives payload 0.
QuotientOp quotient_for_given(const ScaleSpec& c, float amax, float given, DType input);

// Step 4 for one element: the quotient the element's rounding takes (0 for zero_payload).
float quotient_value(const QuotientOp& q, float x);

// Step 5.
std::int8_t quantize_element(const ElementSpec& c, const QuotientOp& q, float x);

// Steps 2-4 for one domain of amax `amax`: writes the stored scale at flat `index` of `scale`
// and returns the domain's quotient.
QuotientOp scale_domain(const ScaleSpec& c, float amax, Tensor& scale, std::int64_t index, DType input);

// Entry checks: the contract is valid and of `family`; every value is finite (else bad_input
// naming the first offending C-order index as `where(flat)` spells it).
void check_contract(const Contract& c, Family family);
void reject_nonfinite(const std::vector<float>& values, const std::string& what,
                      const std::function<std::string(std::int64_t)>& where);

// Element `flat` (C order) of a (B, S, N, D) tensor of shape `bsnd`, as "(b B, s S, n N, d D)":
// how the int8 errors name an offending element.
std::string bsnd_index(const Shape& bsnd, std::int64_t flat);

// Flat index of the scale that element `flat` (C order in x_shape) is quantized with: the
// family's scale grain (contracts/family_table.hpp).
std::int64_t scale_index_of(const Contract& c, const Shape& x_shape, std::int64_t flat);

// Output tensors: i8 payload, f32 or f16 scale (scale_store).
Tensor new_payload(const Shape& shape);
Tensor new_scale(const Contract& c, const Shape& shape);

}  // namespace qexact::ref::int8
