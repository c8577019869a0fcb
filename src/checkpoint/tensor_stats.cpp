// Chunks: every family but int8.block (and fp8.scaled head_block, cut the same way) quantizes
// each row of the last dimension on its own, so rows [u0, u1) of the (rows, K) flattening have
// their payload and scales at the offsets the contract gives a tensor of u0 rows, laid out as
// for a tensor of u1 - u0 rows — provided u0
// starts a 128-row tile for the padded and swizzled MX layouts (an M-row tile for fp8.scaled
// tile:MxN); fp8.scaled tensor's one scale is every chunk's. int8.block is cut along its
// first dimension (B), which its blocks never cross. Each chunk is dequantized on its own
// (one thread per chunk), and the chunks' sums are added in chunk order: the same numbers for
// any thread count.
#include "checkpoint/tensor_stats.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include "qexact/formats/bf16.hpp"
#include "qexact/formats/element.hpp"
#include "qexact/formats/fp16.hpp"

namespace qexact::checkpoint::detail {
namespace {

constexpr std::int64_t kChunkElements = 1 << 16;

enum class Code { max, below_max, min };

// An int8 payload of `shape` whose every element holds 127, 126 or -range: dequantized with the
// real scales it gives, per element, what the element's group can hold, whatever the layout.
TensorView code_payload(const Contract& c, const Shape& shape, Code which, Scratch& s) {
  if (s.codes_shape != shape) {
    for (auto& v : s.codes) v.clear();
    s.codes_shape = shape;
  }
  std::vector<std::int8_t>& p = s.codes[static_cast<int>(which)];
  if (p.empty()) {
    const auto q = static_cast<std::int8_t>(which == Code::min ? -c.range : which == Code::max ? 127 : 126);
    p.assign(static_cast<std::size_t>(shape_numel(shape)), q);
  }
  return make_view(DType::i8, shape, p.data());
}

// A contiguous run of f32, bf16 or f16 values, element i as double: the clamp test's loads.
struct F32Values {
  const float* x;
  double operator()(std::size_t i) const { return static_cast<double>(x[i]); }
};
struct Bf16Values {
  const std::uint16_t* x;
  double operator()(std::size_t i) const { return static_cast<double>(bf16_to_f32(x[i])); }
};
struct F16Values {
  const std::uint16_t* x;
  double operator()(std::size_t i) const { return static_cast<double>(f16_to_f32(x[i])); }
};

static_assert(std::endian::native == std::endian::little, "a word's first byte code is its lowest byte");
constexpr std::uint64_t kOnes = 0x0101010101010101ULL;

// An element is clamped when it lies beyond its group's largest magnitude (max * scale) by more
// than rounding to that value accounts for (half the last step, max - next smaller): an amax a
// hair above max * scale, from a scale rounded down, rounds to max and is not counted. `lo` is
// the most negative value per element, or null where it is -hi (every sign-magnitude MX format;
// int8 with range 127). Only an element that equals its largest or most negative value can be
// clamped: blocks are first scanned for one (f32 equality, a loop the compiler vectorises), and
// most have none.
template <class Values>
[[gnu::always_inline]] inline std::int64_t clamped_of(std::size_t n, const Values& x, const float* d, const float* h,
                                                      const float* b, const float* lo) {
  constexpr std::size_t kBlock = 64;
  std::int64_t count = 0;
  for (std::size_t i0 = 0; i0 < n; i0 += kBlock) {
    const std::size_t i1 = std::min(n, i0 + kBlock);
    int any = 0;
    if (lo)
      for (std::size_t i = i0; i < i1; ++i) any |= (d[i] == h[i]) | (d[i] == lo[i]);
    else
      for (std::size_t i = i0; i < i1; ++i) any |= (d[i] == h[i]) | (d[i] == -h[i]);
    if (any == 0) continue;
    for (std::size_t i = i0; i < i1; ++i) {
      const double xi = x(i), di = d[i], hi = h[i], li = lo ? lo[i] : -hi;
      if (di != hi && di != li) continue;
      const double half_step = (hi - static_cast<double>(b[i])) / 2;
      count += (hi > 0 && di == hi && xi > hi + half_step) || (li < 0 && di == li && xi < li - half_step);
    }
  }
  return count;
}

// A contiguous float view's values (F32Values, Bf16Values, F16Values) to `f`.
template <class F>
auto with_values(const TensorView& x, F f) -> decltype(f(F32Values{nullptr})) {
  switch (x.dtype) {
    case DType::f32: return f(F32Values{static_cast<const float*>(x.data)});
    case DType::bf16: return f(Bf16Values{static_cast<const std::uint16_t*>(x.data)});
    case DType::f16: return f(F16Values{static_cast<const std::uint16_t*>(x.data)});
    default: break;
  }
  throw std::logic_error("measure takes f32, bf16 or f16 values");
}

// The clamped elements of `x` (contiguous f32, bf16 or f16), see clamped_of.
std::int64_t value_clamped(const TensorView& x, const float* d, const float* h, const float* b, const float* lo) {
  const auto n = static_cast<std::size_t>(x.numel());
  return with_values(x, [&](const auto& load) { return clamped_of(n, load, d, h, b, lo); });
}

// The largest f32 at most v, and the smallest at least v: x > v and x > rounded_down(v) hold
// for the same f32 x (likewise x < v and x < rounded_up(v)), NaN kept.
float rounded_down(double v) {
  float f = static_cast<float>(v);
  if (static_cast<double>(f) > v) f = std::nextafter(f, -std::numeric_limits<float>::infinity());
  return f;
}
float rounded_up(double v) {
  float f = static_cast<float>(v);
  if (static_cast<double>(f) < v) f = std::nextafter(f, std::numeric_limits<float>::infinity());
  return f;
}

// An element whose value d equals hi (> 0) is clamped when x > hi + half_step; one whose d
// equals lo (< 0) when x < lo - half_step (clamped_of's rule, sides that cannot clamp NaN).
kernels::ClampBounds clamp_bounds(double hi, double lo, double half_step) {
  constexpr float kNone = std::numeric_limits<float>::quiet_NaN();
  kernels::ClampBounds b{kNone, kNone, kNone, kNone};
  if (hi > 0) b.hi = static_cast<float>(hi), b.above = rounded_down(hi + half_step);
  if (lo < 0) b.lo = static_cast<float>(lo), b.below = rounded_up(lo - half_step);
  return b;
}

// A floating-point format's bounds for a group whose largest code's value is ±hi: half the
// format's last step (max - below) at that scale, hi * step / (2 max), as the scan computes it.
kernels::ClampBounds largest_code_bounds(double hi, double max, double step) {
  return clamp_bounds(hi, -hi, hi * step / (2 * max));
}

Sums sums_of(const kernels::ErrorSums& e) {
  Sums s;
  s.signal = e.signal;
  s.noise = e.noise;
  s.clamped = e.clamped;
  return s;
}

// The signal and noise sums of `x` (contiguous f32, bf16 or f16) against `d`.
Sums value_sums(const TensorView& x, const float* d) {
  return sums_of(kernels::value_error_sums(x.dtype, x.data, x.numel(), d));
}

// The elements that share one int8 scale in a row: all of it for int8.token, `group` for
// int8.group; 0 for int8.block, whose scales run across rows.
std::int64_t int8_row_group(const Contract& c, std::int64_t k) {
  return c.family == Family::int8_token ? k : c.family == Family::int8_group ? c.group : 0;
}

// int8.token and int8.group with rows and groups of a multiple of 32 values and scales in rows
// (f32 or f16): the dequantized values decoded inside the sums (float(q) times the group's
// scale, one f32 multiply, as int8's dequantize) and clamping judged on each group's largest and
// most negative values, 127 * s and -range * s, with half of 127 * s - 126 * s as the rounding
// margin (the dequantize of payloads of those codes): no f32 copy of the chunk.
bool int8_decodes(const Contract& c, const TensorView& x, const TensorView& payload, const TensorView& scale) {
  const std::int64_t k = x.shape.back(), group = int8_row_group(c, k);
  return group > 0 && k % 32 == 0 && group % 32 == 0 && k % group == 0 && payload.dtype == DType::i8 &&
         (scale.dtype == DType::f32 || scale.dtype == DType::f16) && scale.numel() == x.numel() / group &&
         payload.numel() == x.numel();
}

Sums int8_decoded_sums(const Contract& c, const TensorView& x, const TensorView& payload, const TensorView& scale,
                       Scratch& scratch) {
  const std::int64_t k = x.shape.back(), group = int8_row_group(c, k);
  const auto groups = static_cast<std::size_t>(x.numel() / group);
  float* sc = scratch.values(scratch.scales, groups);
  if (scratch.bounds.size() < groups) scratch.bounds.resize(groups);
  const bool symmetric = c.range == 127;
  for (std::size_t g = 0; g < groups; ++g) {
    const float s = scale.dtype == DType::f16 ? f16_to_f32(static_cast<const std::uint16_t*>(scale.data)[g])
                                              : static_cast<const float*>(scale.data)[g];
    sc[g] = s;
    const float hf = 127.0f * s, bf = 126.0f * s, lf = symmetric ? -hf : static_cast<float>(-c.range) * s;
    scratch.bounds[g] = clamp_bounds(hf, lf, (static_cast<double>(hf) - static_cast<double>(bf)) / 2);
  }
  const kernels::CodedRows rows{kernels::ElementCode::int8, payload.data, sc, scratch.bounds.data(), x.numel() / k, k,
                                group, k / group};
  return sums_of(kernels::coded_error_sums(x.dtype, x.data, rows));
}

// int8: the largest and most negative values per element come from dequantizing payloads of
// 127, 126 and -range with the real scales. `x` contiguous.
Sums int8_chunk_sums(const Contract& c, const TensorView& x, const TensorView& payload, const TensorView& scale,
                     const TensorView&, Scratch& scratch) {
  if (!scratch.dequantize_always && int8_decodes(c, x, payload, scale))
    return int8_decoded_sums(c, x, payload, scale, scratch);
  const RunOptions one{Engine::fast, 1};
  const auto n = static_cast<std::size_t>(x.numel());
  const auto dequantized = [&](const TensorView& p, std::vector<float>& into) {
    float* v = scratch.values(into, n);
    dequantize_into(c, p, scale, make_mutable_view(DType::f32, x.shape, v), one);
    return v;
  };
  const float* d = dequantized(payload, scratch.d);
  const float* h = dequantized(code_payload(c, payload.shape, Code::max, scratch), scratch.hi);
  const float* b = dequantized(code_payload(c, payload.shape, Code::below_max, scratch), scratch.below);
  const bool symmetric = c.range == 127;
  const float* l = symmetric ? nullptr : dequantized(code_payload(c, payload.shape, Code::min, scratch), scratch.lo);
  Sums s = value_sums(x, d);
  s.clamped = value_clamped(x, d, h, b, l);
  return s;
}


// The lanes of `w` (eight byte codes, or sixteen 4-bit codes for `bits` 4) whose magnitude bits
// (`mask` in every lane) equal `max` (likewise): the high bit of each such lane set, every
// other bit clear (exact: no carry crosses a lane).
std::uint64_t max_magnitude_lanes(std::uint64_t w, unsigned bits, std::uint64_t mask, std::uint64_t max) {
  const std::uint64_t low = bits == 4 ? 0x7777777777777777ULL : kOnes * 0x7F;  // all but each lane's top bit
  const std::uint64_t t = (w & mask) ^ max;  // zero lanes where the magnitude is the largest
  return ~(((t & low) + low) | t | low);
}

// The element format of a payload of element codes (MX, fp8.scaled, nvfp4's E2M1).
ElemFormat code_format(const Contract& c) { return c.family == Family::nvfp4 ? ElemFormat::e2m1 : c.element; }

// Payloads of element codes (MX, fp8.scaled, nvfp4): an element equals its group's largest
// magnitude exactly when its code is the format's largest (the format is sign-magnitude), so
// only those are checked, with hi = |d| and half the last step hi * (max - below) / (2 max) —
// exact in double for MX's power-of-two scales wherever the group's values are f32 normals, to
// within the f32 rounding of q * s for fp8.scaled's and nvfp4's scales. Only the payload itself
// is dequantized. `x` contiguous; `tensor_scale` empty unless the contract has one.
// The row stride of an MX scale layout that keeps each row's groups together and in order
// (row-major, pairs, padded to 4), or 0 for the swizzled one.
std::size_t mx_scale_stride(ScaleLayout layout, std::size_t groups) {
  switch (layout) {
    case ScaleLayout::rowmajor: return groups;
    case ScaleLayout::pairs: return (groups + 1) / 2 * 2;
    case ScaleLayout::padded: return (groups + 3) / 4 * 4;
    case ScaleLayout::swizzled: return 0;
  }
  return 0;
}

// The MX dequantize's value of E8M0 scale byte b (255 is NaN, 0 is 2^-127).
float e8m0_value(std::uint8_t b) {
  if (b == 255) return std::bit_cast<float>(0x7FC00000u);
  return std::bit_cast<float>(b == 0 ? 0x00400000u : static_cast<std::uint32_t>(b) << 23);
}

// fp8.scaled by row, by group along the row, by tile or by tensor, with rows and domains of a
// multiple of 32 values: the sums of coded_error_sums (the codes decoded inside them, one f32
// multiply or division by the stored scale as the dequantize does, a zero domain's division
// giving 0 where the contract says so), or nothing where the chunk does not fit.
std::optional<kernels::ErrorSums> fp8_coded_rows(const Contract& c, const TensorView& x, const TensorView& payload,
                                                 const TensorView& scale, double step, Scratch& scratch) {
  const Granularity kind = c.granularity.kind;
  if (kind == Granularity::head_block || payload.dtype != DType::u8 || payload.numel() != x.numel() ||
      scale.dtype != DType::f32)
    return std::nullopt;
  const std::int64_t k = x.shape.back(), rows = x.numel() / k;
  const bool whole_rows = kind == Granularity::row || kind == Granularity::tensor;
  const std::int64_t group = whole_rows ? k : c.granularity.cols;
  const std::int64_t row_group = kind == Granularity::tile ? c.granularity.rows : kind == Granularity::tensor ? rows : 1;
  if (k % 32 != 0 || group <= 0 || group % 32 != 0 || k % group != 0 || row_group <= 0) return std::nullopt;
  const std::int64_t stride = k / group, scales = (rows + row_group - 1) / row_group * stride;
  if (scale.numel() < scales) return std::nullopt;
  // Stored descale: q * s; stored multiplier: q / s (as the dequantize).
  const bool times = (c.scale_kind == ScaleKind::descale) == (c.stored == StoredScale::computed);
  const bool zero_domains = c.zero_group == ZeroGroup::zero;
  const ElemTraits& t = elem_traits(c.element);
  const auto maxf = static_cast<float>(t.max);
  const auto* sc = static_cast<const float*>(scale.data);
  if (scratch.bounds.size() < static_cast<std::size_t>(scales)) scratch.bounds.resize(static_cast<std::size_t>(scales));
  for (std::int64_t g = 0; g < scales; ++g) {
    const float s = sc[g];
    // The largest code's value, as the dequantize forms it (a zero domain's 0: nothing clamps).
    const float top = times ? maxf * s : !zero_domains || s != 0.0f ? maxf / s : 0.0f;
    const double hi = std::fabs(static_cast<double>(top));
    scratch.bounds[static_cast<std::size_t>(g)] = largest_code_bounds(hi, t.max, step);
  }
  kernels::CodedRows coded{t.mbits == 3 ? kernels::ElementCode::e4m3 : kernels::ElementCode::e5m2,
                           payload.data, sc, scratch.bounds.data(), rows, k, group, stride};
  coded.row_group = row_group;
  coded.divide = !times;
  coded.zero_scale_gives_zero = zero_domains;
  return kernels::coded_error_sums(x.dtype, x.data, coded);
}

Sums code_chunk_sums(const Contract& c, const TensorView& x, const TensorView& payload, const TensorView& scale,
                     const TensorView& tensor_scale, Scratch& scratch) {
  const auto n = static_cast<std::size_t>(x.numel());
  const ElemFormat f = code_format(c);
  const ElemTraits& t = elem_traits(f);
  const auto k = static_cast<std::size_t>(x.shape.back());
  const std::size_t rows = n / k;
  // MX with byte or E2M1 codes, rows and blocks of a multiple of 32 values and a layout that keeps a
  // row's scales together: the dequantized values are decoded inside the sums and clamping is
  // judged there too (coded_error_sums); otherwise the chunk is dequantized to f32 first.
  const auto block = static_cast<std::size_t>(c.block);
  const std::size_t groups = (k + block - 1) / block;
  const std::size_t stride = c.family == Family::mx ? mx_scale_stride(c.layout, groups) : 0;
  const double max = t.max, step = max - static_cast<double>(elem_decode(f, static_cast<std::uint8_t>(t.max_code - 1)));
  const bool packed = f == ElemFormat::e2m1;
  // (Not ggml's MXFP4: its scale byte 255 is 2^128 and its nibbles pair j with j + 16.)
  const bool decodes = !scratch.dequantize_always && c.family == Family::mx && (t.bits == 8 || packed) &&
                       !c.scale_wrap && c.packing != Packing::halves &&
                       k % 32 == 0 && block % 32 == 0 && k % block == 0 && stride != 0 &&
                       payload.numel() * (packed ? 2 : 1) == x.numel() && scale.dtype == DType::u8 &&
                       static_cast<std::size_t>(scale.numel()) >= rows * stride;
  if (decodes) {
    const std::size_t scales = rows * stride;
    float* sc = scratch.values(scratch.scales, scales);
    if (scratch.bounds.size() < scales) scratch.bounds.resize(scales);
    // A group's scale and bounds depend on its scale byte alone: 256 of each, looked up.
    float byte_scale[256];
    kernels::ClampBounds byte_bounds[256];
    const auto maxf = static_cast<float>(t.max);
    for (unsigned b = 0; b < 256; ++b) {
      byte_scale[b] = e8m0_value(static_cast<std::uint8_t>(b));
      // The group's largest magnitude: the largest code's value times the scale, in f32 as the
      // dequantize forms it.
      const double hi = static_cast<double>(maxf * byte_scale[b]);
      byte_bounds[b] = largest_code_bounds(hi, max, step);
    }
    const auto* sb = static_cast<const std::uint8_t*>(scale.data);
    for (std::size_t g = 0; g < scales; ++g) {
      sc[g] = byte_scale[sb[g]];
      scratch.bounds[g] = byte_bounds[sb[g]];
    }
    const kernels::CodedRows coded{packed             ? kernels::ElementCode::e2m1
                                   : t.mbits == 3 ? kernels::ElementCode::e4m3
                                                  : kernels::ElementCode::e5m2,
                                   payload.data,
                                   sc,
                                   scratch.bounds.data(),
                                   static_cast<std::int64_t>(rows),
                                   static_cast<std::int64_t>(k),
                                   static_cast<std::int64_t>(block),
                                   static_cast<std::int64_t>(stride)};
    return sums_of(kernels::coded_error_sums(x.dtype, x.data, coded));
  }
  if (!scratch.dequantize_always && c.family == Family::fp8_scaled)
    if (const auto fp8 = fp8_coded_rows(c, x, payload, scale, step, scratch)) return sums_of(*fp8);
  const float* d = scratch.values(scratch.d, n);
  dequantize_into(c, payload, scale, tensor_scale, make_mutable_view(DType::f32, x.shape, scratch.d.data()),
                  RunOptions{Engine::fast, 1});
  Sums s = value_sums(x, d);
  const auto magnitude_mask = static_cast<unsigned>((1u << (t.bits - 1)) - 1);
  const auto* codes = static_cast<const std::uint8_t*>(payload.data);
  const std::size_t row_bytes = packed ? (k + 1) / 2 : k;
  s.clamped = with_values(x, [&](const auto& load) {
    std::int64_t clamped = 0;
    // Clamping needs a look only where the code is the format's largest magnitude: a scan of
    // the codes, a 64-bit word of them at a time, the values read only there.
    // A group's largest-code elements share hi, so the last half step is kept (a division
    // per element was most of the scan's time where many elements take the largest code, as
    // in FP4).
    double last_hi = -1, half_step = 0;
    const auto check = [&](std::size_t row, std::size_t j) {
      const std::size_t i = row * k + j;
      const double xi = load(i);
      const double di = d[i];
      const double hi = std::fabs(di);
      if (hi != last_hi) last_hi = hi, half_step = hi * step / (2 * max);
      if ((di > 0 && xi > hi + half_step) || (di < 0 && xi < -hi - half_step)) ++clamped;
    };
    // A word holds 8 byte codes or 16 packed 4-bit codes (element 2i in byte i's low nibble,
    // so lane n of the little-endian word is element n).
    const unsigned lane_bits = packed ? 4 : 8, per_word = 64 / lane_bits;
    const std::uint64_t ones = packed ? 0x1111111111111111ULL : kOnes;
    const std::uint64_t mask = ones * magnitude_mask, max_lanes = ones * t.max_code;
    for (std::size_t row = 0; row < rows; ++row) {
      const std::uint8_t* rc = codes + row * row_bytes;
      std::size_t j = 0;
      for (; j + per_word <= k; j += per_word) {
        std::uint64_t w;
        std::memcpy(&w, rc + j * lane_bits / 8, 8);
        for (std::uint64_t m = max_magnitude_lanes(w, lane_bits, mask, max_lanes); m != 0; m &= m - 1)
          check(row, j + static_cast<std::size_t>(std::countr_zero(m)) / lane_bits);
      }
      for (; j < k; ++j) {
        const unsigned code = packed ? (rc[j / 2] >> (4 * (j & 1))) & 0xFu : rc[j];
        if ((code & magnitude_mask) == t.max_code) check(row, j);
      }
    }
    return clamped;
  });
  return s;
}

const std::uint8_t* at(const Tensor& t, std::int64_t elements) {
  return static_cast<const std::uint8_t*>(t.raw()) + static_cast<std::size_t>(elements) * dtype_size(t.dtype());
}

}  // namespace

Shape Chunking::shape_of(std::int64_t u) const {
  Shape s = by_batch ? x : Shape{units, x.back()};
  s.front() = u;
  return s;
}

Chunking chunking(const Contract& c, const Shape& x) {
  Chunking k;
  k.x = x;
  const std::int64_t n = shape_numel(x);
  const bool fp8 = c.family == Family::fp8_scaled;
  k.by_batch = c.family == Family::int8_block || (fp8 && c.granularity.kind == Granularity::head_block);
  k.units = k.by_batch ? x.front() : n / x.back();
  k.unit = n / k.units;
  const bool tiled = c.family == Family::mx && (c.layout == ScaleLayout::padded || c.layout == ScaleLayout::swizzled);
  const std::int64_t align = tiled ? 128 : fp8 && c.granularity.kind == Granularity::tile ? c.granularity.rows : 1;
  k.whole_scale = fp8 && c.granularity.kind == Granularity::tensor;
  k.per_chunk = std::max<std::int64_t>(align, kChunkElements / k.unit / align * align);
  k.chunks = (k.units + k.per_chunk - 1) / k.per_chunk;
  return k;
}

Sums chunk_sums(const Contract& c, const TensorView& x, const TensorView& payload, const TensorView& scale,
                const TensorView& tensor_scale, Scratch& scratch) {
  const bool int8 = c.family == Family::int8_block || c.family == Family::int8_token || c.family == Family::int8_group;
  return int8 ? int8_chunk_sums(c, x, payload, scale, tensor_scale, scratch)
              : code_chunk_sums(c, x, payload, scale, tensor_scale, scratch);
}

void finish(const std::vector<Sums>& sums, std::int64_t n, TensorSummary& row) {
  Sums total;
  for (const Sums& s : sums) {
    total.signal += s.signal;
    total.noise += s.noise;
    total.clamped += s.clamped;
  }
  row.sqnr_db = total.noise == 0 ? std::numeric_limits<double>::infinity() : 10.0 * std::log10(total.signal / total.noise);
  row.saturated_pct = n == 0 ? 0 : 100.0 * static_cast<double>(total.clamped) / static_cast<double>(n);
}

void measure(const Contract& c, const TensorView& x, const QuantResult& r, const RunOptions& run, TensorSummary& row) {
  if (x.rank() == 0) throw std::logic_error("measure takes a tensor of rank >= 1");
  if (x.numel() == 0) return finish({}, 0, row);
  const Chunking ch = chunking(c, x.shape);
  std::vector<Sums> sums(static_cast<std::size_t>(ch.chunks));
  const auto* xbytes = static_cast<const std::uint8_t*>(x.data);
  // The tensor scale (nvfp4 amax) is one value for the whole tensor: each chunk takes it whole.
  const TensorView tensor_scale = r.tensor_scale.nbytes() > 0 ? r.tensor_scale.view() : TensorView{};

  // An exception may not leave an OpenMP region: the first one is carried out of it.
  std::exception_ptr error;
  const int threads = static_cast<int>(std::min<std::int64_t>(resolve_threads(run), ch.chunks));  // none idle
#pragma omp parallel num_threads(threads)
  {
  Scratch scratch;
#pragma omp for schedule(dynamic)
  for (std::int64_t k = 0; k < ch.chunks; ++k) try {
    const std::int64_t u0 = ch.first_unit(k), u1 = ch.end_unit(k);
    const Shape before = ch.shape_of(u0), shape = ch.shape_of(u1 - u0);
    const Shape pshape = payload_shape(c, shape), sshape = scale_shape(c, shape);
    const std::int64_t poff = shape_numel(payload_shape(c, before));
    const std::int64_t soff = ch.whole_scale ? 0 : shape_numel(scale_shape(c, before));
    if (poff + shape_numel(pshape) > r.payload.numel() || soff + shape_numel(sshape) > r.scale.numel())
      throw std::logic_error("a measuring chunk runs past the quantized tensor");
    sums[static_cast<std::size_t>(k)] =
        chunk_sums(c, make_view(x.dtype, shape, xbytes + static_cast<std::size_t>(u0 * ch.unit) * dtype_size(x.dtype)),
                   make_view(r.payload.dtype(), pshape, at(r.payload, poff)),
                   make_view(r.scale.dtype(), sshape, at(r.scale, soff)), tensor_scale, scratch);
  } catch (...) {
#pragma omp critical(qexact_measure_error)
    if (!error) error = std::current_exception();
  }
  }
  if (error) std::rethrow_exception(error);
  finish(sums, x.numel(), row);
}

}  // namespace qexact::checkpoint::detail
