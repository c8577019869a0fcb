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

// The signal (sum of x^2) and noise (sum of (x - d)^2) of n elements, in kPartials = 32
// interleaved partial sums (element i adds to partial i mod 32, except that the elements after
// the last multiple of 8 add to partial 0; the partials then added pairwise: p[l] += p[l + 16],
// then + 8, + 4, + 2, + 1): the order, hence the result, is fixed, and no addition waits on its
// neighbour's — four independent 8-lane chains per sum, so the adds run at the machine's
// throughput, not one add's latency. The partials are four vectors of the compiler's vector
// extension, compiled for the machine's widest registers where the compiler can pick them at
// run time (x86-64 GCC and Clang: target clones; one zmm register each, two ymm or four xmm):
// each lane's operations and their order are the same on every target, and IEEE in each (no
// contraction), so the result is too.
constexpr std::size_t kLanes = 8;
using V8d = double __attribute__((vector_size(8 * sizeof(double))));
using V8f = float __attribute__((vector_size(8 * sizeof(float))));
using V8u32 = std::uint32_t __attribute__((vector_size(8 * sizeof(std::uint32_t))));
using V8u16 = std::uint16_t __attribute__((vector_size(8 * sizeof(std::uint16_t))));
using V8i8 = std::int8_t __attribute__((vector_size(8)));

static_assert(std::endian::native == std::endian::little, "a word's first byte code is its lowest byte");
constexpr std::uint64_t kOnes = 0x0101010101010101ULL;
using V8i32 = std::int32_t __attribute__((vector_size(8 * sizeof(std::int32_t))));

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define QEXACT_STATS_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define QEXACT_STATS_CLONES
#endif

// A contiguous run of f32, bf16 or f16 values: `(i)` is element i as double, `load8(i, v)` the
// elements [i, i + 8) as f32 into v (an out-parameter: a vector returned by value would change
// the ABI between targets).
struct F32Values {
  const float* x;
  double operator()(std::size_t i) const { return static_cast<double>(x[i]); }
  void load8(std::size_t i, V8f& v) const { std::memcpy(&v, x + i, sizeof v); }
};
struct Bf16Values {
  const std::uint16_t* x;
  double operator()(std::size_t i) const { return static_cast<double>(bf16_to_f32(x[i])); }
  void load8(std::size_t i, V8f& v) const {
    V8u16 h;
    std::memcpy(&h, x + i, sizeof h);
    const V8u32 w = __builtin_convertvector(h, V8u32) << 16;  // bf16 is the top half of an f32
    std::memcpy(&v, &w, sizeof v);
  }
};
struct F16Values {
  const std::uint16_t* x;
  double operator()(std::size_t i) const { return static_cast<double>(f16_to_f32(x[i])); }
  void load8(std::size_t i, V8f& v) const {
    for (std::size_t l = 0; l < kLanes; ++l) v[l] = f16_to_f32(x[i + l]);
  }
};

constexpr std::size_t kChains = 4, kPartials = kChains * kLanes;

// Element [i, i + 8)'s terms into one chain; `dv` the eight dequantized values.
template <class Values>
[[gnu::always_inline]] inline void add8(const Values& x, std::size_t i, const V8f& dv, V8d& sig, V8d& noi) {
  V8f xf;
  x.load8(i, xf);
  const V8d xv = __builtin_convertvector(xf, V8d), e = xv - __builtin_convertvector(dv, V8d);
  sig += xv * xv;
  noi += e * e;
}

// Each sum's four chains, partials [8c, 8c + 8) in s<c> and n<c>: named, not an array, so that
// they stay in registers (an array indexed in a loop is kept in memory, and every add then
// waits on a store and a load as well).
struct Chains {
  V8d s0{}, s1{}, s2{}, s3{}, n0{}, n1{}, n2{}, n3{};
};

// Elements [i, i + 32), element i + 8c + l to partial 8c + l; get8(i, dv) the dequantized
// values of [i, i + 8).
template <class Values, class Get>
[[gnu::always_inline]] inline void add32(const Values& x, std::size_t i, const Get& get8, Chains& ch) {
  V8f d0, d1, d2, d3;
  get8(i, d0);
  get8(i + kLanes, d1);
  get8(i + 2 * kLanes, d2);
  get8(i + 3 * kLanes, d3);
  add8(x, i, d0, ch.s0, ch.n0);
  add8(x, i + kLanes, d1, ch.s1, ch.n1);
  add8(x, i + 2 * kLanes, d2, ch.s2, ch.n2);
  add8(x, i + 3 * kLanes, d3, ch.s3, ch.n3);
}

