#include "quantize_with_amax.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "contracts/family_table.hpp"
#include "kernels/family_kernels.hpp"
#include "plan/shard_domain.hpp"
#include "qexact/error.hpp"
#include "qexact/formats/bf16.hpp"
#include "qexact/formats/fp16.hpp"

namespace qexact {
namespace {

constexpr std::uint32_t kMagnitude = 0x7FFFFFFFu;

void require_float(const TensorView& x) {
  if (!is_float_dtype(x.dtype))
    fail(ErrorKind::bad_argument, std::string("the tensor amax needs an f32, bf16 or f16 tensor, got ") + dtype_name(x.dtype));
}

// Calls f(bytes, count) for each run of the last axis, in C order: one pointer per row when the
// last axis is contiguous (every shard and chunk view here), else over a contiguous copy.
template <class F>
void for_each_row(const TensorView& x, F&& f) {
  const std::int64_t cols = x.shape.empty() ? 1 : x.shape.back();
  const std::int64_t rows = cols == 0 ? 0 : x.numel() / cols;
  const auto es = static_cast<std::int64_t>(dtype_size(x.dtype));
  if (!x.shape.empty() && x.strides.back() != 1 && cols > 1) {
    const Tensor copy = contiguous_copy(x);
    for_each_row(copy.view(), f);
    return;
  }
  const auto* base = static_cast<const std::uint8_t*>(x.data);
  for (std::int64_t r = 0; r < rows; ++r) f(base + x.offset_of(r * cols) * es, cols);
}

// The largest sign-cleared bit pattern of a run of W-bit IEEE values: the largest magnitude,
// NaN above inf. Sixteen independent maxima over fixed-length blocks, so that the compiler's
// -O2 vectoriser takes the loop (one running maximum is a serial chain).
template <class U>
U max_magnitude_bits(const std::uint8_t* p, std::int64_t n, U mask) {
  constexpr std::int64_t kLanes = 16;
  U lanes[kLanes] = {};
  U block[kLanes];
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    std::memcpy(block, p + i * static_cast<std::int64_t>(sizeof(U)), sizeof block);
    for (std::int64_t l = 0; l < kLanes; ++l) lanes[l] = std::max<U>(lanes[l], static_cast<U>(block[l] & mask));
  }
  U most = 0;
  for (U l : lanes) most = std::max(most, l);
  for (; i < n; ++i) {
    U v;
    std::memcpy(&v, p + i * static_cast<std::int64_t>(sizeof(U)), sizeof(U));
    most = std::max<U>(most, static_cast<U>(v & mask));
  }
  return most;
}

// The first `rows` rows of a contiguous [rows + extra, ...] result, reshaped to `shape`.
Tensor leading_rows(const Tensor& t, const Shape& shape) {
  Tensor out = Tensor::uninitialized(t.dtype(), shape);
  std::memcpy(out.raw(), t.raw(), out.nbytes());
  return out;
}

// The fast kernels take the agreed amax as an argument: x is read once, never copied.
QuantResult quantize_fast_with_amax(const Contract& c, const TensorView& x, float amax, int threads) {
  const auto with_amax = family_kernels(c, "quantize").fast_quantize_with_amax;
  if (!with_amax) throw std::logic_error("quantize_with_tensor_amax: the family has no tensor amax");
  const std::vector<OutputSpec> specs = output_specs(c, x.shape);
  QuantResult r;
  r.payload = Tensor::uninitialized(specs[0].dtype, specs[0].shape);
  r.scale = Tensor::uninitialized(specs[1].dtype, specs[1].shape);
  if (specs.size() > 2) r.tensor_scale = Tensor::uninitialized(specs[2].dtype, specs[2].shape);
  const QuantOutputs out{r.payload.mutable_view(), r.scale.mutable_view(), r.tensor_scale.mutable_view()};
  r.path = with_amax(c, x, out, amax, threads);
  return r;
}

}  // namespace

