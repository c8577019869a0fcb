#include "conformance/compare.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "conformance/contract_output.hpp"
#include "conformance/diagnose.hpp"
#include "conformance/scale_grid.hpp"
#include "contracts/family_table.hpp"
#include "qexact/error.hpp"

namespace qexact::conformance {
namespace {

void expect_like(const char* what, const Tensor& device, const Tensor& reference) {
  if (device.dtype() != reference.dtype())
    fail(ErrorKind::bad_input, std::string("the device's ") + what + " holds " + dtype_name(device.dtype()) +
                                   " values, the contract gives " + dtype_name(reference.dtype()));
  if (device.shape() != reference.shape())
    fail(ErrorKind::bad_input, std::string("the device's ") + what + " has shape " + shape_str(device.shape()) +
                                   ", the contract gives " + shape_str(reference.shape()));
}

std::int64_t differing_bytes(const Tensor& a, const Tensor& b) {
  const auto* pa = static_cast<const std::uint8_t*>(a.raw());
  const auto* pb = static_cast<const std::uint8_t*>(b.raw());
  std::int64_t n = 0;
  for (std::size_t i = 0; i < a.nbytes(); ++i) n += pa[i] != pb[i] ? 1 : 0;
  return n;
}

// Element e's bytes differ (elements of `size` bytes).
bool element_differs(const Tensor& a, const Tensor& b, std::int64_t e, std::size_t size) {
  const auto off = static_cast<std::size_t>(e) * size;
  return std::memcmp(static_cast<const std::uint8_t*>(a.raw()) + off, static_cast<const std::uint8_t*>(b.raw()) + off,
                     size) != 0;
}

// The tensor scale (nvfp4 tensor_scale=amax): a missing or extra one differs in all its bytes.
void compare_tensor_scale(const ContractOutput& ref, const DeviceOutput& device, CompareReport& rep) {
  const Tensor& r = ref.tensor_scale;
  const Tensor& d = device.tensor_scale;
  if (r.nbytes() == 0 && d.nbytes() == 0) return;
  rep.tensor_scale_bytes_total = static_cast<std::int64_t>(std::max(r.nbytes(), d.nbytes()));
  if (r.nbytes() != d.nbytes() || r.dtype() != d.dtype() || r.shape() != d.shape() || r.dtype() != DType::f32) {
    rep.tensor_scale_bytes_differing = rep.tensor_scale_bytes_total;
    return;
  }
  rep.tensor_scale_bytes_differing = differing_bytes(r, d);
  const std::uint32_t rb = r.data<std::uint32_t>()[0], db = d.data<std::uint32_t>()[0];
  rep.tensor_scale_delta =
      ordered_scale(db, ScaleEncoding::fp32) - ordered_scale(rb, ScaleEncoding::fp32);
}

}  // namespace

CompareReport compare_device(const Contract& c, const TensorView& x, const DeviceOutput& device) {
  validate(c);
  const ContractOutput ref = run_contract(c, x, RunOptions{Engine::reference, 1});
  const ScaleGrid grid(c, x.shape);
  CompareReport rep;
  rep.groups_total = grid.groups();
  rep.rows_total = grid.rows();
  rep.elements_total = grid.elements();
  std::vector<bool> group_differs(static_cast<std::size_t>(grid.groups()), false);
  std::vector<bool> row_differs(static_cast<std::size_t>(grid.rows()), false);
  auto mark = [&](std::int64_t e) {
    group_differs[static_cast<std::size_t>(grid.group_of(e))] = true;
    row_differs[static_cast<std::size_t>(grid.row_of(e))] = true;
  };

  if (output_kind(c) == OutputKind::single) {
    if (device.output.dtype() == DType::u16 && ref.output.dtype() == DType::bf16)
      fail(ErrorKind::bad_input, "the device's output holds uint16 values: bf16 outputs are read as bf16 bit patterns");
    expect_like("output", device.output, ref.output);
    rep.payload_bytes_total = static_cast<std::int64_t>(ref.output.nbytes());
    rep.payload_bytes_differing = differing_bytes(ref.output, device.output);
    const std::size_t size = dtype_size(ref.output.dtype());
    for (std::int64_t e = 0; e < ref.output.numel(); ++e)
      if (element_differs(ref.output, device.output, e, size)) {
        ++rep.elements_differing;
        if (rep.first_payload_difference < 0) rep.first_payload_difference = e;
        mark(e);
      }
  } else {
    expect_like("payload", device.payload, ref.payload);
    if (device.scale.dtype() != ref.scale.dtype())
      fail(ErrorKind::bad_input, std::string("the device's scale holds ") + dtype_name(device.scale.dtype()) +
                                     " values, the contract gives " + dtype_name(ref.scale.dtype()));
    rep.payload_bytes_total = static_cast<std::int64_t>(ref.payload.nbytes());
    rep.payload_bytes_differing = differing_bytes(ref.payload, device.payload);
    const std::vector<std::uint8_t> e_codes = grid.codes(ref.payload), a_codes = grid.codes(device.payload);
    for (std::int64_t e = 0; e < grid.elements(); ++e)
      if (e_codes[static_cast<std::size_t>(e)] != a_codes[static_cast<std::size_t>(e)]) {
        ++rep.elements_differing;
        if (rep.first_payload_difference < 0) rep.first_payload_difference = e;
        mark(e);
      }
    const ScaleEncoding enc = scale_encoding(c);
    rep.scale_delta_unit = scale_delta_unit(enc);
    compare_tensor_scale(ref, device, rep);
    if (device.scale.shape() == ref.scale.shape()) {
      rep.scale_bytes_total = static_cast<std::int64_t>(ref.scale.nbytes());
      rep.scale_bytes_differing = differing_bytes(ref.scale, device.scale);
      const std::vector<std::uint32_t> rs = grid.scale_bits(ref.scale), ds = grid.scale_bits(device.scale);
      for (std::int64_t g = 0; g < grid.groups(); ++g) {
        const auto i = static_cast<std::size_t>(g);
        if (rs[i] == ds[i]) continue;
        const std::int64_t delta = ordered_scale(ds[i], enc) - ordered_scale(rs[i], enc);
        ++rep.scales_differing;
        ++rep.scale_delta_histogram[delta];
        rep.max_scale_delta = std::max<std::int64_t>(rep.max_scale_delta, delta < 0 ? -delta : delta);
        if (rep.first_scale_difference < 0) rep.first_scale_difference = g;
        group_differs[i] = true;
      }
      // A group's scale difference affects every row it covers.
      for (std::int64_t e = 0; e < grid.elements(); ++e)
        if (group_differs[static_cast<std::size_t>(grid.group_of(e))]) row_differs[static_cast<std::size_t>(grid.row_of(e))] = true;
    } else {
      // Another shape: no byte can be said to match in place.
      rep.scale_bytes_total = static_cast<std::int64_t>(std::max(ref.scale.nbytes(), device.scale.nbytes()));
      rep.scale_bytes_differing = rep.scale_bytes_total;
      rep.scales_differing = grid.groups();
    }
  }
  rep.groups_differing = std::count(group_differs.begin(), group_differs.end(), true);
  rep.rows_differing = std::count(row_differs.begin(), row_differs.end(), true);
  if (!rep.identical()) rep.diagnoses = diagnose(c, x, ref, device);
  return rep;
}

CompareReport compare_contracts(const Contract& expected, const Contract& actual, const TensorView& x,
                                const RunOptions& run) {
  validate(expected);
  validate(actual);
  const std::string e_name = expected.preset.empty() ? family_name(expected.family) : expected.preset;
  const std::string a_name = actual.preset.empty() ? family_name(actual.family) : actual.preset;
  if (expected.family != actual.family)
    fail(ErrorKind::bad_argument, "cannot compare " + e_name + " (family " + family_name(expected.family) + ") with " +
                                      a_name + " (family " + family_name(actual.family) + ")");
  const auto e_params = params(expected), a_params = params(actual);
  auto value = [](const std::vector<std::pair<std::string, std::string>>& ps, const char* key) {
    for (const auto& [k, v] : ps)
      if (k == key) return v;
    return std::string();
  };
  for (const char* key : {"element", "block", "token_block", "group", "scale_store"})
    if (value(e_params, key) != value(a_params, key))
      fail(ErrorKind::bad_argument, "cannot compare " + e_name + " with " + a_name + ": " + key + "=" +
                                        value(e_params, key) + " vs " + key + "=" + value(a_params, key) +
                                        " give different payloads or scale grids");
  ContractOutput out = run_contract(actual, x, run);
  if (output_kind(expected) == OutputKind::payload_scale && expected.layout != actual.layout) {
    const ScaleGrid mine(expected, x.shape), theirs(actual, x.shape);
    out.scale = mine.scale_tensor(theirs.scale_bits(out.scale), out.scale.dtype());
  }
  return compare_device(expected, x, out);
}

CompareReport compare_refusal(const Contract& c, const TensorView& x) {
  validate(c);
  const ContractOutput ref = run_contract(c, x, RunOptions{Engine::reference, 1});
  const ScaleGrid grid(c, x.shape);
  CompareReport rep;
  const Tensor& payload = output_kind(c) == OutputKind::single ? ref.output : ref.payload;
  rep.payload_bytes_total = rep.payload_bytes_differing = static_cast<std::int64_t>(payload.nbytes());
  rep.scale_bytes_total = rep.scale_bytes_differing = static_cast<std::int64_t>(ref.scale.nbytes());
  if (output_kind(c) == OutputKind::payload_scale)
    rep.scale_delta_unit = scale_delta_unit(scale_encoding(c));
  rep.tensor_scale_bytes_total = rep.tensor_scale_bytes_differing = static_cast<std::int64_t>(ref.tensor_scale.nbytes());
  rep.elements_total = rep.elements_differing = grid.elements();
  rep.groups_total = rep.groups_differing = grid.groups();
  if (output_kind(c) == OutputKind::payload_scale) rep.scales_differing = grid.groups();
  rep.rows_total = rep.rows_differing = grid.rows();
  if (grid.elements() > 0) rep.first_payload_difference = 0;
  if (grid.has_tail()) {
    std::int64_t tails = 0;
    for (std::int64_t g = 0; g < grid.groups(); ++g) tails += grid.is_tail_group(g) ? 1 : 0;
    rep.diagnoses.push_back(Diagnosis{
        "tail_rule",
        {{"refused_cases", 1}, {"tail_groups", tails}},
        "the device refused an input with a partial last block (a block shorter than the block size) that the "
        "contract quantizes: the device rejects tails",
        false});
  }
  return rep;
}

std::vector<MergedDiagnosis> merge_diagnoses(const std::vector<CaseDiagnoses>& cases) {
  std::vector<MergedDiagnosis> out;
  for (const CaseDiagnoses& k : cases)
    for (const Diagnosis& d : k.diagnoses) {
      auto it = std::find_if(out.begin(), out.end(),
                             [&](const MergedDiagnosis& m) { return m.diagnosis.signature == d.signature; });
      if (it == out.end()) {
        out.push_back({d, {k.name}});
        continue;
      }
      for (const auto& [name, n] : d.evidence) {
        auto e = std::find_if(it->diagnosis.evidence.begin(), it->diagnosis.evidence.end(),
                              [&](const auto& x) { return x.first == name; });
        if (e == it->diagnosis.evidence.end()) it->diagnosis.evidence.emplace_back(name, n);
        else e->second += n;
      }
      it->diagnosis.confirmed = it->diagnosis.confirmed && d.confirmed;
      if (it->cases.back() != k.name) it->cases.push_back(k.name);
    }
  return out;
}

}  // namespace qexact::conformance