// The 32 partials of each sum, plus `tail`'s additions to partial 0, added pairwise.
template <class Tail>
[[gnu::always_inline]] inline Sums reduce(const Chains& ch, const Tail& tail) {
  double sl[kPartials], nl[kPartials];
  static_assert(sizeof(Chains) == 2 * sizeof sl);
  std::memcpy(sl, &ch, sizeof sl);                              // s0 .. s3
  std::memcpy(nl, reinterpret_cast<const char*>(&ch) + sizeof sl, sizeof nl);  // n0 .. n3
  tail(sl[0], nl[0]);
  for (std::size_t w = kPartials / 2; w > 0; w /= 2)
    for (std::size_t l = 0; l < w; ++l) {
      sl[l] += sl[l + w];
      nl[l] += nl[l + w];
    }
  Sums s;
  s.signal = sl[0];
  s.noise = nl[0];
  return s;
}

template <class Values>
[[gnu::always_inline]] inline Sums lane_sums(std::size_t n, const Values& x, const float* d) {
  Chains ch;
  const auto get8 = [d](std::size_t i, V8f& dv) { std::memcpy(&dv, d + i, sizeof dv); };
  std::size_t i = 0;
  for (; i + kPartials <= n; i += kPartials) add32(x, i, get8, ch);
  // Up to three whole 8-element blocks after the last 32: chains 0, 1, 2 in turn.
  const auto block = [&](V8d& sig, V8d& noi) {
    if (i + kLanes > n) return false;
    V8f dv;
    get8(i, dv);
    add8(x, i, dv, sig, noi);
    i += kLanes;
    return true;
  };
  if (block(ch.s0, ch.n0) && block(ch.s1, ch.n1)) block(ch.s2, ch.n2);
  return reduce(ch, [&](double& sig, double& noi) {
    for (; i < n; ++i) {
      const double xi = x(i), e = xi - static_cast<double>(d[i]);
      sig += xi * xi;
      noi += e * e;
    }
  });
}

// The same sums where the dequantized values are decoded on the fly instead of read from an f32
// copy: `rows` rows of k elements, k a multiple of 32 (so every row starts at partial 0 and has
// neither 8-element blocks after its last 32 nor a tail: the order is lane_sums' over the rows
// laid end to end). decode8(row, j, dv) gives the values of elements [j, j + 8) of the row,
// bit for bit what the family's dequantize gives.
template <class Values, class Decode>
[[gnu::always_inline]] inline Sums decoded_sums(std::size_t rows, std::size_t k, const Values& x, const Decode& decode8) {
  Chains ch;
  for (std::size_t row = 0; row < rows; ++row) {
    const auto get8 = [&decode8, row, first = row * k](std::size_t i, V8f& dv) { decode8(row, i - first, dv); };
    for (std::size_t j = 0; j < k; j += kPartials) add32(x, row * k + j, get8, ch);
  }
  return reduce(ch, [](double&, double&) {});
}

// MX byte codes (E4M3, E5M2) in rows of k: the code's f32 value from a 256-entry table
// (elem_decode, NaN as the canonical quiet NaN) times the group's E8M0 scale, one f32 multiply:
// the MX dequantize's operations. `block` a multiple of 8. (Decoding the codes on their bits
// with vector operations instead of the table was measured slower here: 653 against 464
// samples of the sums on the same run.)
struct MxDecode {
  const float* table;  // [256]
  const std::uint8_t* codes;
  const float* scales;  // [rows * stride], decoded
  std::size_t k, block, stride;
  [[gnu::always_inline]] void operator()(std::size_t row, std::size_t j, V8f& dv) const {
    const std::uint8_t* c = codes + row * k + j;
    float v[kLanes];
    for (std::size_t l = 0; l < kLanes; ++l) v[l] = table[c[l]];
    std::memcpy(&dv, v, sizeof dv);
    dv = dv * scales[row * stride + j / block];
  }
};

// int8.token: float(q) times the row's scale, one f32 multiply, as int8's dequantize.
struct Int8RowDecode {
  const std::int8_t* codes;
  const float* scales;  // [rows]
  std::size_t k;
  [[gnu::always_inline]] void operator()(std::size_t row, std::size_t j, V8f& dv) const {
    V8i8 q;
    std::memcpy(&q, codes + row * k + j, sizeof q);
    // Through int32: GCC converts int8 lanes to float one by one, int32 lanes as one vector.
    dv = __builtin_convertvector(__builtin_convertvector(q, V8i32), V8f) * scales[row];
  }
};

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

