// Chunks: every family but int8.block quantizes each row of the last dimension on its own, so
// rows [u0, u1) of the (rows, K) flattening have their payload and scales at the offsets the
// contract gives a tensor of u0 rows, laid out as for a tensor of u1 - u0 rows — provided u0
// starts a 128-row tile for the padded and swizzled MX layouts. int8.block is cut along its
// first dimension (B), which its blocks never cross. Each chunk is dequantized on its own
// (one thread per chunk), and the chunks' sums are added in chunk order: the same numbers for
// any thread count.
#include "checkpoint/tensor_stats.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <stdexcept>

#include "qexact/formats/bf16.hpp"
#include "qexact/formats/element.hpp"
#include "qexact/formats/fp16.hpp"

namespace qexact::checkpoint::detail {
namespace {

constexpr std::int64_t kChunkElements = 1 << 16;

enum class Code { max, below_max, min };

// A payload of `shape` whose every element holds the format's largest positive code, the next
// smaller one, or its most negative code: dequantized with the real scales it gives, per
// element, what the element's group can hold, whatever the scale layout.
Tensor code_payload(const Contract& c, const Shape& shape, Code which) {
  if (c.family == Family::mx) {
    const ElemTraits& t = elem_traits(c.element);
    const auto magnitude = static_cast<unsigned>(which == Code::below_max ? t.max_code - 1 : t.max_code);
    const auto code = static_cast<std::uint8_t>(magnitude | (which == Code::min ? 1u << (t.bits - 1) : 0u));
    const auto byte = static_cast<std::uint8_t>(c.element == ElemFormat::e2m1 ? code | (code << 4) : code);
    Tensor p(DType::u8, shape);
    std::fill(p.data<std::uint8_t>(), p.data<std::uint8_t>() + p.numel(), byte);
    return p;
  }
  const auto q = static_cast<std::int8_t>(which == Code::min ? -c.range : which == Code::max ? 127 : 126);
  Tensor p(DType::i8, shape);
  std::fill(p.data<std::int8_t>(), p.data<std::int8_t>() + p.numel(), q);
  return p;
}

struct Sums {
  double signal = 0, noise = 0;
  std::int64_t clamped = 0;
};

// An element is clamped when it lies beyond its group's largest magnitude (max * scale) by more
// than rounding to that value accounts for (half the last step, max - next smaller): an amax a
// hair above max * scale, from a scale rounded down, rounds to max and is not counted. `lo` is
// the most negative value per element, or null where it is -hi (every sign-magnitude MX format;
// int8 with range 127).
template <class Load>
Sums sums_of(std::size_t n, Load x, const float* d, const float* h, const float* b, const float* lo) {
  // Four interleaved partial sums: the additions of neighbours do not wait on each other, and
  // the order (hence the result) is fixed.
  constexpr std::size_t kLanes = 4;
  double signal[kLanes] = {}, noise[kLanes] = {};
  Sums s;
  for (std::size_t i = 0; i < n; ++i) {
    const double xi = x(i), di = d[i], hi_i = h[i], li = lo ? lo[i] : -static_cast<double>(h[i]);
    const double e = xi - di;
    signal[i % kLanes] += xi * xi;
    noise[i % kLanes] += e * e;
    if (di != hi_i && di != li) continue;
    const double half_step = (hi_i - static_cast<double>(b[i])) / 2;
    if ((hi_i > 0 && di == hi_i && xi > hi_i + half_step) || (li < 0 && di == li && xi < li - half_step)) ++s.clamped;
  }
  for (std::size_t k = 0; k < kLanes; ++k) {
    s.signal += signal[k];
    s.noise += noise[k];
  }
  return s;
}

// `x` contiguous.
Sums chunk_sums(const Contract& c, const TensorView& x, const TensorView& payload, const TensorView& scale) {
  const RunOptions one{Engine::fast, 1};
  const auto dequantized = [&](const TensorView& p) { return dequantize(c, p, scale, x.shape, one); };
  const Tensor dq = dequantized(payload);
  const Tensor hi = dequantized(code_payload(c, payload.shape, Code::max).view());
  const Tensor below = dequantized(code_payload(c, payload.shape, Code::below_max).view());
  const bool symmetric = c.family == Family::mx || c.range == 127;
  const Tensor lo = symmetric ? Tensor() : dequantized(code_payload(c, payload.shape, Code::min).view());
  const auto n = static_cast<std::size_t>(x.numel());
  const float* d = dq.data<float>();
  const float* h = hi.data<float>();
  const float* b = below.data<float>();
  const float* l = symmetric ? nullptr : lo.data<float>();
  switch (x.dtype) {
    case DType::f32: {
      const auto* v = static_cast<const float*>(x.data);
      return sums_of(n, [v](std::size_t i) { return static_cast<double>(v[i]); }, d, h, b, l);
    }
    case DType::bf16: {
      const auto* v = static_cast<const std::uint16_t*>(x.data);
      return sums_of(n, [v](std::size_t i) { return static_cast<double>(bf16_to_f32(v[i])); }, d, h, b, l);
    }
    case DType::f16: {
      const auto* v = static_cast<const std::uint16_t*>(x.data);
      return sums_of(n, [v](std::size_t i) { return static_cast<double>(f16_to_f32(v[i])); }, d, h, b, l);
    }
    default: break;
  }
  throw std::logic_error("measure takes f32, bf16 or f16 values");
}

const std::uint8_t* at(const Tensor& t, std::int64_t elements) {
  return static_cast<const std::uint8_t*>(t.raw()) + static_cast<std::size_t>(elements) * dtype_size(t.dtype());
}

}  // namespace

void measure(const Contract& c, const TensorView& x, const QuantResult& r, const RunOptions& run, TensorSummary& row) {
  if (x.rank() == 0) throw std::logic_error("measure takes a tensor of rank >= 1");
  const std::int64_t n = x.numel();
  if (n == 0) {
    row.sqnr_db = std::numeric_limits<double>::infinity();
    row.saturated_pct = 0;
    return;
  }
  // A tensor as `units` units of `unit` elements each: the shape of u units is unit_shape(u).
  const bool by_batch = c.family == Family::int8_block;
  const std::int64_t units = by_batch ? x.shape.front() : n / x.shape.back();
  const std::int64_t unit = n / units;
  const auto shape_of = [&](std::int64_t u) {
    Shape s = by_batch ? x.shape : Shape{units, x.shape.back()};
    s.front() = u;
    return s;
  };
  const bool tiled = c.family == Family::mx && (c.layout == ScaleLayout::padded || c.layout == ScaleLayout::swizzled);
  const std::int64_t align = tiled ? 128 : 1;
  const std::int64_t per_chunk = std::max<std::int64_t>(align, kChunkElements / unit / align * align);
  const std::int64_t chunks = (units + per_chunk - 1) / per_chunk;
  std::vector<Sums> sums(static_cast<std::size_t>(chunks));
  const auto* xbytes = static_cast<const std::uint8_t*>(x.data);

  // An exception may not leave an OpenMP region: the first one is carried out of it.
  std::exception_ptr error;
#pragma omp parallel for schedule(dynamic) num_threads(resolve_threads(run))
  for (std::int64_t k = 0; k < chunks; ++k) try {
    const std::int64_t u0 = k * per_chunk, u1 = std::min(units, u0 + per_chunk);
    const Shape before = shape_of(u0), shape = shape_of(u1 - u0);
    const Shape pshape = payload_shape(c, shape), sshape = scale_shape(c, shape);
    const std::int64_t poff = shape_numel(payload_shape(c, before)), soff = shape_numel(scale_shape(c, before));
    if (poff + shape_numel(pshape) > r.payload.numel() || soff + shape_numel(sshape) > r.scale.numel())
      throw std::logic_error("a measuring chunk runs past the quantized tensor");
    sums[static_cast<std::size_t>(k)] =
        chunk_sums(c, make_view(x.dtype, shape, xbytes + static_cast<std::size_t>(u0 * unit) * dtype_size(x.dtype)),
                   make_view(r.payload.dtype(), pshape, at(r.payload, poff)),
                   make_view(r.scale.dtype(), sshape, at(r.scale, soff)));
  } catch (...) {
#pragma omp critical(qexact_measure_error)
    if (!error) error = std::current_exception();
  }
  if (error) std::rethrow_exception(error);
  Sums total;
  for (const Sums& s : sums) {
    total.signal += s.signal;
    total.noise += s.noise;
    total.clamped += s.clamped;
  }
  row.sqnr_db = total.noise == 0 ? std::numeric_limits<double>::infinity() : 10.0 * std::log10(total.signal / total.noise);
  row.saturated_pct = 100.0 * static_cast<double>(total.clamped) / static_cast<double>(n);
}

}  // namespace qexact::checkpoint::detail
