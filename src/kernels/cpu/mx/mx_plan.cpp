#include "kernels/cpu/mx/mx_plan.hpp"

#include <array>
#include <bit>
#include <cmath>
#include <utility>
#include <vector>

namespace qexact::kernels {
namespace {

// For each fp32 biased exponent e, the smallest bits in [2^(e-127), 2^(e-126)) whose log2,
// rounded to fp32, is already the integer e - 126 (torch.log2 on an fp32 tensor), or ~0 when
// none is. Found by walking down from the top of the binade with the double-precision log2.
std::array<std::uint32_t, 256> build_log2_up_from() {
  std::array<std::uint32_t, 256> t{};
  t.fill(~0u);
  for (int e = 1; e < 255; ++e) {
    const int k = e - 126;
    if (k == 0) continue;  // log2 of 1 - 2^-24 is resolved in fp32
    std::uint32_t bits = (static_cast<std::uint32_t>(e) << 23) | 0x7FFFFFu;
    std::uint32_t lowest = ~0u;
    while ((bits >> 23) == static_cast<std::uint32_t>(e)) {
      const float l = static_cast<float>(std::log2(static_cast<double>(std::bit_cast<float>(bits))));
      if (l != static_cast<float>(k)) break;
      lowest = bits--;
    }
    t[static_cast<std::size_t>(e)] = lowest;
  }
  return t;
}

// For each fp32 biased exponent e in 1..254, the smallest bits of [2^(e-127), 2^(e-126)) whose
// log2, rounded to fp32, is above the integer e - 127 (ceil(torch.log2(d)) is then e - 126);
// at 0 the same for the subnormal band [2^-127, 2^-126). Found by bisection on the bits with the
// double-precision log2: the rounded log2 grows with d.
std::array<std::uint32_t, 256> build_log2_above_from() {
  std::array<std::uint32_t, 256> t{};
  const auto rounded_log2 = [](std::uint32_t bits) {
    return static_cast<float>(std::log2(static_cast<double>(std::bit_cast<float>(bits))));
  };
  for (int e = 0; e < 255; ++e) {
    const std::uint32_t base = e == 0 ? 0x00400000u : static_cast<std::uint32_t>(e) << 23;
    const float k = static_cast<float>(e == 0 ? -127 : e - 127);
    std::uint32_t lo = base, hi = e == 0 ? 0x00800000u : base + 0x00800000u;  // rounded_log2(lo) == k
    while (hi - lo > 1) {
      const std::uint32_t mid = lo + (hi - lo) / 2;
      if (rounded_log2(mid) > k) hi = mid;
      else lo = mid;
    }
    t[static_cast<std::size_t>(e)] = hi;
  }
  return t;
}

// Each element format's value per code, 0 .. 2^bits - 1 (the rest 0).
std::array<std::array<float, 256>, 5> build_code_values() {
  std::array<std::array<float, 256>, 5> t{};
  for (ElemFormat f : {ElemFormat::e4m3, ElemFormat::e5m2, ElemFormat::e2m3, ElemFormat::e3m2, ElemFormat::e2m1})
    for (unsigned code = 0; code < (1u << elem_traits(f).bits); ++code)
      t[static_cast<std::size_t>(f)][code] = elem_decode(f, static_cast<std::uint8_t>(code));
  return t;
}

}  // namespace

MxPlan make_mx_plan(const Contract& c, const TensorView& x, std::uint8_t* payload, std::uint8_t* scale) {
  static const std::array<std::uint32_t, 256> log2_up_from = build_log2_up_from();
  static const std::array<std::uint32_t, 256> log2_above_from = build_log2_above_from();
  const ElemTraits& t = elem_traits(c.element);
  MxPlan p;
  p.element = c.element;
  p.elem_bits = t.bits;
  p.mbits = t.mbits;
  p.bias = t.bias;
  p.emax = t.emax;
  p.max_code = t.max_code;
  p.has_nan = t.has_nan;
  p.has_inf = t.has_inf;
  p.fp4 = c.element == ElemFormat::e2m1;
  p.rule = c.scale_rule;
  p.log2_fp32 = c.log2_fp32;
  p.ratio_reciprocal = c.ratio == RatioOp::reciprocal;
  p.round_mbits = c.round_mbits < 0 ? t.mbits : c.round_mbits;
  p.max_value = t.max;
  p.inv_max_value = 1.0f / t.max;
  p.log2_up_from = log2_up_from.data();
  p.log2_above_from = log2_above_from.data();
  static const std::array<std::array<float, 256>, 5> code_values = build_code_values();
  p.code_values = code_values[static_cast<std::size_t>(c.element)].data();
  // A format without NaN codes one by a fixed code (0 or XLA's 0x8), but triton's saturating
  // packing keeps the sign of the NaN it packs.
  p.nan_keeps_sign = (t.has_nan && (c.nonfinite == NonFiniteRule::byte0_nan || c.nonfinite == NonFiniteRule::ct ||
                                    c.nonfinite == NonFiniteRule::xla)) ||
                     c.nonfinite == NonFiniteRule::triton;
  p.nan_code = t.has_nan                                ? 0x7F
               : c.nonfinite == NonFiniteRule::xla    ? 1 << (t.bits - 1)
               : c.nonfinite == NonFiniteRule::triton ? t.max_code
                                                      : 0;
  p.ftz = c.ftz;
  p.batch_min_byte = c.ftz ? 32 : 1;
  p.scale_wrap = c.scale_wrap;
  p.finite_products = c.finite_products;
  for (int byte = 240; c.finite_products && byte < 256; ++byte) {
    // Codes 0..max_code grow in magnitude: the cap is the last whose product stays below 2^128.
    int cap = 0;
    for (int code = 0; code <= t.max_code; ++code)
      if (std::ldexp(static_cast<double>(elem_decode(c.element, static_cast<std::uint8_t>(code))), byte - 127) <
          std::ldexp(1.0, 128))
        cap = code;
    p.product_cap[byte - 240] = static_cast<std::uint8_t>(cap);
  }
  if (c.quotient_arith == QuotientArith::input) {
    // bf16: RNE at bit 16 of the fp32 bits sends 0x8000 (2^-134, a tie) and below to 0; f16: 2^-25
    // (a tie with 0) and below.
    p.rounds_to_zero_below = x.dtype == DType::bf16 ? 0x00008000u : x.dtype == DType::f16 ? 0x33000000u : 0u;
    p.canonical_nan = x.dtype == DType::bf16;
  }
  p.rounding = c.rounding;
  p.overflow = c.overflow;
  p.nonfinite = c.nonfinite;
  p.byte0 = c.byte0;
  p.signed_zero = c.signed_zero;
  p.prequant_bf16 = c.prequant == Prequant::bf16;
  p.block = c.block;
  p.layout = c.layout;
  p.packing_halves = c.packing == Packing::halves;

  p.dtype = x.dtype;
  p.data = static_cast<const std::uint8_t*>(x.data);
  p.view = &x;
  p.k = x.shape.back();
  p.rows = p.k == 0 ? 0 : x.numel() / p.k;
  p.groups = (p.k + c.block - 1) / c.block;
  p.col_stride = x.strides.back();
  // Rows are regular when the leading dimensions (ignoring those of size 1) collapse into one
  // stride; otherwise each row's start is computed from the view.
  std::vector<std::pair<std::int64_t, std::int64_t>> lead;  // (size, stride)
  for (int i = 0; i + 1 < x.rank(); ++i)
    if (x.shape[static_cast<std::size_t>(i)] > 1)
      lead.emplace_back(x.shape[static_cast<std::size_t>(i)], x.strides[static_cast<std::size_t>(i)]);
  p.rows_regular = true;
  p.row_stride = lead.empty() ? 0 : lead.back().second;
  for (std::size_t j = 0; j + 1 < lead.size(); ++j)
    if (lead[j].second != lead[j + 1].second * lead[j + 1].first) p.rows_regular = false;
  p.payload = payload;
  p.payload_row_bytes = p.fp4 ? (p.k + 1) / 2 : p.k;
  p.scale = scale;
  return p;
}

std::int64_t mx_scale_offset(const MxPlan& p, std::int64_t row, std::int64_t group) {
  switch (p.layout) {
    case ScaleLayout::pairs: return row * ((p.groups + 1) / 2 * 2) + group;
    case ScaleLayout::rowmajor: return row * p.groups + group;
    case ScaleLayout::padded: return row * ((p.groups + 3) / 4 * 4) + group;
    case ScaleLayout::swizzled: {
      // cuBLAS / torchao to_blocked: 128 x 4 tiles, row-block major; inside a tile the row
      // splits into (r % 32, r / 32) and lands at (r % 32) * 16 + (r / 32) * 4 + column.
      const std::int64_t tile = (row >> 7) * ((p.groups + 3) >> 2) + (group >> 2);
      const std::int64_t r = row & 127;
      return (tile << 9) + ((r & 31) << 4) + ((r >> 5) << 2) + (group & 3);
    }
  }
  return 0;
}

}  // namespace qexact::kernels