QEXACT_STATS_CLONES Sums lane_sums_f32(std::size_t n, const float* x, const float* d) {
  return lane_sums(n, F32Values{x}, d);
}
QEXACT_STATS_CLONES Sums lane_sums_bf16(std::size_t n, const std::uint16_t* x, const float* d) {
  return lane_sums(n, Bf16Values{x}, d);
}
QEXACT_STATS_CLONES Sums lane_sums_f16(std::size_t n, const std::uint16_t* x, const float* d) {
  return lane_sums(n, F16Values{x}, d);
}
// decoded_sums for Decode's values, one clone set per input type: name_f32, name_bf16, name_f16.
#define QEXACT_DECODED_SUMS(name, Decode)                                                        \
  QEXACT_STATS_CLONES Sums name##_f32(std::size_t rows, const float* x, const Decode& d) {        \
    return decoded_sums(rows, d.k, F32Values{x}, d);                                             \
  }                                                                                              \
  QEXACT_STATS_CLONES Sums name##_bf16(std::size_t rows, const std::uint16_t* x, const Decode& d) { \
    return decoded_sums(rows, d.k, Bf16Values{x}, d);                                            \
  }                                                                                              \
  QEXACT_STATS_CLONES Sums name##_f16(std::size_t rows, const std::uint16_t* x, const Decode& d) { \
    return decoded_sums(rows, d.k, F16Values{x}, d);                                             \
  }
QEXACT_DECODED_SUMS(mx_sums, MxDecode)
QEXACT_DECODED_SUMS(int8_sums, Int8RowDecode)
#undef QEXACT_DECODED_SUMS

