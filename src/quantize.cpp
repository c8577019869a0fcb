// Public entry points: validate the contract, then route to the engine.
#include "qexact/quantize.hpp"

#include <cstdlib>
#include <cstring>
#include <omp.h>

#include "contracts/hif4_checks.hpp"
#include "kernels/cpu/fast.hpp"
#include "out_checks.hpp"
#include "qexact/pool.hpp"
#include "reference/reference.hpp"

namespace qexact {
namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
std::int64_t round_up(std::int64_t a, std::int64_t b) { return ceil_div(a, b) * b; }

void need_rank_at_least(const Shape& x, std::size_t r, const char* what) {
  if (x.size() < r)
    fail(ErrorKind::bad_argument, std::string(what) + " needs a tensor of rank >= " + std::to_string(r) +
                                      ", got shape " + shape_str(x));
}

Shape leading(const Shape& x) { return Shape(x.begin(), x.end() - 1); }

[[noreturn]] void not_a_quantizer(const Contract& c) {
  fail(ErrorKind::bad_argument, "'" + (c.preset.empty() ? std::string("pool.mean") : c.preset) +
                                    "' is a pooled mean, not a quantizer: it has no payload or scale "
                                    "(its one output is pooled_block_mean's)");
}

}  // namespace

Shape payload_shape(const Contract& c, const Shape& x) {
  switch (c.family) {
    case Family::mx: {
      need_rank_at_least(x, 1, "an MX contract");
      const std::int64_t k = x.back();
      if (c.tail == TailRule::reject && k % c.block != 0)
        fail(ErrorKind::bad_argument, "last dimension " + std::to_string(k) + " of shape " + shape_str(x) +
                                          " is not a multiple of the block " + std::to_string(c.block) +
                                          " (this contract has tail=reject)");
      Shape p = x;
      if (c.element == ElemFormat::e2m1) p.back() = ceil_div(k, 2);
      return p;
    }
    case Family::int8_block:
      if (x.size() != 4)
        fail(ErrorKind::bad_argument, "int8.block needs a (B, S, N, D) tensor, got shape " + shape_str(x));
      return x;
    case Family::int8_token:
      need_rank_at_least(x, 1, "int8.token");
      return x;
    case Family::int8_group:
      need_rank_at_least(x, 1, "int8.group");
      if (x.back() % c.group != 0)
        fail(ErrorKind::bad_argument, "last dimension " + std::to_string(x.back()) + " of shape " + shape_str(x) +
                                          " is not a multiple of the group " + std::to_string(c.group));
      return x;
    case Family::hif4:
      fail(ErrorKind::bad_argument, "hif4 has no quantize: use fake-quant or hif4-pack");
    case Family::pool:
      not_a_quantizer(c);
  }
  return x;
}

Shape scale_shape(const Contract& c, const Shape& x) {
  payload_shape(c, x);  // shape checks
  switch (c.family) {
    case Family::mx: {
      const std::int64_t g = ceil_div(x.back(), c.block);
      std::int64_t rows = 1;
      for (std::size_t i = 0; i + 1 < x.size(); ++i) rows *= x[i];
      Shape s = leading(x);
      switch (c.layout) {
        case ScaleLayout::pairs: s.push_back(ceil_div(g, 2)); s.push_back(2); return s;
        case ScaleLayout::rowmajor: s.push_back(g); return s;
        case ScaleLayout::padded: return Shape{round_up(rows, 128), round_up(g, 4)};
        case ScaleLayout::swizzled: return Shape{round_up(rows, 128) * round_up(g, 4)};
      }
      return s;
    }
    case Family::int8_block:
      return Shape{x[0], x[2], ceil_div(x[1], c.token_block)};
    case Family::int8_token:
      return leading(x);
    case Family::int8_group: {
      Shape s = leading(x);
      s.push_back(x.back() / c.group);
      return s;
    }
    case Family::hif4:
    case Family::pool:
      break;
  }
  return {};
}

const char* engine_name(Engine e) { return e == Engine::fast ? "fast" : "reference"; }

