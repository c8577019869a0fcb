// Public entry points: validate the contract, then route to the engine.
#include "qexact/quantize.hpp"
#include "did_you_mean.hpp"

#include <cstdlib>
#include <cstring>
#include <omp.h>

#include "contracts/family_table.hpp"
#include "contracts/hif4_checks.hpp"
#include "kernels/cpu/hif4/hif4_fast.hpp"
#include "kernels/cpu/pool/pool_fast.hpp"
#include "kernels/family_kernels.hpp"
#include "out_checks.hpp"
#include "qexact/pool.hpp"
#include "reference/hif4_ref.hpp"
#include "reference/pool_mean_ref.hpp"

namespace qexact {

std::vector<std::pair<std::string, const Tensor*>> QuantResult::named() const {
  std::vector<std::pair<std::string, const Tensor*>> out = {{"payload", &payload}, {"scale", &scale}};
  if (tensor_scale.nbytes() > 0) out.emplace_back("tensor_scale", &tensor_scale);
  return out;
}

std::vector<OutputSpec> output_specs(const Contract& c, const Shape& x) {
  require_quantizer(c, "quantize");
  return family_traits(c.family).outputs(c, x);
}

Shape payload_shape(const Contract& c, const Shape& x) { return output_specs(c, x)[0].shape; }
Shape scale_shape(const Contract& c, const Shape& x) { return output_specs(c, x)[1].shape; }

const char* output_codes_name(OutputCodes codes) {
  switch (codes) {
    case OutputCodes::e4m3: return "e4m3";
    case OutputCodes::e5m2: return "e5m2";
    case OutputCodes::e2m3: return "e2m3";
    case OutputCodes::e3m2: return "e3m2";
    case OutputCodes::e2m1_pairs: return "e2m1x2";
    case OutputCodes::e2m1_halves: return "e2m1x2_halves";
    case OutputCodes::e8m0: return "e8m0";
    case OutputCodes::int8: return "int8";
    case OutputCodes::f32: return "f32";
    case OutputCodes::f16: return "f16";
  }
  return "?";
}

const char* engine_name(Engine e) { return e == Engine::fast ? "fast" : "reference"; }

Engine parse_engine(const std::string& name) {
  if (name == "fast") return Engine::fast;
  if (name == "reference") return Engine::reference;
  fail(ErrorKind::bad_argument,
       "unknown engine '" + name + "'" + did_you_mean(name, {"fast", "reference"}) + " (fast, reference)");
}

int resolve_threads(const RunOptions& o) {
  if (o.threads > 0) return o.threads;
  if (const char* env = std::getenv("QEXACT_THREADS"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (*end != '\0' || n < 1 || n > 4096)
      fail(ErrorKind::bad_argument, std::string("QEXACT_THREADS=") + env + " is not a thread count (1..4096)");
    return static_cast<int>(n);
  }
  return omp_get_max_threads();
}

namespace {

void check_quantize_input(const Contract& c, const TensorView& x) {
  validate(c);
  if (!is_float_dtype(x.dtype))
    fail(ErrorKind::bad_argument, std::string("quantize takes f32, bf16 or f16 input, got ") + dtype_name(x.dtype));
}

bool has_tensor_scale(const std::vector<OutputSpec>& specs) { return specs.size() > 2; }

// The fast engine's outputs, allocated (uninitialised) in r as output_specs gives them.
QuantOutputs allocate_outputs(const std::vector<OutputSpec>& specs, QuantResult& r) {
  r.payload = Tensor::uninitialized(specs[0].dtype, specs[0].shape);
  r.scale = Tensor::uninitialized(specs[1].dtype, specs[1].shape);
  QuantOutputs out{r.payload.mutable_view(), r.scale.mutable_view(), {}};
  if (has_tensor_scale(specs)) {
    r.tensor_scale = Tensor::uninitialized(specs[2].dtype, specs[2].shape);
    out.tensor_scale = r.tensor_scale.mutable_view();
  }
  return out;
}

}  // namespace

QuantResult quantize(const Contract& c, const TensorView& x, const RunOptions& o) {
  check_quantize_input(c, x);
  const FamilyKernels& k = family_kernels(c, "quantize");
  if (o.engine == Engine::reference) return k.ref_quantize(c, x);
  const std::vector<OutputSpec> specs = output_specs(c, x.shape);
  QuantResult r;
  const QuantOutputs out = allocate_outputs(specs, r);
  r.path = k.fast_quantize_into(c, x, out, resolve_threads(o));
  return r;
}

QuantResult quantize_with_scales(const Contract& c, const TensorView& x, const TensorView& scale, const RunOptions& o) {
  check_quantize_input(c, x);
  const FamilyKernels& k = family_kernels(c, "quantize");
  const std::vector<OutputSpec> specs = output_specs(c, x.shape);
  if (scale.dtype != specs[1].dtype || scale.shape != specs[1].shape)
    fail(ErrorKind::bad_argument, std::string("the given scale must be ") + dtype_name(specs[1].dtype) + " " +
                                      shape_str(specs[1].shape) + " (" + output_codes_name(specs[1].codes) +
                                      ") for input shape " + shape_str(x.shape) + ", got " + dtype_name(scale.dtype) +
                                      " " + shape_str(scale.shape));
  if (o.engine == Engine::reference) return k.ref_quantize_with_scales(c, x, scale);
  if (!k.fast_quantize_with_scales)
    fail(ErrorKind::bad_argument, std::string("quantize with given scales: the fast engine has no ") +
                                      family_name(c.family) + " kernel for it (fp8.scaled only); use the reference engine");
  QuantResult r;
  const QuantOutputs out = allocate_outputs(specs, r);
  r.path = k.fast_quantize_with_scales(c, x, scale, out, resolve_threads(o));
  return r;
}

namespace {

void check_dequantize_inputs(const Contract& c, const QuantInputs& q, const Shape& x_shape) {
  validate(c);
  const std::vector<OutputSpec> specs = output_specs(c, x_shape);
  const TensorView* given[] = {&q.payload, &q.scale, &q.tensor_scale};
  for (std::size_t i = 0; i < specs.size(); ++i) {
    if (i == 2 && q.tensor_scale.data == nullptr)
      fail(ErrorKind::bad_argument, "this contract has a tensor scale: dequantize needs its tensor_scale");
    if (given[i]->shape != specs[i].shape)
      fail(ErrorKind::bad_argument, specs[i].name + " shape " + shape_str(given[i]->shape) + " does not match " +
                                        shape_str(specs[i].shape) + " expected for input shape " + shape_str(x_shape));
  }
  if (specs.size() < 3 && q.tensor_scale.data != nullptr)
    fail(ErrorKind::bad_argument, "this contract has no tensor scale, but a tensor_scale was given");
}

}  // namespace

Tensor dequantize(const Contract& c, const TensorView& payload, const TensorView& scale, const Shape& x_shape,
                  const RunOptions& o) {
  return dequantize(c, payload, scale, TensorView{}, x_shape, o);
}

Tensor dequantize(const Contract& c, const TensorView& payload, const TensorView& scale,
                  const TensorView& tensor_scale, const Shape& x_shape, const RunOptions& o) {
  const FamilyKernels& k = family_kernels(c, "dequantize");
  const QuantInputs q{payload, scale, tensor_scale};
  check_dequantize_inputs(c, q, x_shape);
  if (o.engine == Engine::reference) return k.ref_dequantize(c, q, x_shape);
  Tensor out = Tensor::uninitialized(DType::f32, x_shape);
  k.fast_dequantize_into(c, q, x_shape, out.data<float>(), resolve_threads(o));
  return out;
}

Tensor hifloat4_fake_quant(const TensorView& x, int qdim, const RunOptions& o) {
  return o.engine == Engine::fast ? fast::hif4_fake_quant(x, qdim, resolve_threads(o)) : ref::hif4_fake_quant(x, qdim);
}
Hif4Packed hif4_pack(const TensorView& x, const RunOptions& o) {
  return o.engine == Engine::fast ? fast::hif4_pack(x, resolve_threads(o)) : ref::hif4_pack(x);
}
Tensor hif4_unpack(const TensorView& scale, const TensorView& value, const RunOptions& o) {
  return o.engine == Engine::fast ? fast::hif4_unpack(scale, value, resolve_threads(o)) : ref::hif4_unpack(scale, value);
}
Tensor pooled_block_mean(const TensorView& x, std::int64_t pool, DType out, const RunOptions& o, PoolDivisor divisor) {
  return o.engine == Engine::fast ? fast::pooled_block_mean(x, pool, out, resolve_threads(o), divisor)
                                  : ref::pooled_block_mean(x, pool, out, divisor);
}

namespace {

using out_checks::require_disjoint;
using out_checks::require_output;

// The reference engine's result copied into a checked, contiguous output of the same bytes.
void copy_into(const Tensor& t, const MutableTensorView& out) {
  if (t.nbytes() > 0) std::memcpy(out.data, t.raw(), t.nbytes());
}

}  // namespace

std::string quantize_into(const Contract& c, const TensorView& x, const MutableTensorView& payload,
                          const MutableTensorView& scale, const RunOptions& o) {
  return quantize_into(c, x, payload, scale, MutableTensorView{}, o);
}

std::string quantize_into(const Contract& c, const TensorView& x, const MutableTensorView& payload,
                          const MutableTensorView& scale, const MutableTensorView& tensor_scale,
                          const RunOptions& o) {
  check_quantize_input(c, x);
  const FamilyKernels& k = family_kernels(c, "quantize");
  const std::vector<OutputSpec> specs = output_specs(c, x.shape);
  require_output(payload, specs[0].dtype, specs[0].shape, "out payload");
  require_output(scale, specs[1].dtype, specs[1].shape, "out scale");
  std::vector<out_checks::Named> outs = {{"out payload", payload.view()}, {"out scale", scale.view()}};
  if (has_tensor_scale(specs)) {
    if (tensor_scale.data == nullptr)
      fail(ErrorKind::bad_argument, "this contract has a tensor scale: quantize_into needs an out tensor_scale");
    require_output(tensor_scale, specs[2].dtype, specs[2].shape, "out tensor_scale");
    outs.emplace_back("out tensor_scale", tensor_scale.view());
  } else if (tensor_scale.data != nullptr) {
    fail(ErrorKind::bad_argument, "this contract has no tensor scale, but an out tensor_scale was given");
  }
  require_disjoint(outs, {{"x", x}});
  if (o.engine == Engine::reference) {
    const QuantResult r = k.ref_quantize(c, x);
    copy_into(r.payload, payload);
    copy_into(r.scale, scale);
    if (has_tensor_scale(specs)) copy_into(r.tensor_scale, tensor_scale);
    return r.path;
  }
  return k.fast_quantize_into(c, x, QuantOutputs{payload, scale, tensor_scale}, resolve_threads(o));
}

void dequantize_into(const Contract& c, const TensorView& payload, const TensorView& scale,
                     const MutableTensorView& out, const RunOptions& o) {
  dequantize_into(c, payload, scale, TensorView{}, out, o);
}

void dequantize_into(const Contract& c, const TensorView& payload, const TensorView& scale,
                     const TensorView& tensor_scale, const MutableTensorView& out, const RunOptions& o) {
  const FamilyKernels& k = family_kernels(c, "dequantize");
  const QuantInputs q{payload, scale, tensor_scale};
  check_dequantize_inputs(c, q, out.shape);
  require_output(out, DType::f32, out.shape, "out");
  std::vector<out_checks::Named> ins = {{"payload", payload}, {"scale", scale}};
  if (tensor_scale.data != nullptr) ins.emplace_back("tensor_scale", tensor_scale);
  require_disjoint({{"out", out.view()}}, ins);
  if (o.engine == Engine::reference) return copy_into(k.ref_dequantize(c, q, out.shape), out);
  k.fast_dequantize_into(c, q, out.shape, static_cast<float*>(out.data), resolve_threads(o));
}

void hifloat4_fake_quant_into(const TensorView& x, const MutableTensorView& out, int qdim, const RunOptions& o) {
  require_output(out, x.dtype, x.shape, "out");
  require_disjoint({{"out", out.view()}}, {{"x", x}});
  if (o.engine == Engine::reference) return copy_into(hifloat4_fake_quant(x, qdim, o), out);
  fast::hif4_fake_quant_into(x, qdim, out.data, resolve_threads(o));
}

void hif4_pack_into(const TensorView& x, const MutableTensorView& scale, const MutableTensorView& value,
                    const RunOptions& o) {
  const hif4_checks::PackGrid g = hif4_checks::require_pack_input(x);
  require_output(scale, DType::u8, Shape{g.rows, g.cols / hif4_checks::kBlock, 4}, "out scale");
  require_output(value, DType::u8, Shape{g.rows, g.cols / 2}, "out value");
  require_disjoint({{"out scale", scale.view()}, {"out value", value.view()}}, {{"x", x}});
  if (o.engine == Engine::reference) {
    const Hif4Packed p = hif4_pack(x, o);
    copy_into(p.scale, scale);
    return copy_into(p.value, value);
  }
  fast::hif4_pack_into(x, static_cast<std::uint8_t*>(scale.data), static_cast<std::uint8_t*>(value.data),
                       resolve_threads(o));
}

void hif4_unpack_into(const TensorView& scale, const TensorView& value, const MutableTensorView& out,
                      const RunOptions& o) {
  const hif4_checks::UnpackGrid g = hif4_checks::require_unpack_inputs(scale, value);
  require_output(out, DType::f32, Shape{g.rows, g.blocks * hif4_checks::kBlock}, "out");
  require_disjoint({{"out", out.view()}}, {{"scale", scale}, {"value", value}});
  if (o.engine == Engine::reference) return copy_into(hif4_unpack(scale, value, o), out);
  fast::hif4_unpack_into(scale, value, static_cast<float*>(out.data), resolve_threads(o));
}

const char* token_path_name(TokenPath p) {
  return p == TokenPath::single_pass ? "single_pass" : "two_pass_chunked";
}

TokenPath select_token_path(std::int64_t row_bytes, std::int64_t budget) {
  return row_bytes <= budget ? TokenPath::single_pass : TokenPath::two_pass_chunked;
}

}  // namespace qexact