QEXACT_STATS_CLONES std::int64_t clamped_f32(std::size_t n, const float* x, const float* d, const float* h,
                                             const float* b, const float* lo) {
  return clamped_of(n, F32Values{x}, d, h, b, lo);
}
QEXACT_STATS_CLONES std::int64_t clamped_bf16(std::size_t n, const std::uint16_t* x, const float* d, const float* h,
                                              const float* b, const float* lo) {
  return clamped_of(n, Bf16Values{x}, d, h, b, lo);
}
QEXACT_STATS_CLONES std::int64_t clamped_f16(std::size_t n, const std::uint16_t* x, const float* d, const float* h,
                                             const float* b, const float* lo) {
  return clamped_of(n, F16Values{x}, d, h, b, lo);
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

// Calls the form of a per-dtype function (f32, bf16, f16: each a target_clones function, hence
// three names) that fits the dtype of `x` (contiguous), with `n` and x's data first.
template <class R, class... A, class... Args>
R by_input_dtype(const TensorView& x, std::size_t n, R (*f32)(std::size_t, const float*, A...),
                 R (*bf16)(std::size_t, const std::uint16_t*, A...), R (*f16)(std::size_t, const std::uint16_t*, A...),
                 Args&&... args) {
  switch (x.dtype) {
    case DType::f32: return f32(n, static_cast<const float*>(x.data), std::forward<Args>(args)...);
    case DType::bf16: return bf16(n, static_cast<const std::uint16_t*>(x.data), std::forward<Args>(args)...);
    case DType::f16: return f16(n, static_cast<const std::uint16_t*>(x.data), std::forward<Args>(args)...);
    default: break;
  }
  throw std::logic_error("measure takes f32, bf16 or f16 values");
}

// The signal and noise sums of `x` (contiguous f32, bf16 or f16) against `d`.
Sums value_sums(const TensorView& x, const float* d) {
  return by_input_dtype(x, static_cast<std::size_t>(x.numel()), lane_sums_f32, lane_sums_bf16, lane_sums_f16, d);
}

// The clamped elements of `x` (contiguous f32, bf16 or f16), see clamped_of.
std::int64_t value_clamped(const TensorView& x, const float* d, const float* h, const float* b, const float* lo) {
  return by_input_dtype(x, static_cast<std::size_t>(x.numel()), clamped_f32, clamped_bf16, clamped_f16, d, h, b, lo);
}

// The sums of `x` (contiguous f32, bf16 or f16; rows of d.k) against values decoded by `d`.
template <class Decode>
Sums decoded_value_sums(const TensorView& x, const Decode& d, Sums (*f32)(std::size_t, const float*, const Decode&),
                        Sums (*bf16)(std::size_t, const std::uint16_t*, const Decode&),
                        Sums (*f16)(std::size_t, const std::uint16_t*, const Decode&)) {
  return by_input_dtype(x, static_cast<std::size_t>(x.numel()) / d.k, f32, bf16, f16, d);
}

// int8.token with rows of a multiple of 32 values and its scales in rows (f32 or f16): the
// dequantized values decoded inside the sums (Int8RowDecode) and the clamp test on each row's
// largest and most negative values, 127 * s, 126 * s and -range * s (f32 multiplies, as the
// dequantize of payloads of those codes gives them): no f32 copy of the chunk.
bool int8_decodes(const Contract& c, const TensorView& x, const TensorView& payload, const TensorView& scale) {
  const std::int64_t k = x.shape.back();
  return c.family == Family::int8_token && k % static_cast<std::int64_t>(kPartials) == 0 && payload.dtype == DType::i8 &&
         (scale.dtype == DType::f32 || scale.dtype == DType::f16) && scale.numel() == x.numel() / k &&
         payload.numel() == x.numel();
}

Sums int8_decoded_sums(const Contract& c, const TensorView& x, const TensorView& payload, const TensorView& scale,
                       Scratch& scratch) {
  const auto k = static_cast<std::size_t>(x.shape.back());
  const auto rows = static_cast<std::size_t>(x.numel()) / k;
  float* sc = scratch.values(scratch.hi, rows);
  for (std::size_t r = 0; r < rows; ++r)
    if (scale.dtype == DType::f16) sc[r] = f16_to_f32(static_cast<const std::uint16_t*>(scale.data)[r]);
    else sc[r] = static_cast<const float*>(scale.data)[r];
  const auto* q = static_cast<const std::int8_t*>(payload.data);
  const Int8RowDecode dec{q, sc, k};
  Sums s = decoded_value_sums<Int8RowDecode>(x, dec, int8_sums_f32, int8_sums_bf16, int8_sums_f16);
  const bool symmetric = c.range == 127;
  const auto lo_code = static_cast<std::int8_t>(-c.range);  // -127 where symmetric: -(127 * s)
  s.clamped = with_values(x, [&](const auto& load) {
    std::int64_t count = 0;
    constexpr std::size_t kBlock = 64;
    for (std::size_t r = 0; r < rows; ++r) {
      const float sr = sc[r], hf = 127.0f * sr, bf = 126.0f * sr,
                  lf = symmetric ? -hf : static_cast<float>(-c.range) * sr;
      const std::int8_t* qr = q + r * k;
      // With a finite non-zero scale and finite extremes, q * s (|q| <= 128) equals 127 * s or
      // -range * s only for that code (neighbouring products differ by |s|, far more than
      // their rounding can close), so the blocks are scanned on the codes; otherwise (a zero,
      // infinite or NaN scale, or an extreme that overflows) on the products.
      const bool by_code = sr != 0 && std::isfinite(hf) && std::isfinite(lf);
      for (std::size_t j0 = 0; j0 < k; j0 += kBlock) {
        const std::size_t j1 = std::min(k, j0 + kBlock);
        int any = 0;
        if (by_code)
          for (std::size_t j = j0; j < j1; ++j) any |= (qr[j] == 127) | (qr[j] == lo_code);
        else
          for (std::size_t j = j0; j < j1; ++j) {
            const float d = static_cast<float>(qr[j]) * sr;
            any |= (d == hf) | (d == lf);
          }
        if (any == 0) continue;
        for (std::size_t j = j0; j < j1; ++j) {
          const float df = static_cast<float>(qr[j]) * sr;
          const double xi = load(r * k + j), di = df, hi = hf, li = lf;
          if (di != hi && di != li) continue;
          const double half_step = (hi - static_cast<double>(bf)) / 2;
          count += (hi > 0 && di == hi && xi > hi + half_step) || (li < 0 && di == li && xi < li - half_step);
        }
      }
    }
    return count;
  });
  return s;
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


// The bytes of `w` (eight byte codes) whose magnitude bits (`mask8`) equal `max8`: the high bit
// of each such byte set, every other bit clear (exact: no carry crosses a byte).
std::uint64_t max_magnitude_bytes(std::uint64_t w, std::uint64_t mask8, std::uint64_t max8) {
  constexpr std::uint64_t kLow7 = kOnes * 0x7F;
  const std::uint64_t t = (w & mask8) ^ max8;  // zero bytes where the magnitude is the largest
  return ~(((t & kLow7) + kLow7) | t | kLow7);
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

Sums code_chunk_sums(const Contract& c, const TensorView& x, const TensorView& payload, const TensorView& scale,
                     const TensorView& tensor_scale, Scratch& scratch) {
  const auto n = static_cast<std::size_t>(x.numel());
  const ElemFormat f = code_format(c);
  const ElemTraits& t = elem_traits(f);
  const auto k = static_cast<std::size_t>(x.shape.back());
  const std::size_t rows = n / k;
  // MX with byte codes, rows of a multiple of 32 values, blocks of a multiple of 8 and a layout
  // that keeps a row's scales together: the dequantized values are decoded inside the sums
  // (MxDecode), never stored; otherwise the chunk is dequantized to f32 first.
  const auto block = static_cast<std::size_t>(c.block);
  const std::size_t groups = (k + block - 1) / block;
  const std::size_t stride = c.family == Family::mx ? mx_scale_stride(c.layout, groups) : 0;
  const bool decodes = !scratch.dequantize_always && c.family == Family::mx && t.bits == 8 && k % kPartials == 0 &&
                       block % kLanes == 0 && stride != 0 && payload.numel() == x.numel() &&
                       scale.dtype == DType::u8 && static_cast<std::size_t>(scale.numel()) >= rows * stride;
  float* d = nullptr;
  float table[256];
  const float* scales = nullptr;
  Sums s;
  if (decodes) {
    for (unsigned code = 0; code < 256; ++code) {
      const float v = elem_decode(f, static_cast<std::uint8_t>(code));
      table[code] = v != v ? std::bit_cast<float>(0x7FC00000u) : v;
    }
    float* sc = scratch.values(scratch.hi, rows * stride);
    const auto* sb = static_cast<const std::uint8_t*>(scale.data);
    for (std::size_t i = 0; i < rows * stride; ++i) sc[i] = e8m0_value(sb[i]);
    scales = sc;
    const MxDecode dec{table, static_cast<const std::uint8_t*>(payload.data), sc, k, block, stride};
    s = decoded_value_sums<MxDecode>(x, dec, mx_sums_f32, mx_sums_bf16, mx_sums_f16);
  } else {
    d = scratch.values(scratch.d, n);
    dequantize_into(c, payload, scale, tensor_scale, make_mutable_view(DType::f32, x.shape, d), RunOptions{Engine::fast, 1});
    s = value_sums(x, d);
  }
  const double max = t.max, step = max - static_cast<double>(elem_decode(f, static_cast<std::uint8_t>(t.max_code - 1)));
  const auto magnitude_mask = static_cast<unsigned>((1u << (t.bits - 1)) - 1);
  const auto* codes = static_cast<const std::uint8_t*>(payload.data);
  const bool packed = f == ElemFormat::e2m1;
  const std::size_t row_bytes = packed ? (k + 1) / 2 : k;
  s.clamped = with_values(x, [&](const auto& load) {
    std::int64_t clamped = 0;
    // Clamping needs a look only where the code is the format's largest magnitude: a scan of
    // the codes, eight byte codes a word at a time, the values read only there.
    const auto check = [&](std::size_t row, std::size_t j) {
      const std::size_t i = row * k + j;
      const double xi = load(i);
      const double di = d ? d[i] : static_cast<double>(table[codes[i]] * scales[row * stride + j / block]);
      const double hi = std::fabs(di), half_step = hi * step / (2 * max);
      if ((di > 0 && xi > hi + half_step) || (di < 0 && xi < -hi - half_step)) ++clamped;
    };
    const std::uint64_t mask8 = kOnes * magnitude_mask, max8 = kOnes * t.max_code;
    for (std::size_t row = 0; row < rows; ++row) {
      const std::uint8_t* rc = codes + row * row_bytes;
      std::size_t j = 0;
      if (!packed)
        for (; j + 8 <= k; j += 8) {
          std::uint64_t w;
          std::memcpy(&w, rc + j, 8);
          for (std::uint64_t m = max_magnitude_bytes(w, mask8, max8); m != 0; m &= m - 1)
            check(row, j + static_cast<std::size_t>(std::countr_zero(m)) / 8);
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
