// int8 per group along the last axis (ggml q8_0; preset q8_0.ggml): groups of c.group
// consecutive elements of a row, the last dimension a multiple of the group (payload_shape
// rejects anything else), one scale per group.
#include <string>
#include <vector>

#include "reference/int8_ref.hpp"
#include "reference/int8_steps.hpp"

namespace qexact::ref {

QuantResult quantize_int8_group(const Contract& c, const TensorView& x) {
  int8::check_contract(c, Family::int8_group);
  const Shape ps = payload_shape(c, x.shape);
  const Shape ss = scale_shape(c, x.shape);
  const std::int64_t cols = x.shape.back();
  const std::vector<float> values = to_f32_vector(x);
  int8::reject_nonfinite(values, "int8.group", [&](std::int64_t i) {
    return "(row " + std::to_string(i / cols) + ", column " + std::to_string(i % cols) + ")";
  });

  QuantResult r{int8::new_payload(ps), int8::new_scale(c, ss), "groupwise", {}};
  std::int8_t* payload = r.payload.data<std::int8_t>();
  const std::int64_t groups = shape_numel(ss);
  for (std::int64_t g = 0; g < groups; ++g) {
    const auto first = static_cast<std::size_t>(g * c.group);
    const auto end = first + static_cast<std::size_t>(c.group);
    float amax = 0.0f;
    for (std::size_t i = first; i < end; ++i) amax = int8::fold_abs_max(amax, values[i]);
    const int8::QuotientOp q = int8::scale_domain(c, amax, r.scale, g, x.dtype);
    for (std::size_t i = first; i < end; ++i) payload[i] = int8::quantize_element(c, q, values[i]);
  }
  return r;
}

}  // namespace qexact::ref
