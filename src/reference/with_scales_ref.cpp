// The reference's "quantize with these scales" (with_scales_ref.hpp): the contract's element steps
// applied with scales given from outside, to tell a device's scale errors from its payload
// errors. MX, nvfp4 and fp8.scaled live in mx_ref.cpp, nvfp4_ref.cpp and fp8_scaled_ref.cpp beside
// the steps they reuse; the int8 families are here. Which one a contract takes is its row of
// kernels/family_kernels.
#include <string>
#include <vector>

#include "contracts/family_table.hpp"
#include "kernels/family_kernels.hpp"
#include "reference/int8_ref.hpp"
#include "reference/int8_steps.hpp"
#include "reference/with_scales_ref.hpp"

namespace qexact::ref {

QuantResult quantize_int8_with_scales(const Contract& c, const TensorView& x, const TensorView& scale) {
  validate(c);
  const Shape ps = payload_shape(c, x.shape);
  const Shape ss = scale_shape(c, x.shape);
  const DType sd = scale_dtype(scale_encoding(c));
  if (scale.dtype != sd || scale.shape != ss)
    fail(ErrorKind::bad_argument, std::string("the given int8 scales must be ") + dtype_name(sd) +
                                      " of shape " + shape_str(ss) + ", got " + dtype_name(scale.dtype) + " " +
                                      shape_str(scale.shape));
  const std::vector<float> values = to_f32_vector(x);
  int8::reject_nonfinite(values, family_name(c.family),
                         [](std::int64_t i) { return "flat index " + std::to_string(i); });
  const std::vector<float> given = to_f32_vector(scale);

  std::vector<float> amax(given.size(), 0.0f);
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(values.size()); ++i) {
    const auto d = static_cast<std::size_t>(int8::scale_index_of(c, x.shape, i));
    amax[d] = int8::fold_abs_max(amax[d], values[static_cast<std::size_t>(i)]);
  }
  std::vector<int8::QuotientOp> ops(given.size());
  for (std::size_t d = 0; d < given.size(); ++d) ops[d] = int8::quotient_for_given(c, amax[d], given[d], x.dtype);

  QuantResult r{int8::new_payload(ps), contiguous_copy(scale), "groupwise", {}};
  std::int8_t* payload = r.payload.data<std::int8_t>();
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(values.size()); ++i) {
    const auto d = static_cast<std::size_t>(int8::scale_index_of(c, x.shape, i));
    payload[i] = int8::quantize_element(c, ops[d], values[static_cast<std::size_t>(i)]);
  }
  return r;
}

QuantResult quantize_with_scales(const Contract& c, const TensorView& x, const TensorView& scale) {
  if (!family_traits(c.family).quantizes)
    fail(ErrorKind::bad_argument, std::string("the ") + family_name(c.family) +
                                      " family has no scale tensor to quantize with");
  return family_kernels(c, "quantize").ref_quantize_with_scales(c, x, scale);
}

}  // namespace qexact::ref