Engine parse_engine(const std::string& name) {
  if (name == "fast") return Engine::fast;
  if (name == "reference") return Engine::reference;
  fail(ErrorKind::bad_argument, "unknown engine '" + name + "' (fast, reference)");
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

QuantResult quantize(const Contract& c, const TensorView& x, const RunOptions& o) {
  validate(c);
  if (!is_float_dtype(x.dtype))
    fail(ErrorKind::bad_argument, std::string("quantize takes f32, bf16 or f16 input, got ") + dtype_name(x.dtype));
  const bool fast = o.engine == Engine::fast;
  const int t = resolve_threads(o);
  switch (c.family) {
    case Family::mx: return fast ? fast::quantize_mx(c, x, t) : ref::quantize_mx(c, x);
    case Family::int8_block: return fast ? fast::quantize_int8_block(c, x, t) : ref::quantize_int8_block(c, x);
    case Family::int8_token: return fast ? fast::quantize_int8_token(c, x, t) : ref::quantize_int8_token(c, x);
    case Family::int8_group: return fast ? fast::quantize_int8_group(c, x, t) : ref::quantize_int8_group(c, x);
    case Family::hif4: break;
    case Family::pool: not_a_quantizer(c);
  }
  fail(ErrorKind::bad_argument, "hif4 has no quantize: use fake-quant or hif4-pack");
}

namespace {

void check_dequantize_inputs(const Contract& c, const TensorView& payload, const TensorView& scale,
                             const Shape& x_shape) {
  validate(c);
  const Shape ps = payload_shape(c, x_shape);
  const Shape ss = scale_shape(c, x_shape);
  if (payload.shape != ps)
    fail(ErrorKind::bad_argument, "payload shape " + shape_str(payload.shape) + " does not match " + shape_str(ps) +
                                      " expected for input shape " + shape_str(x_shape));
  if (scale.shape != ss)
    fail(ErrorKind::bad_argument, "scale shape " + shape_str(scale.shape) + " does not match " + shape_str(ss) +
                                      " expected for input shape " + shape_str(x_shape));
}

}  // namespace

Tensor dequantize(const Contract& c, const TensorView& payload, const TensorView& scale, const Shape& x_shape,
                  const RunOptions& o) {
  check_dequantize_inputs(c, payload, scale, x_shape);
  const bool fast = o.engine == Engine::fast;
  const int t = resolve_threads(o);
  switch (c.family) {
    case Family::mx:
      return fast ? fast::dequantize_mx(c, payload, scale, x_shape, t) : ref::dequantize_mx(c, payload, scale, x_shape);
    case Family::int8_block:
    case Family::int8_token:
    case Family::int8_group:
      return fast ? fast::dequantize_int8(c, payload, scale, x_shape, t)
                  : ref::dequantize_int8(c, payload, scale, x_shape);
    case Family::hif4: break;
    case Family::pool: not_a_quantizer(c);
  }
  fail(ErrorKind::bad_argument, "hif4 has no dequantize: use hif4-unpack");
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

DType quantized_payload_dtype(const Contract& c) { return c.family == Family::mx ? DType::u8 : DType::i8; }
DType quantized_scale_dtype(const Contract& c) {
  if (c.family == Family::mx) return DType::u8;
  return c.scale_store == ScaleStore::f16 ? DType::f16 : DType::f32;
}

// The reference engine's result copied into a checked, contiguous output of the same bytes.
void copy_into(const Tensor& t, const MutableTensorView& out) {
  if (t.nbytes() > 0) std::memcpy(out.data, t.raw(), t.nbytes());
}

}  // namespace

std::string quantize_into(const Contract& c, const TensorView& x, const MutableTensorView& payload,
                          const MutableTensorView& scale, const RunOptions& o) {
  validate(c);
  if (!is_float_dtype(x.dtype))
    fail(ErrorKind::bad_argument, std::string("quantize takes f32, bf16 or f16 input, got ") + dtype_name(x.dtype));
  require_output(payload, quantized_payload_dtype(c), payload_shape(c, x.shape), "out payload");
  require_output(scale, quantized_scale_dtype(c), scale_shape(c, x.shape), "out scale");
  require_disjoint({{"out payload", payload.view()}, {"out scale", scale.view()}}, {{"x", x}});
  if (o.engine == Engine::reference) {
    const QuantResult r = quantize(c, x, o);
    copy_into(r.payload, payload);
    copy_into(r.scale, scale);
    return r.path;
  }
  const int t = resolve_threads(o);
  if (c.family == Family::mx)
    return fast::quantize_mx_into(c, x, static_cast<std::uint8_t*>(payload.data), static_cast<std::uint8_t*>(scale.data),
                                  t);
  return fast::quantize_int8_into(c, x, static_cast<std::int8_t*>(payload.data), scale.data, t);
}

void dequantize_into(const Contract& c, const TensorView& payload, const TensorView& scale,
                     const MutableTensorView& out, const RunOptions& o) {
  check_dequantize_inputs(c, payload, scale, out.shape);
  require_output(out, DType::f32, out.shape, "out");
  require_disjoint({{"out", out.view()}}, {{"payload", payload}, {"scale", scale}});
  if (o.engine == Engine::reference) return copy_into(dequantize(c, payload, scale, out.shape, o), out);
  const int t = resolve_threads(o);
  if (c.family == Family::mx) return fast::dequantize_mx_into(c, payload, scale, out.shape, static_cast<float*>(out.data), t);
  fast::dequantize_int8_into(c, payload, scale, out.shape, static_cast<float*>(out.data), t);
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