std::int32_t amax_key(const TensorView& x) {
  require_float(x);
  // Magnitude bits order the same way in every IEEE width, and widening to fp32 keeps the order:
  // the maximum is taken on x's own bits and widened once.
  float most = 0.0f;
  if (x.dtype == DType::f32) {
    std::uint32_t m = 0;
    for_each_row(x, [&](const std::uint8_t* p, std::int64_t n) { m = std::max(m, max_magnitude_bits<std::uint32_t>(p, n, kMagnitude)); });
    most = std::bit_cast<float>(m);
  } else {
    std::uint16_t m = 0;
    for_each_row(x, [&](const std::uint8_t* p, std::int64_t n) {
      m = std::max(m, max_magnitude_bits<std::uint16_t>(p, n, 0x7FFFu));
    });
    most = x.dtype == DType::bf16 ? bf16_to_f32(m) : f16_to_f32(m);
  }
  return static_cast<std::int32_t>(std::bit_cast<std::uint32_t>(most) & kMagnitude);
}

float amax_from_key(std::int32_t key) { return std::bit_cast<float>(static_cast<std::uint32_t>(key)); }

QuantResult quantize_with_tensor_amax(const Contract& c, const TensorView& x, float amax, const RunOptions& o) {
  require_float(x);
  if (!plan::has_tensor_amax(c))
    throw std::logic_error("quantize_with_tensor_amax: the contract's scales do not depend on a tensor amax");
  if (x.shape.empty()) throw std::logic_error("quantize_with_tensor_amax: a rank-0 shard");
  const std::uint32_t key = std::bit_cast<std::uint32_t>(amax) & kMagnitude;
  if (static_cast<std::uint32_t>(amax_key(x)) > key)
    throw std::logic_error("quantize_with_tensor_amax: the amax is below the shard's own");
  if (!std::isfinite(amax) && c.nonfinite_input == NonFiniteInput::reject) {
    quantize(c, x, o);  // throws naming this shard's own non-finite element, if it holds one
    fail(ErrorKind::bad_argument, std::string("another rank's shard holds a non-finite element (the agreed amax is ") +
                                      (std::isnan(amax) ? "NaN" : "inf") + "), which the contract rejects");
  }

  const float a = std::bit_cast<float>(key);
  if (x.dtype != DType::f32 && !std::isnan(a)) {
    const float back = x.dtype == DType::bf16 ? bf16_to_f32(f32_to_bf16(a)) : f16_to_f32(f32_to_f16(a));
    if (back != a)  // an amax agreed on values of this dtype always is one
      throw std::logic_error(std::string("quantize_with_tensor_amax: the amax is not a value of ") + dtype_name(x.dtype));
  }
  if (o.engine == Engine::fast && x.numel() > 0) return quantize_fast_with_amax(c, x, a, resolve_threads(o));

  // The reference engine takes the amax from its input: the [R, C] view of x, then one row
  // [amax, 0, ..., 0] in x's dtype.
  const std::int64_t cols = x.shape.back();
  const std::int64_t rows = cols == 0 ? 0 : x.numel() / cols;
  const auto es = static_cast<std::size_t>(dtype_size(x.dtype));
  Tensor y = Tensor::uninitialized(x.dtype, {rows + 1, cols});
  auto* dst = static_cast<std::uint8_t*>(y.raw());
  for_each_row(x, [&](const std::uint8_t* p, std::int64_t n) {
    std::memcpy(dst, p, static_cast<std::size_t>(n) * es);
    dst += static_cast<std::size_t>(n) * es;
  });
  std::memset(dst, 0, static_cast<std::size_t>(cols) * es);
  if (x.dtype == DType::f32) {
    std::memcpy(dst, &a, es);
  } else {
    const std::uint16_t h = x.dtype == DType::bf16 ? f32_to_bf16(a) : f32_to_f16(a);
    std::memcpy(dst, &h, es);
  }

  QuantResult r = quantize(c, y.view(), o);
  r.payload = leading_rows(r.payload, payload_shape(c, x.shape));
  // Block scales beside the tensor scale lie in x's rows (nvfp4); fp8.scaled's one scale is whole.
  if (plan::amax_sets_tensor_scale(c)) r.scale = leading_rows(r.scale, scale_shape(c, x.shape));
  return r;
}

}  // namespace qexact
