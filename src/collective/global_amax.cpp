#include "collective/global_amax.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "collective/shard_quant.hpp"
#include "qexact/error.hpp"

namespace qexact::dist {
namespace {

constexpr std::uint32_t kMagnitude = 0x7FFFFFFFu;

// The first `rows` rows of a [rows + extra, ...] tensor, reshaped to `shape`.
Tensor leading_rows(const Tensor& t, std::int64_t rows, const Shape& shape) {
  Tensor out = slice_copy(t, 0, 0, rows);
  out.reshape(shape);
  return out;
}

}  // namespace

std::int32_t amax_key(const TensorView& x) {
  std::uint32_t key = 0;
  for (float v : to_f32_vector(x)) key = std::max(key, std::bit_cast<std::uint32_t>(v) & kMagnitude);
  return static_cast<std::int32_t>(key);
}

float amax_from_key(std::int32_t key) { return std::bit_cast<float>(static_cast<std::uint32_t>(key)); }

QuantResult quantize_with_tensor_amax(const Contract& c, const TensorView& x, float amax, const RunOptions& o) {
  if (!plan::has_tensor_amax(c))
    throw std::logic_error("quantize_with_tensor_amax: the contract's scales do not depend on a tensor amax");
  if (x.shape.empty()) throw std::logic_error("quantize_with_tensor_amax: a rank-0 shard");
  const std::int32_t key = static_cast<std::int32_t>(std::bit_cast<std::uint32_t>(amax) & kMagnitude);
  if (amax_key(x) > key) throw std::logic_error("quantize_with_tensor_amax: the amax is below the shard's own");
  if (!std::isfinite(amax) && c.nonfinite_input == NonFiniteInput::reject) {
    quantize(c, x, o);  // throws naming this shard's own non-finite element, if it holds one
    fail(ErrorKind::bad_argument, std::string("another rank's shard holds a non-finite element (the agreed amax is ") +
                                      (std::isnan(amax) ? "NaN" : "inf") + "), which the contract rejects");
  }

  const std::int64_t cols = x.shape.back();
  const std::int64_t rows = x.numel() / std::max<std::int64_t>(cols, 1);
  std::vector<float> extra(static_cast<std::size_t>(cols), 0.0f);
  extra.at(0) = amax_from_key(key);
  const Tensor row = from_f32_vector(extra, {1, cols}, x.dtype);
  if (amax_key(row.view()) != key)
    throw std::logic_error("quantize_with_tensor_amax: the amax is not a value of the input's dtype " +
                           std::string(dtype_name(x.dtype)));
  Tensor body = contiguous_copy(x);
  body.reshape({rows, cols});
  const Tensor y = concat({body.view(), row.view()}, 0);

  QuantResult r = quantize(c, y.view(), o);
  r.payload = leading_rows(r.payload, rows, payload_shape(c, x.shape));
  if (c.family == Family::nvfp4) r.scale = leading_rows(r.scale, rows, scale_shape(c, x.shape));  // per-row blocks
  return r;
}

}  // namespace qexact::dist
