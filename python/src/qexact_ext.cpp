// qexact._core: the C++ library as a Python extension (nanobind). The public, documented API is
// the pure-Python package qexact (python/qexact/), which calls these functions; they take
// arrays without copying them (array_bridge.hpp), release the GIL while a kernel runs, and
// turn qexact::Error into ValueError (bad argument, bad input, bad file) or OSError (io).
#include <algorithm>
#include <optional>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "array_bridge.hpp"
#include "checkpoint_ext.hpp"
#include "compare_binding.hpp"
#include "contracts/family_table.hpp"
#include "qexact/contract.hpp"
#include "qexact/error.hpp"
#include "qexact/formats/element.hpp"
#include "qexact/pool.hpp"
#include "qexact/quantize.hpp"

namespace qexact::python {
namespace {

using Overrides = std::vector<std::string>;

Shape shape_of(const std::vector<std::int64_t>& dims) {
  Shape s(dims.begin(), dims.end());
  shape_numel(s);  // rejects negative dimensions
  return s;
}

std::vector<std::pair<std::string, std::string>> contract_params(const std::string& preset, const Overrides& o) {
  return params(make_contract(preset, o));
}

std::string contract_family(const std::string& preset, const Overrides& o) {
  return family_name(make_contract(preset, o).family);
}

std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>> contract_shapes(
    const std::string& preset, const Overrides& o, const std::vector<std::int64_t>& x_shape) {
  const Contract c = make_contract(preset, o);
  const Shape x = shape_of(x_shape);
  return {payload_shape(c, x), scale_shape(c, x)};
}

// Every output the contract gives x_shape, in output_specs order: (name, dtype name, shape).
// The one source of the outputs' names, dtypes and shapes for the Python side (the torch ops'
// fake kernels included).
std::vector<std::tuple<std::string, std::string, std::vector<std::int64_t>>> contract_outputs(
    const std::string& preset, const Overrides& o, const std::vector<std::int64_t>& x_shape) {
  std::vector<std::tuple<std::string, std::string, std::vector<std::int64_t>>> out;
  for (const OutputSpec& s : output_specs(make_contract(preset, o), shape_of(x_shape)))
    out.emplace_back(s.name, dtype_name(s.dtype), s.shape);
  return out;
}

// (name, codes) of every output of a quantizing contract (output_codes_name's words), for the
// torch and numpy dtypes of its outputs; empty for hif4 and pool.
std::vector<std::pair<std::string, std::string>> contract_output_codes(const std::string& preset,
                                                                       const Overrides& o) {
  const Contract c = make_contract(preset, o);
  std::vector<std::pair<std::string, std::string>> out;
  if (!family_traits(c.family).quantizes) return out;
  for (const auto& [name, codes] : output_codes(c)) out.emplace_back(name, output_codes_name(codes));
  return out;
}

std::vector<std::string> contract_output_names(const std::string& preset, const Overrides& o) {
  return output_names(make_contract(preset, o));
}

// (payload, scale, path, tensor_scale): the tensor scale is None for a contract without one.
std::tuple<OutArray, OutArray, std::string, std::optional<OutArray>> quantize_array(
    const InArray& x, bool bf16_bits, const std::string& preset, const Overrides& o, const std::string& engine,
    int threads, const std::optional<InArray>& scale) {
  const Contract c = make_contract(preset, o);
  const RunOptions run = run_options(engine, threads);
  const TensorView v = view_of(x, bf16_bits, "x", float_inputs());
  // Given scales (quantize_with_scales): the scale output's dtype, its shape checked by the core.
  TensorView given;
  if (scale) given = view_of(*scale, false, "scale", {output_specs(c, v.shape)[1].dtype});
  QuantResult r;
  {
    nb::gil_scoped_release release;
    r = scale ? quantize_with_scales(c, v, given, run) : quantize(c, v, run);
  }
  std::optional<OutArray> tensor_scale;
  if (r.named().size() > 2) tensor_scale = to_numpy(std::move(r.tensor_scale));
  return {to_numpy(std::move(r.payload)), to_numpy(std::move(r.scale)), r.path, std::move(tensor_scale)};
}

struct QuantViews {
  TensorView payload, scale, tensor_scale;  // tensor_scale: empty (data == nullptr) when not given
};

// Views of a quantized tensor's outputs, each with the dtype output_specs gives the input shape
// `x_shape` (the core checks shapes and whether a tensor scale is needed).
QuantViews quantized_views(const Contract& c, const Shape& x_shape, const InArray& payload, const InArray& scale,
                           const std::optional<InArray>& tensor_scale) {
  const std::vector<OutputSpec> specs = output_specs(c, x_shape);
  QuantViews v{view_of(payload, false, "payload", {specs[0].dtype}), view_of(scale, false, "scale", {specs[1].dtype}),
               {}};
  if (tensor_scale)
    v.tensor_scale = view_of(*tensor_scale, false, "tensor_scale", {specs.size() > 2 ? specs[2].dtype : DType::f32});
  return v;
}

OutArray dequantize_arrays(const InArray& payload, const InArray& scale, const std::vector<std::int64_t>& x_shape,
                           const std::string& preset, const Overrides& o, const std::string& engine, int threads,
                           const std::optional<InArray>& tensor_scale) {
  const Contract c = make_contract(preset, o);
  const RunOptions run = run_options(engine, threads);
  const Shape shape = shape_of(x_shape);
  const QuantViews q = quantized_views(c, shape, payload, scale, tensor_scale);
  Tensor y;
  {
    nb::gil_scoped_release release;
    y = dequantize(c, q.payload, q.scale, q.tensor_scale, shape, run);
  }
  return to_numpy(std::move(y));
}

OutArray fake_quant_array(const InArray& x, bool bf16_bits, int qdim, const std::string& engine, int threads) {
  const RunOptions run = run_options(engine, threads);
  const TensorView v = view_of(x, bf16_bits, "x", float_inputs());
  Tensor y;
  {
    nb::gil_scoped_release release;
    y = hifloat4_fake_quant(v, qdim, run);
  }
  return to_numpy(std::move(y));
}

std::pair<OutArray, OutArray> hif4_pack_array(const InArray& x, bool bf16_bits, const std::string& engine,
                                              int threads) {
  const RunOptions run = run_options(engine, threads);
  const TensorView v = view_of(x, bf16_bits, "x", float_inputs());
  Hif4Packed packed;
  {
    nb::gil_scoped_release release;
    packed = hif4_pack(v, run);
  }
  return {to_numpy(std::move(packed.scale)), to_numpy(std::move(packed.value))};
}

OutArray hif4_unpack_arrays(const InArray& scale, const InArray& value, const std::string& engine, int threads) {
  const RunOptions run = run_options(engine, threads);
  const TensorView s = view_of(scale, false, "scale", {DType::u8});
  const TensorView v = view_of(value, false, "value", {DType::u8});
  Tensor y;
  {
    nb::gil_scoped_release release;
    y = hif4_unpack(s, v, run);
  }
  return to_numpy(std::move(y));
}

OutArray pooled_mean_array(const InArray& x, bool bf16_bits, std::int64_t pool, const std::string& out,
                           const std::string& engine, int threads) {
  const RunOptions run = run_options(engine, threads);
  const DType out_dtype = parse_dtype(out);
  const TensorView v = view_of(x, bf16_bits, "x", float_inputs());
  Tensor y;
  {
    nb::gil_scoped_release release;
    y = pooled_block_mean(v, pool, out_dtype, run);
  }
  return to_numpy(std::move(y));
}

OutArray pooled_mean_sharded_arrays(const std::vector<InArray>& shards, const std::vector<bool>& bf16_bits,
                                    std::int64_t pool, const std::string& out, const std::string& divisor) {
  if (bf16_bits.size() != shards.size())
    fail(ErrorKind::bad_argument, "one bf16 flag per shard is needed");
  PoolDivisor d;
  if (divisor == "true_length") d = PoolDivisor::true_length;
  else if (divisor == "uniform") d = PoolDivisor::uniform;
  else fail(ErrorKind::bad_argument, "unknown divisor '" + divisor + "' (true_length, uniform)");
  const DType out_dtype = parse_dtype(out);
  std::vector<TensorView> views;
  for (std::size_t i = 0; i < shards.size(); ++i) {
    const std::string what = "shard " + std::to_string(i);
    views.push_back(view_of(shards[i], bf16_bits[i], what.c_str(), float_inputs()));
  }
  Tensor y;
  {
    nb::gil_scoped_release release;
    y = pooled_block_mean_sharded(views, pool, out_dtype, d);
  }
  return to_numpy(std::move(y));
}

OutArray cast_array(const InArray& x, bool bf16_bits, const std::string& element, const std::string& rounding,
                    const std::string& overflow) {
  const ElemFormat f = parse_elem_format(element);
  const Rounding r = parse_rounding(rounding);
  const Overflow o = parse_overflow(overflow);
  elem_encode(f, 0.0f, r, o);  // throws for a rule the format cannot follow, before any work
  const TensorView v = view_of(x, bf16_bits, "x", float_inputs());
  Tensor codes(DType::u8, v.shape);
  {
    nb::gil_scoped_release release;
    const std::vector<float> values = to_f32_vector(v);
    auto* out = codes.data<std::uint8_t>();
    for (std::size_t i = 0; i < values.size(); ++i) out[i] = elem_encode(f, values[i], r, o);
  }
  return to_numpy(std::move(codes));
}

OutArray decode_array(const InArray& codes, const std::string& element) {
  const ElemFormat f = parse_elem_format(element);
  const ElemTraits& t = elem_traits(f);
  const TensorView v = view_of(codes, false, "codes", {DType::u8});
  const Tensor c = contiguous_copy(v);
  const auto* in = c.data<std::uint8_t>();
  for (std::int64_t i = 0; i < c.numel(); ++i)
    if (in[i] >> t.bits)
      fail(ErrorKind::bad_argument, "codes: " + std::to_string(in[i]) + " at flat index " + std::to_string(i) +
                                        " is not a code of " + t.name + " (" + std::to_string(t.bits) + " bits)");
  Tensor values(DType::f32, v.shape);
  auto* out = values.data<float>();
  for (std::int64_t i = 0; i < c.numel(); ++i) out[i] = elem_decode(f, in[i]);
  return to_numpy(std::move(values));
}

std::string input_dtype(const InArray& x, bool bf16_bits) {
  return dtype_name(view_of(x, bf16_bits, "x", float_inputs()).dtype);
}

std::vector<std::int64_t> array_shape(const InArray& x) {
  std::vector<std::int64_t> shape;
  for (std::size_t i = 0; i < x.ndim(); ++i) shape.push_back(static_cast<std::int64_t>(x.shape(i)));
  return shape;
}

std::uintptr_t data_pointer(const InArray& x) { return reinterpret_cast<std::uintptr_t>(x.data()); }

// A DLPack producer labelling `x`'s uint16 bit patterns bfloat16, over the same memory: the
// way PyTorch hands over a bf16 tensor, for testing that route without PyTorch.
nb::ndarray<nb::ro, nb::array_api> relabel_as_bfloat16(nb::object x) {
  const auto a = nb::cast<InArray>(x);
  DType t{};
  if (!qexact_dtype_of(a, false, t) || t != DType::u16)
    throw nb::type_error(("x holds " + dtype_name_of(a) + " values; it must be uint16").c_str());
  std::vector<std::size_t> shape;
  std::vector<std::int64_t> strides;
  for (std::size_t i = 0; i < a.ndim(); ++i) {
    shape.push_back(a.shape(i));
    strides.push_back(a.stride(i));
  }
  const nb::dlpack::dtype bf16{static_cast<std::uint8_t>(nb::dlpack::dtype_code::Bfloat), 16, 1};
  return nb::ndarray<nb::ro, nb::array_api>(a.data(), shape.size(), shape.data(), x, strides.data(), bf16);
}

// ---- out=: results written into arrays the caller owns ----
// A writable CPU array (numpy or DLPack) as a MutableTensorView over its own memory; the
// library checks its dtype, shape, contiguity and overlap before writing anything.
using WritableArray = nb::ndarray<nb::device::cpu>;

MutableTensorView writable_view(const WritableArray& a, bool bf16_bits, const char* what) {
  const TensorView v = view_of(InArray(a), bf16_bits, what, {DType::f32, DType::f16, DType::bf16, DType::u8, DType::i8});
  return MutableTensorView{v.dtype, v.shape, v.strides, a.data()};
}

std::string quantize_into_arrays(const InArray& x, bool bf16_bits, const WritableArray& payload,
                                 const WritableArray& scale, const std::string& preset, const Overrides& o,
                                 const std::string& engine, int threads,
                                 const std::optional<WritableArray>& tensor_scale) {
  const Contract c = make_contract(preset, o);
  const RunOptions run = run_options(engine, threads);
  const TensorView v = view_of(x, bf16_bits, "x", float_inputs());
  const MutableTensorView p = writable_view(payload, false, "out payload");
  const MutableTensorView s = writable_view(scale, false, "out scale");
  const MutableTensorView t = tensor_scale ? writable_view(*tensor_scale, false, "out tensor_scale") : MutableTensorView{};
  nb::gil_scoped_release release;
  return quantize_into(c, v, p, s, t, run);
}

void dequantize_into_arrays(const InArray& payload, const InArray& scale, const WritableArray& out,
                            const std::string& preset, const Overrides& o, const std::string& engine, int threads,
                            const std::optional<InArray>& tensor_scale) {
  const Contract c = make_contract(preset, o);
  const RunOptions run = run_options(engine, threads);
  const MutableTensorView y = writable_view(out, false, "out");
  const QuantViews q = quantized_views(c, y.shape, payload, scale, tensor_scale);
  nb::gil_scoped_release release;
  dequantize_into(c, q.payload, q.scale, q.tensor_scale, y, run);
}

void fake_quant_into_array(const InArray& x, bool bf16_bits, const WritableArray& out, bool out_bf16_bits, int qdim,
                           const std::string& engine, int threads) {
  const RunOptions run = run_options(engine, threads);
  const TensorView v = view_of(x, bf16_bits, "x", float_inputs());
  const MutableTensorView y = writable_view(out, out_bf16_bits, "out");
  nb::gil_scoped_release release;
  hifloat4_fake_quant_into(v, y, qdim, run);
}

void hif4_pack_into_arrays(const InArray& x, bool bf16_bits, const WritableArray& scale, const WritableArray& value,
                           const std::string& engine, int threads) {
  const RunOptions run = run_options(engine, threads);
  const TensorView v = view_of(x, bf16_bits, "x", float_inputs());
  const MutableTensorView s = writable_view(scale, false, "out scale");
  const MutableTensorView w = writable_view(value, false, "out value");
  nb::gil_scoped_release release;
  hif4_pack_into(v, s, w, run);
}

void hif4_unpack_into_arrays(const InArray& scale, const InArray& value, const WritableArray& out,
                             const std::string& engine, int threads) {
  const RunOptions run = run_options(engine, threads);
  const TensorView s = view_of(scale, false, "scale", {DType::u8});
  const TensorView v = view_of(value, false, "value", {DType::u8});
  const MutableTensorView y = writable_view(out, false, "out");
  nb::gil_scoped_release release;
  hif4_unpack_into(s, v, y, run);
}

void translate_error(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const Error& e) {
    PyErr_SetString(e.kind() == ErrorKind::io ? PyExc_OSError : PyExc_ValueError, e.what());
  }
}

}  // namespace
}  // namespace qexact::python

