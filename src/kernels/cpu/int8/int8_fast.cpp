// Fast int8 quantize and dequantize (contracts §3, §4; q8_0): the checks, output tensors and
// thread split here, the per-unit work in the SIMD kernels (int8_block.cpp, int8_token.cpp,
// int8_group.cpp, int8_dequantize.cpp). The finite-only check rides on the kernels' own abs-max
// reduction, which sees every value before its domain is quantized: a kernel that meets a NaN
// or an infinity stops, and the call throws, naming the first one in C order, before it
// returns any output.
#include <algorithm>
#include <atomic>
#include <string>

#include "kernels/cpu/common/parallel.hpp"
#include "kernels/cpu/common/simd_target.hpp"
#include "kernels/cpu/int8/int8_fast.hpp"
#include "kernels/cpu/int8/int8_plan.hpp"

namespace qexact::fast {
namespace {

// A thread gets at least this many values: below it, thread start-up costs more than it saves.
constexpr std::int64_t kMinValuesPerThread = 1 << 15;

void check_contract(const Contract& c, Family family) {
  validate(c);
  if (c.family != family)
    fail(ErrorKind::bad_argument,
         std::string("the ") + family_name(family) + " quantizer was given a " + family_name(c.family) + " contract");
}

void check_float_input(const TensorView& x) {
  if (!is_float_dtype(x.dtype))
    fail(ErrorKind::bad_argument, std::string("expected an f32, bf16 or f16 tensor, got ") + dtype_name(x.dtype));
}

std::string bsnd_index(const kernels::Int8Plan& p, std::int64_t flat) {
  const std::int64_t dim = p.shape[3], heads = p.shape[2], seq = p.shape[1];
  return "(b " + std::to_string(flat / (dim * heads * seq)) + ", s " + std::to_string((flat / (dim * heads)) % seq) +
         ", n " + std::to_string((flat / dim) % heads) + ", d " + std::to_string(flat % dim) + ")";
}

std::string row_column_index(const kernels::Int8Plan& p, std::int64_t flat) {
  return "(row " + std::to_string(flat / p.cols) + ", column " + std::to_string(flat % p.cols) + ")";
}

std::int64_t grain_for(std::int64_t values_per_unit) {
  return std::max<std::int64_t>(1, kMinValuesPerThread / std::max<std::int64_t>(1, values_per_unit));
}

std::string groupwise_path(const kernels::Int8Plan&) { return "groupwise"; }
std::string token_path(const kernels::Int8Plan& p) {
  return token_path_name(p.single_pass ? TokenPath::single_pass : TokenPath::two_pass_chunked);
}

// One row per int8 family: the unit its quantize kernel works on (units and values per unit,
// from x's shape and the scale shape), how an error names an element, the path it reports,
// and its dequantize's run of consecutive elements under one scale.
struct Int8Variant {
  Family family;
  void (*kernel)(const kernels::Int8Plan& p, std::int64_t first, std::int64_t last);
  std::int64_t (*units)(const Shape& x, const Shape& ss);
  std::int64_t (*unit_len)(const Contract& c, const Shape& x);
  std::string (*where)(const kernels::Int8Plan& p, std::int64_t flat);
  std::string (*path)(const kernels::Int8Plan& p);
  void (*dequantize_runs)(const Contract& c, const Shape& x, const Shape& ss, kernels::Int8DequantPlan& p);
};

std::int64_t one_unit_per_scale(const Shape&, const Shape& ss) { return shape_numel(ss); }

const Int8Variant kVariants[] = {
    // One unit per (b, token block), all heads together (int8_block.cpp); a run is one token's
    // D channels of one head.
    {Family::int8_block, kernels::quantize_int8_block_units,
     [](const Shape& x, const Shape& ss) { return x[0] * ss[2]; },
     [](const Contract& c, const Shape& x) { return c.token_block * x[2] * x[3]; }, bsnd_index, groupwise_path,
     [](const Contract& c, const Shape& x, const Shape& ss, kernels::Int8DequantPlan& p) {
       p.run = x[3];
       p.seq = x[1];
       p.heads = x[2];
       p.blocks = ss[2];
       p.token_block = c.token_block;
     }},
    {Family::int8_token, kernels::quantize_int8_token_rows, one_unit_per_scale,
     [](const Contract&, const Shape& x) { return x.back(); }, row_column_index, token_path,
     [](const Contract&, const Shape& x, const Shape&, kernels::Int8DequantPlan& p) { p.run = x.back(); }},
    {Family::int8_group, kernels::quantize_int8_group_units, one_unit_per_scale,
     [](const Contract& c, const Shape&) -> std::int64_t { return c.group; }, row_column_index, groupwise_path,
     [](const Contract& c, const Shape&, const Shape&, kernels::Int8DequantPlan& p) { p.run = c.group; }},
};

// The row of an int8 family; null for any other.
const Int8Variant* int8_variant(Family f) {
  for (const Int8Variant& v : kVariants)
    if (v.family == f) return &v;
  return nullptr;
}

// The family's kernel over its units on `threads` threads, writing the caller's outputs (the
// scale of shape `ss`); then rejects the input if a kernel met a non-finite value. Returns the
// path that ran. Checks nothing: its callers have.
std::string run_int8_family(const Contract& c, const Int8Variant& v, const TensorView& x, std::int8_t* payload,
                            void* scale, const Shape& ss, int threads) {
  kernels::apply_forced_target();
  std::atomic<bool> nonfinite{false};
  const kernels::Int8Plan plan = kernels::make_int8_plan(c, x, payload, scale, &nonfinite);
  kernels::parallel_for(v.units(x.shape, ss), grain_for(v.unit_len(c, x.shape)), threads,
                        [&](std::int64_t b, std::int64_t e) { v.kernel(plan, b, e); });
  if (nonfinite.load()) kernels::reject_first_nonfinite(plan, family_name(c.family), v.where);
  return v.path(plan);
}

// The allocating form: the family's checks, uninitialised outputs, every byte written by the
// kernel threads.
QuantResult quantize_int8_alloc(const Contract& c, Family family, const TensorView& x, int threads) {
  kernels::apply_forced_target();
  check_contract(c, family);
  const std::vector<OutputSpec> specs = output_specs(c, x.shape);
  check_float_input(x);
  const Int8Variant& v = *int8_variant(family);  // check_contract admitted only the three families
  QuantResult r{Tensor::uninitialized(specs[0].dtype, specs[0].shape),
                Tensor::uninitialized(specs[1].dtype, specs[1].shape), "", {}};
  r.path = run_int8_family(c, v, x, r.payload.data<std::int8_t>(), r.scale.raw(), specs[1].shape, threads);
  return r;
}

}  // namespace

QuantResult quantize_int8_block(const Contract& c, const TensorView& x, int threads) {
  return quantize_int8_alloc(c, Family::int8_block, x, threads);
}

QuantResult quantize_int8_token(const Contract& c, const TensorView& x, int threads) {
  return quantize_int8_alloc(c, Family::int8_token, x, threads);
}

QuantResult quantize_int8_group(const Contract& c, const TensorView& x, int threads) {
  return quantize_int8_alloc(c, Family::int8_group, x, threads);
}

std::string quantize_int8_prechecked(const Contract& c, const TensorView& x, const MutableTensorView& payload,
                                     const MutableTensorView& scale, int threads) {
  const Int8Variant* v = int8_variant(c.family);
  if (!v)
    fail(ErrorKind::bad_argument,
         std::string("quantize_int8_prechecked was given a ") + family_name(c.family) + " contract");
  return run_int8_family(c, *v, x, static_cast<std::int8_t*>(payload.data), scale.data, scale.shape, threads);
}

void dequantize_int8_into(const Contract& c, const TensorView& payload, const TensorView& scale, const Shape& x_shape,
                          float* out, int threads) {
  kernels::apply_forced_target();
  validate(c);
  const Int8Variant* v = int8_variant(c.family);
  if (!v)
    fail(ErrorKind::bad_argument, std::string("dequantize_int8 was given a ") + family_name(c.family) + " contract");
  const std::vector<OutputSpec> specs = output_specs(c, x_shape);
  const Shape& ps = specs[0].shape;
  const Shape& ss = specs[1].shape;
  const DType sd = specs[1].dtype;
  if (payload.dtype != DType::i8 || payload.shape != ps)
    fail(ErrorKind::bad_argument, std::string("payload must be i8 of shape ") + shape_str(ps) + ", got " +
                                      dtype_name(payload.dtype) + " " + shape_str(payload.shape));
  if (scale.dtype != sd || scale.shape != ss)
    fail(ErrorKind::bad_argument, std::string("scale must be ") + dtype_name(sd) + " of shape " + shape_str(ss) +
                                      ", got " + dtype_name(scale.dtype) + " " + shape_str(scale.shape));

  const std::int64_t numel = shape_numel(x_shape);
  if (numel == 0) return;
  kernels::Int8DequantPlan p;
  p.payload = static_cast<const std::int8_t*>(payload.data);
  p.payload_view = &payload;
  p.payload_contiguous = payload.is_contiguous();
  p.payload_col_stride = payload.strides.back();
  p.scale = static_cast<const std::uint8_t*>(scale.data);
  p.scale_view = &scale;
  p.scale_contiguous = scale.is_contiguous();
  p.f16_scale = sd == DType::f16;
  p.family = c.family;
  v->dequantize_runs(c, x_shape, ss, p);
  p.out = out;
  kernels::parallel_for(numel / p.run, grain_for(p.run), threads,
                        [&](std::int64_t b, std::int64_t e) { kernels::dequantize_int8_runs(p, b, e); });
}

Tensor dequantize_int8(const Contract& c, const TensorView& payload, const TensorView& scale, const Shape& x_shape,
                       int threads) {
  Tensor out = Tensor::uninitialized(DType::f32, x_shape);
  dequantize_int8_into(c, payload, scale, x_shape, out.data<float>(), threads);
  return out;
}

}  // namespace qexact::fast
