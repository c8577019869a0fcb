// int8 per (head, channel) with a given (global) amax: qexact/int8_channel.hpp. The steps are
// those of int8.block.ascend (contracts §3: scale after the division, x / stored scale, RNE,
// range ±127) applied to a domain that spans the whole (b, s) extent.
#include <cmath>
#include <string>
#include <vector>

#include "qexact/int8_channel.hpp"
#include "reference/int8_steps.hpp"

namespace qexact {
namespace {

struct ChannelDims {
  std::int64_t batch, seq, heads, dim;
};

ChannelDims channel_dims(const TensorView& x, const char* op) {
  if (!is_float_dtype(x.dtype))
    fail(ErrorKind::bad_argument, std::string(op) + " takes f32, bf16 or f16 input, got " + dtype_name(x.dtype));
  if (x.rank() != 4)
    fail(ErrorKind::bad_argument, std::string(op) + " needs a (B, S, N, D) tensor, got shape " + shape_str(x.shape));
  return {x.shape[0], x.shape[1], x.shape[2], x.shape[3]};
}

std::vector<float> checked_values(const TensorView& x, const char* op) {
  std::vector<float> v = to_f32_vector(x);
  ref::int8::reject_nonfinite(v, op, [&](std::int64_t i) { return ref::int8::bsnd_index(x.shape, i); });
  return v;
}

// The contract whose steps a channel domain follows.
const Contract& channel_contract() {
  static const Contract c = make_preset("int8.block.ascend");
  return c;
}

}  // namespace

Tensor int8_channel_abs_max(const TensorView& x) {
  const char* op = "int8_channel_abs_max";
  const ChannelDims g = channel_dims(x, op);
  const std::vector<float> v = checked_values(x, op);
  Tensor amax(DType::f32, Shape{g.heads, g.dim});
  float* a = amax.data<float>();
  const std::int64_t per_token = g.heads * g.dim;
  for (std::int64_t t = 0; t < g.batch * g.seq; ++t)
    for (std::int64_t c = 0; c < per_token; ++c)
      a[c] = ref::int8::fold_abs_max(a[c], v[static_cast<std::size_t>(t * per_token + c)]);
  return amax;
}

QuantResult quantize_int8_channel(const TensorView& x, const TensorView& amax) {
  const char* op = "quantize_int8_channel";
  const ChannelDims g = channel_dims(x, op);
  if (amax.dtype != DType::f32 || amax.shape != Shape{g.heads, g.dim})
    fail(ErrorKind::bad_argument, std::string(op) + ": amax must be f32 of shape " + shape_str({g.heads, g.dim}) +
                                      ", got " + dtype_name(amax.dtype) + " " + shape_str(amax.shape));
  const std::vector<float> v = checked_values(x, op);
  const std::vector<float> a = to_f32_vector(amax);
  const Contract& c = channel_contract();
  const std::int64_t per_token = g.heads * g.dim;

  QuantResult r{ref::int8::new_payload(x.shape), Tensor(DType::f32, Shape{g.heads, g.dim}), "global_channel", {}};
  std::vector<ref::int8::QuotientOp> ops(static_cast<std::size_t>(per_token));
  for (std::int64_t ch = 0; ch < per_token; ++ch) {
    const float m = a[static_cast<std::size_t>(ch)];
    if (!(m >= 0.0f) || !std::isfinite(m))
      fail(ErrorKind::bad_argument, std::string(op) + ": amax must be finite and >= 0, got " + std::to_string(m) +
                                        " at (n " + std::to_string(ch / g.dim) + ", d " + std::to_string(ch % g.dim) +
                                        ")");
    ops[static_cast<std::size_t>(ch)] = ref::int8::scale_domain(c, m, r.scale, ch, x.dtype);
  }
  std::int8_t* q = r.payload.data<std::int8_t>();
  for (std::int64_t t = 0; t < g.batch * g.seq; ++t)
    for (std::int64_t ch = 0; ch < per_token; ++ch) {
      const auto i = static_cast<std::size_t>(t * per_token + ch);
      const float value = v[i];
      if (std::fabs(value) > a[static_cast<std::size_t>(ch)])
        fail(ErrorKind::bad_argument, std::string(op) + ": |x| at " +
                                          ref::int8::bsnd_index(x.shape, static_cast<std::int64_t>(i)) +
                                          " exceeds the given amax of its channel");
      q[i] = ref::int8::quantize_element(c, ops[static_cast<std::size_t>(ch)], value);
    }
  return r;
}

}  // namespace qexact
