// int8 per (b, head, token block) on (B, S, N, D) (contracts §3; presets int8.block.*).
// A block is token_block consecutive tokens of one (b, head) across all D channels. The tail
// block (S % token_block != 0) is reduced and quantized over its real tokens only, which is
// what zero-padding S, quantizing and slicing back gives: padded zeros never raise an amax.
#include <algorithm>
#include <string>
#include <vector>

#include "reference/int8_ref.hpp"
#include "reference/int8_steps.hpp"

namespace qexact::ref {
namespace {

struct BlockDims {
  std::int64_t batch, seq, heads, dim, token_block, blocks;

  std::int64_t flat(std::int64_t b, std::int64_t s, std::int64_t n, std::int64_t d) const {
    return ((b * seq + s) * heads + n) * dim + d;
  }
  std::int64_t first_token(std::int64_t blk) const { return blk * token_block; }
  std::int64_t end_token(std::int64_t blk) const { return std::min(seq, (blk + 1) * token_block); }
};

float block_abs_max(const BlockDims& g, const std::vector<float>& x, std::int64_t b, std::int64_t n, std::int64_t blk) {
  float amax = 0.0f;
  for (std::int64_t s = g.first_token(blk); s < g.end_token(blk); ++s)
    for (std::int64_t d = 0; d < g.dim; ++d)
      amax = int8::fold_abs_max(amax, x[static_cast<std::size_t>(g.flat(b, s, n, d))]);
  return amax;
}

void quantize_block(const Contract& c, const BlockDims& g, const std::vector<float>& x, const int8::QuotientOp& q,
                    std::int64_t b, std::int64_t n, std::int64_t blk, std::int8_t* payload) {
  for (std::int64_t s = g.first_token(blk); s < g.end_token(blk); ++s)
    for (std::int64_t d = 0; d < g.dim; ++d) {
      const auto i = static_cast<std::size_t>(g.flat(b, s, n, d));
      payload[i] = int8::quantize_element(c, q, x[i]);
    }
}

}  // namespace

QuantResult quantize_int8_block(const Contract& c, const TensorView& x) {
  int8::check_contract(c, Family::int8_block);
  const Shape ps = payload_shape(c, x.shape);
  const Shape ss = scale_shape(c, x.shape);
  const BlockDims g{x.shape[0], x.shape[1], x.shape[2], x.shape[3], c.token_block, ss[2]};
  const std::vector<float> values = to_f32_vector(x);
  int8::reject_nonfinite(values, "int8.block", [&](std::int64_t i) { return int8::bsnd_index(x.shape, i); });

  QuantResult r{int8::new_payload(ps), int8::new_scale(c, ss), "groupwise", {}};
  for (std::int64_t b = 0; b < g.batch; ++b)
    for (std::int64_t n = 0; n < g.heads; ++n)
      for (std::int64_t blk = 0; blk < g.blocks; ++blk) {
        const float amax = block_abs_max(g, values, b, n, blk);
        const int8::QuotientOp q = int8::scale_domain(c, amax, r.scale, (b * g.heads + n) * g.blocks + blk, x.dtype);
        quantize_block(c, g, values, q, b, n, blk, r.payload.data<std::int8_t>());
      }
  return r;
}

}  // namespace qexact::ref
