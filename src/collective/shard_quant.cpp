#include "collective/shard_quant.hpp"

#include <algorithm>
#include <cstring>
#include <set>
#include <stdexcept>
#include <string>

#include "contracts/ceil_div.hpp"
#include "contracts/family_table.hpp"
#include "contracts/scale_grain.hpp"
#include "qexact/error.hpp"

namespace qexact::dist {
namespace {

std::int64_t product(const Shape& s, std::size_t from, std::size_t to) {
  std::int64_t p = 1;
  for (std::size_t i = from; i < to; ++i) p *= s[i];
  return p;
}

// The scale element of payload byte `flat` (its scale tensor's C-order index): the byte's first
// element (a packed E2M1 byte holds two along the last axis), that element's domain in the family
// row's grain, and MX's pairs layout, which pads each row's groups to an even count.
std::int64_t scale_element_of_payload_byte(const Contract& c, const ScaleGrain& g, const Shape& full,
                                           std::int64_t row_bytes, std::int64_t flat) {
  const std::int64_t k = full.back();
  const std::int64_t per_byte = row_bytes == k ? 1 : 2;
  const std::int64_t domain = grain_scale_index(g, full, (flat / row_bytes) * k + (flat % row_bytes) * per_byte);
  if (c.layout != ScaleLayout::pairs) return domain;
  const std::int64_t groups = ceil_div(k, g.cols);
  return domain / groups * 2 * ceil_div(groups, 2) + domain % groups;
}

}  // namespace

TensorView slice_view(const TensorView& v, int axis, std::int64_t start, std::int64_t length) {
  TensorView s = v;
  const auto a = static_cast<std::size_t>(axis);
  if (start < 0 || length < 0 || start + length > v.shape[a])
    throw std::logic_error("slice_view: [" + std::to_string(start) + ", " + std::to_string(start + length) +
                           ") outside axis of length " + std::to_string(v.shape[a]));
  s.shape[a] = length;
  s.data = static_cast<const std::uint8_t*>(v.data) +
           start * v.strides[a] * static_cast<std::int64_t>(dtype_size(v.dtype));
  return s;
}

std::vector<std::uint8_t> slice_bytes(const Tensor& t, int axis, std::int64_t start, std::int64_t length) {
  const auto a = static_cast<std::size_t>(axis);
  const Shape& shape = t.shape();
  if (start < 0 || length < 0 || start + length > shape[a])
    throw std::logic_error("slice_bytes: [" + std::to_string(start) + ", " + std::to_string(start + length) +
                           ") outside axis of length " + std::to_string(shape[a]));
  const std::int64_t outer = product(shape, 0, a);
  const std::int64_t row = product(shape, a + 1, shape.size()) * static_cast<std::int64_t>(dtype_size(t.dtype()));
  std::vector<std::uint8_t> out(static_cast<std::size_t>(outer * length * row));
  const auto* src = static_cast<const std::uint8_t*>(t.raw());
  for (std::int64_t o = 0; o < outer; ++o)
    std::memcpy(out.data() + o * length * row, src + (o * shape[a] + start) * row, static_cast<std::size_t>(length * row));
  return out;
}

Tensor slice_copy(const Tensor& t, int axis, std::int64_t start, std::int64_t length) {
  Shape shape = t.shape();
  shape[static_cast<std::size_t>(axis)] = length;
  Tensor out(t.dtype(), shape);
  const std::vector<std::uint8_t> bytes = slice_bytes(t, axis, start, length);
  std::memcpy(out.raw(), bytes.data(), bytes.size());
  return out;
}

Tensor concat(const std::vector<TensorView>& parts, int axis) {
  if (parts.empty()) throw std::logic_error("concat of nothing");
  const auto a = static_cast<std::size_t>(axis);
  Shape shape = parts[0].shape;
  shape[a] = 0;
  for (const TensorView& p : parts) {
    Shape other = p.shape;
    other[a] = 0;
    Shape mine = shape;
    mine[a] = 0;
    if (p.dtype != parts[0].dtype || other != mine)
      throw std::logic_error("concat: part " + shape_str(p.shape) + " does not fit " + shape_str(parts[0].shape));
    shape[a] += p.shape[a];
  }
  Tensor out(parts[0].dtype, shape);
  const std::int64_t outer = product(shape, 0, a);
  const auto esize = static_cast<std::int64_t>(dtype_size(out.dtype()));
  auto* dst = static_cast<std::uint8_t*>(out.raw());
  std::vector<Tensor> copies;
  for (const TensorView& p : parts) copies.push_back(contiguous_copy(p));
  for (std::int64_t o = 0; o < outer; ++o)
    for (const Tensor& t : copies) {
      const std::int64_t chunk = product(t.shape(), a, t.shape().size()) * esize;
      std::memcpy(dst, static_cast<const std::uint8_t*>(t.raw()) + o * chunk, static_cast<std::size_t>(chunk));
      dst += chunk;
    }
  return out;
}

QuantPiece quantize_on_global_grid(const Contract& c, const Shape& full, const TensorView& local, int axis,
                                   std::int64_t offset, const RunOptions& o) {
  const ScaleAxis sa = scale_axis_along(c, full, axis);
  const std::int64_t length = local.shape[static_cast<std::size_t>(axis)];
  const std::int64_t e = sa.elements_per_scale;
  const std::int64_t head = std::min(length, (e - offset % e) % e);  // rows before the first global domain edge

  const PieceGeometry g = piece_geometry(c, full, axis, offset, length);
  QuantPiece piece;
  piece.scale_first = g.scale_first;
  if (head == 0 || head == length) {
    QuantResult r = quantize(c, local, o);
    piece.payload = std::move(r.payload);
    piece.scale = std::move(r.scale);
  } else {
    const QuantResult first = quantize(c, slice_view(local, axis, 0, head), o);
    const QuantResult rest = quantize(c, slice_view(local, axis, head, length - head), o);
    piece.payload = concat({first.payload.view(), rest.payload.view()}, axis);
    piece.scale = concat({first.scale.view(), rest.scale.view()}, sa.scale_axis);
  }
  if (piece.payload.shape() != g.payload || piece.scale.shape() != g.scale)
    throw std::logic_error("quantize_on_global_grid: piece shapes " + shape_str(piece.payload.shape()) + " / " +
                           shape_str(piece.scale.shape()) + " differ from the geometry " + shape_str(g.payload) +
                           " / " + shape_str(g.scale));
  return piece;
}

QuantResult assemble_pieces(const Contract& c, const Shape& full, int axis, const std::vector<QuantPiece>& pieces) {
  const ScaleAxis sa = scale_axis_along(c, full, axis);
  std::vector<TensorView> payloads;
  for (const QuantPiece& p : pieces) payloads.push_back(p.payload.view());
  QuantResult r;
  r.payload = concat(payloads, axis);
  r.path = "assembled";

  const Shape ss = scale_shape(c, full);
  r.scale = Tensor(pieces.at(0).scale.dtype(), ss);
  const auto a = static_cast<std::size_t>(sa.scale_axis);
  const std::int64_t outer = product(ss, 0, a);
  const std::int64_t inner_bytes = product(ss, a + 1, ss.size()) * static_cast<std::int64_t>(dtype_size(r.scale.dtype()));
  std::vector<bool> filled(static_cast<std::size_t>(ss[a]), false);
  auto* dst = static_cast<std::uint8_t*>(r.scale.raw());
  for (const QuantPiece& p : pieces) {
    const std::int64_t n = p.scale.shape()[a];
    const auto* src = static_cast<const std::uint8_t*>(p.scale.raw());
    for (std::int64_t j = 0; j < n; ++j) {
      const std::int64_t g = p.scale_first + j;
      if (g >= ss[a]) throw std::logic_error("assemble_pieces: a piece's scale index lies past the full tensor");
      if (filled[static_cast<std::size_t>(g)]) continue;
      filled[static_cast<std::size_t>(g)] = true;
      for (std::int64_t o = 0; o < outer; ++o)
        std::memcpy(dst + (o * ss[a] + g) * inner_bytes, src + (o * n + j) * inner_bytes,
                    static_cast<std::size_t>(inner_bytes));
    }
  }
  if (std::find(filled.begin(), filled.end(), false) != filled.end())
    throw std::logic_error("assemble_pieces: the pieces do not cover every scale index");
  return r;
}

BlockMap contract_blocks(const Contract& c, const Shape& full, int axis, std::vector<std::int64_t> boundaries) {
  const ScaleAxis sa = scale_axis_along(c, full, axis);
  const Shape ss = scale_shape(c, full);
  const auto a = static_cast<std::size_t>(sa.scale_axis);
  const std::int64_t inner = product(ss, a + 1, ss.size());
  const std::int64_t scale_esize = plan::scale_element_bytes(c, full);
  const std::int64_t length = full[static_cast<std::size_t>(axis)];
  BlockMap m;
  m.blocks = shape_numel(ss);
  const ScaleGrain grain = family_traits(c.family).grain(c);
  const std::int64_t row_bytes = payload_shape(c, full).back();
  m.block_of_payload_byte = [=](std::int64_t flat) {
    return scale_element_of_payload_byte(c, grain, full, row_bytes, flat);
  };
  m.block_of_scale_byte = [=](std::int64_t byte) { return byte / scale_esize; };
  const std::int64_t e = sa.elements_per_scale;
  m.straddles = [=](std::int64_t block) {
    if (sa.scales_per_index > 1) return false;  // each index holds whole domains
    const std::int64_t index = (block / inner) % ss[a];
    const std::int64_t lo = index * e, hi = std::min(length, lo + e);
    for (std::int64_t p : boundaries)
      if (lo < p && p < hi) return true;
    return false;
  };
  return m;
}

Drift compare_quantized(const QuantResult& got, const QuantResult& want, const BlockMap& blocks) {
  auto check_same_form = [](const Tensor& g, const Tensor& w, const char* what) {
    if (g.dtype() != w.dtype() || g.shape() != w.shape())
      throw std::logic_error(std::string("compare_quantized: the assembled ") + what + " is " + dtype_name(g.dtype()) +
                             " " + shape_str(g.shape()) + ", the reference " + dtype_name(w.dtype()) + " " +
                             shape_str(w.shape()));
  };
  check_same_form(got.payload, want.payload, "payload");
  check_same_form(got.scale, want.scale, "scale");
  if (got.tensor_scale.nbytes() > 0 || want.tensor_scale.nbytes() > 0)
    check_same_form(got.tensor_scale, want.tensor_scale, "tensor scale");
  Drift d;
  std::set<std::int64_t> differing;
  auto count = [&](const Tensor& g, const Tensor& w, std::int64_t& total, std::int64_t& diff,
                   const std::function<std::int64_t(std::int64_t)>& block_of) {
    const auto* x = static_cast<const std::uint8_t*>(g.raw());
    const auto* y = static_cast<const std::uint8_t*>(w.raw());
    total = static_cast<std::int64_t>(g.nbytes());
    for (std::size_t i = 0; i < g.nbytes(); ++i)
      if (x[i] != y[i]) {
        ++diff;
        differing.insert(block_of(static_cast<std::int64_t>(i)));
      }
  };
  count(got.payload, want.payload, d.payload_bytes, d.payload_differing, blocks.block_of_payload_byte);
  count(got.scale, want.scale, d.scale_bytes, d.scale_differing, blocks.block_of_scale_byte);
  if (want.tensor_scale.nbytes() > 0) {
    if (!blocks.block_of_tensor_scale_byte)
      throw std::logic_error("compare_quantized: a tensor scale without a block map for it");
    std::int64_t total = 0;
    count(got.tensor_scale, want.tensor_scale, total, d.scale_differing, blocks.block_of_tensor_scale_byte);
    d.scale_bytes += total;
  }
  d.differing_blocks.assign(differing.begin(), differing.end());
  for (std::int64_t b : d.differing_blocks) d.straddling_blocks += blocks.straddles(b);
  for (std::int64_t b = 0; b < blocks.blocks; ++b) d.straddling_total += blocks.straddles(b);
  return d;
}

}  // namespace qexact::dist
