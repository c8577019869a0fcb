#include "compare_binding.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "array_bridge.hpp"
#include "conformance/compare.hpp"
#include "conformance/contract_output.hpp"
#include "conformance/scale_grid.hpp"
#include "contracts/family_table.hpp"
#include "qexact/contract.hpp"
#include "qexact/error.hpp"
#include "qexact/quantize.hpp"

namespace qexact::python {
namespace {

using Overrides = std::vector<std::string>;
using conformance::CompareReport;

// Quantized outputs are compared as stored: any dtype qexact knows is read, and compare names
// one that is not the contract's.
const std::vector<DType>& any_dtype() {
  static const std::vector<DType> all = {DType::u8, DType::i8, DType::f32, DType::f16,
                                         DType::bf16, DType::u16, DType::i32, DType::f64};
  return all;
}

Contract quantizing_contract(const std::string& preset, const Overrides& o) {
  Contract c = make_contract(preset, o);
  if (conformance::output_kind(c) != conformance::OutputKind::payload_scale)
    fail(ErrorKind::bad_argument, std::string(family_name(c.family)) +
                                      " has no quantize to compare: compare takes contracts with a payload and a scale");
  return c;
}

// A flat C-order index as a tuple over `shape`; None for -1 (no difference).
nb::object unravel(std::int64_t flat, const Shape& shape) {
  if (flat < 0) return nb::none();
  std::vector<std::int64_t> index(shape.size(), 0);
  for (std::size_t i = shape.size(); i-- > 0;) {
    if (shape[i] > 0) {
      index[i] = flat % shape[i];
      flat /= shape[i];
    }
  }
  nb::list out;
  for (std::int64_t v : index) out.append(v);
  return nb::tuple(out);
}

nb::dict report_dict(const CompareReport& r, const Contract& c, const Shape& x) {
  const conformance::ScaleGrid grid(c, x);
  nb::dict d;
  d["payload_bytes"] = r.payload_bytes_total;
  d["payload_bytes_differing"] = r.payload_bytes_differing;
  d["elements"] = r.elements_total;
  d["elements_differing"] = r.elements_differing;
  d["scales"] = r.groups_total;  // one scale per group
  d["scales_differing"] = r.scales_differing;
  d["scale_bytes"] = r.scale_bytes_total;
  d["scale_bytes_differing"] = r.scale_bytes_differing;
  d["scale_delta_unit"] = r.scale_delta_unit;
  d["max_scale_delta"] = r.max_scale_delta;
  nb::dict histogram;
  for (const auto& [delta, n] : r.scale_delta_histogram) histogram[nb::int_(delta)] = n;
  d["scale_delta_histogram"] = histogram;
  d["groups_differing"] = r.groups_differing;
  d["rows"] = r.rows_total;
  d["rows_differing"] = r.rows_differing;
  d["first_element_difference"] = unravel(r.first_payload_difference, x);
  d["first_scale_difference"] = unravel(r.first_scale_difference, grid.shape());
  nb::list diagnoses;
  for (const conformance::Diagnosis& g : r.diagnoses) {
    nb::dict evidence;
    for (const auto& [name, n] : g.evidence) evidence[nb::str(name.c_str())] = n;
    nb::dict one;
    one["signature"] = g.signature;
    one["evidence"] = evidence;
    one["explanation"] = g.explanation;
    one["confirmed"] = g.confirmed;
    diagnoses.append(one);
  }
  d["diagnoses"] = diagnoses;
  return d;
}

nb::dict compare_arrays(const InArray& x, bool bf16_bits, const std::string& preset, const Overrides& o,
                        const InArray& payload, const InArray& scale, const std::optional<InArray>& tensor_scale) {
  const Contract c = quantizing_contract(preset, o);
  const TensorView v = view_of(x, bf16_bits, "x", float_inputs());
  // The outputs come as the contract names them: a tensor scale exactly where it has one.
  const bool has_tensor_scale = output_names(c).size() > 2;
  if (has_tensor_scale != tensor_scale.has_value())
    fail(ErrorKind::bad_argument, "actual: " + c.preset + (has_tensor_scale ? " has a tensor scale: give (payload, scale, tensor_scale)"
                                                                            : " has no tensor scale: give (payload, scale)"));
  conformance::DeviceOutput given;
  given.payload = contiguous_copy(view_of(payload, false, "actual payload", any_dtype()));
  given.scale = contiguous_copy(view_of(scale, false, "actual scale", any_dtype()));
  if (tensor_scale) given.tensor_scale = contiguous_copy(view_of(*tensor_scale, false, "actual tensor_scale", any_dtype()));
  CompareReport r;
  {
    nb::gil_scoped_release release;
    r = conformance::compare_device(c, v, given);
  }
  return report_dict(r, c, v.shape);
}

nb::dict compare_presets(const InArray& x, bool bf16_bits, const std::string& preset, const Overrides& o,
                         const std::string& actual, const Overrides& actual_overrides, const std::string& engine,
                         int threads) {
  const Contract c = quantizing_contract(preset, o);
  const Contract a = make_contract(actual, actual_overrides);
  const RunOptions run = run_options(engine, threads);
  const TensorView v = view_of(x, bf16_bits, "x", float_inputs());
  CompareReport r;
  {
    nb::gil_scoped_release release;
    r = conformance::compare_contracts(c, a, v, run);
  }
  return report_dict(r, c, v.shape);
}

}  // namespace

void bind_compare(nb::module_& m) {
  using namespace nb::literals;
  m.def("compare_arrays", &compare_arrays, "x"_a, "bf16_bits"_a, "preset"_a, "overrides"_a, "payload"_a, "scale"_a,
        "tensor_scale"_a = nb::none(),
        "The report (a dict) of comparing (payload, scale[, tensor_scale]) with the contract's reference for x.");
  m.def("compare_presets", &compare_presets, "x"_a, "bf16_bits"_a, "preset"_a, "overrides"_a, "actual"_a,
        "actual_overrides"_a, "engine"_a, "threads"_a,
        "The report (a dict) of comparing another contract's outputs for x with the contract's reference.");
}

}  // namespace qexact::python