NB_MODULE(_core, m) {
  using namespace qexact::python;
  namespace nb = nanobind;
  using namespace nb::literals;
  m.doc() = "qexact's C++ core; use the qexact package, which documents every function.";
  nb::register_exception_translator(translate_error);

  m.def("preset_names", &qexact::preset_names, "Names of the built-in contracts.");
  m.def("preset_description", &qexact::preset_description, "name"_a, "One line describing a preset.");
  m.def("contract_params", &contract_params, "preset"_a, "overrides"_a,
        "(key, value) of every parameter of the validated contract.");
  m.def("contract_family", &contract_family, "preset"_a, "overrides"_a, "The contract's family name.");
  m.def("contract_shapes", &contract_shapes, "preset"_a, "overrides"_a, "x_shape"_a,
        "(payload shape, scale shape) the contract gives an input shape.");
  m.def("contract_outputs", &contract_outputs, "preset"_a, "overrides"_a, "x_shape"_a,
        "(name, dtype, shape) of every output the contract gives an input shape (output_specs).");
  m.def("output_codes", &contract_output_codes, "preset"_a, "overrides"_a,
        "(name, codes) of each output: e4m3, e5m2, e2m3, e3m2, e2m1x2, e8m0, int8, f32 or f16.");
  m.def("output_names", &contract_output_names, "preset"_a, "overrides"_a,
        "Names of the contract's outputs, in output_specs order (payload, scale[, tensor_scale]).");
  m.def("quantize", &quantize_array, "x"_a, "bf16_bits"_a, "preset"_a, "overrides"_a, "engine"_a, "threads"_a,
        "scale"_a = nb::none(),
        "(payload, scale, path, tensor_scale or None) of x under the contract; with scale, under those scales.");
  m.def("dequantize", &dequantize_arrays, "payload"_a, "scale"_a, "x_shape"_a, "preset"_a, "overrides"_a, "engine"_a,
        "threads"_a, "tensor_scale"_a = nb::none(), "fp32 values of a quantized tensor.");
  m.def("hifloat4_fake_quant", &fake_quant_array, "x"_a, "bf16_bits"_a, "qdim"_a, "engine"_a, "threads"_a,
        "FP -> HiF4 -> FP along qdim (bf16 results as uint16 bit patterns).");
  m.def("hif4_pack", &hif4_pack_array, "x"_a, "bf16_bits"_a, "engine"_a, "threads"_a, "(scale, value) of a 2-D x.");
  m.def("hif4_unpack", &hif4_unpack_arrays, "scale"_a, "value"_a, "engine"_a, "threads"_a, "fp32 values.");
  m.def("quantize_into", &quantize_into_arrays, "x"_a, "bf16_bits"_a, "payload"_a, "scale"_a, "preset"_a,
        "overrides"_a, "engine"_a, "threads"_a, "tensor_scale"_a = nb::none(),
        "quantize into the caller's (payload, scale[, tensor_scale]); returns the path.");
  m.def("dequantize_into", &dequantize_into_arrays, "payload"_a, "scale"_a, "out"_a, "preset"_a, "overrides"_a,
        "engine"_a, "threads"_a, "tensor_scale"_a = nb::none(), "dequantize into the caller's fp32 out (x's shape).");
  m.def("hifloat4_fake_quant_into", &fake_quant_into_array, "x"_a, "bf16_bits"_a, "out"_a, "out_bf16_bits"_a,
        "qdim"_a, "engine"_a, "threads"_a, "fake-quant into the caller's out (x's dtype and shape).");
  m.def("hif4_pack_into", &hif4_pack_into_arrays, "x"_a, "bf16_bits"_a, "scale"_a, "value"_a, "engine"_a,
        "threads"_a, "pack into the caller's (scale, value).");
  m.def("hif4_unpack_into", &hif4_unpack_into_arrays, "scale"_a, "value"_a, "out"_a, "engine"_a, "threads"_a,
        "unpack into the caller's fp32 out.");
  m.def("pooled_block_mean", &pooled_mean_array, "x"_a, "bf16_bits"_a, "pool"_a, "out"_a, "engine"_a, "threads"_a,
        "Exact block means over axis 1 (bf16 results as uint16 bit patterns).");
  m.def("pooled_block_mean_sharded", &pooled_mean_sharded_arrays, "shards"_a, "bf16_bits"_a, "pool"_a, "out"_a,
        "divisor"_a, "The pooled mean combined from sequence shards.");
  m.def("cast", &cast_array, "x"_a, "bf16_bits"_a, "element"_a, "rounding"_a, "overflow"_a,
        "Element codes of x, unscaled (the reference codec).");
  m.def("decode", &decode_array, "codes"_a, "element"_a, "fp32 values of element codes.");
  m.def("input_dtype", &input_dtype, "x"_a, "bf16_bits"_a, "qexact's name of x's dtype: f32, f16 or bf16.");
  m.def("array_shape", &array_shape, "x"_a, "The shape of any array the extension can read.");
  m.def("data_pointer", &data_pointer, "x"_a, "Address of the memory the extension reads for x.");
  m.def("relabel_as_bfloat16", &relabel_as_bfloat16, "x"_a,
        "A DLPack bfloat16 view of a uint16 array's memory (for tests).");
  bind_checkpoint(m);
  bind_compare(m);
}
