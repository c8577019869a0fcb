// Fast MX dequantize: element codes decoded on their bits (SIMD for byte-wide codes and for FP4
// nibbles split into lanes; a 16-entry table for a group's FP4 tail) times the decoded E8M0
// scale, one fp32 multiply as in the contract.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/mx/mx_dequantize.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cmath>
#include <cstdint>

#include "kernels/cpu/common/float_lanes-inl.h"
#include "kernels/cpu/common/fp4_codes-inl.h"
#include "kernels/cpu/common/fp8_decode-inl.h"
#include "kernels/cpu/mx/mx_plan.hpp"
#include "kernels/cpu/mx/mx_scale_bits.hpp"

HWY_BEFORE_NAMESPACE();
namespace qexact::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

inline float ScaleValue(std::uint8_t byte) {
  if (byte == 255) return bits_to_float(0x7FC00000u);
  return byte == 0 ? bits_to_float(0x00400000u) : bits_to_float(static_cast<std::uint32_t>(byte) << 23);
}

// fp32 value of element code c (scalar twin of DecodeE2m1 and DecodeFp8: FP4 nibbles, and the byte-wide
// codes of a group's tail or of a group the vector path leaves out).
inline float DecodeScalar(const MxPlan& p, std::uint32_t c) {
  const std::uint32_t sign = (c >> (p.elem_bits - 1)) & 1u;
  const std::uint32_t mag = c & ((1u << (p.elem_bits - 1)) - 1u);
  const std::uint32_t e = mag >> p.mbits, m = mag & ((1u << p.mbits) - 1u);
  float v = e == 0 ? static_cast<float>(m) * bits_to_float(static_cast<std::uint32_t>(127 + 1 - p.bias - p.mbits) << 23)
                   : bits_to_float(((e - p.bias + 127) << 23) | (m << (23 - p.mbits)));
  if (p.has_inf && e == 31) v = m == 0 ? bits_to_float(0x7F800000u) : bits_to_float(0x7FC00000u);  // E5M2
  else if (p.has_nan && !p.has_inf && mag == 0x7Fu) v = bits_to_float(0x7FC00000u);          // E4M3
  return sign ? -v : v;
}

void DequantizeMxRows(const MxPlan& p, const std::uint8_t* payload, const std::uint8_t* scale, float* out,
                      std::int64_t first, std::int64_t last) {
  const hn::ScalableTag<float> df;
  [[maybe_unused]] const std::int64_t N = static_cast<std::int64_t>(hn::Lanes(df));
  HWY_ALIGN float fp4_table[16];
  if (p.fp4)
    for (std::uint32_t c = 0; c < 16; ++c) fp4_table[c] = DecodeScalar(p, c);
  for (std::int64_t row = first; row < last; ++row) {
    const std::uint8_t* in = payload + row * p.payload_row_bytes;
    float* o = out + row * p.k;
    for (std::int64_t g = 0; g < p.groups; ++g) {
      const std::uint8_t byte = scale[mx_scale_offset(p, row, g)];
      // scale_wrap's byte 255 is 2^128, beyond fp32: (2v) * 2^127, exact then one rounding as
      // v * 2^128 would be (ggml's half-scale times the doubled value).
      const bool wrapped_top = p.scale_wrap && byte == 255;
      const float s = wrapped_top ? 0x1p127f : ScaleValue(byte);
      const float v_factor = wrapped_top ? 2.0f : 1.0f;
      const std::int64_t begin = g * p.block;
      const std::int64_t end = std::min(p.k, begin + p.block);
      std::int64_t i = begin;
      if (!p.fp4 && p.elem_bits == 8 && !wrapped_top) {  // E4M3 or E5M2
        i = p.mbits == 3 ? ScaleFp8Vectors<3, true>(df, in, s, i, end, o) : ScaleFp8Vectors<2, true>(df, in, s, i, end, o);
      }
#if HWY_TARGET != HWY_SCALAR
      if (p.fp4 && !wrapped_top) {
        // Whole vectors of the group: adjacent nibbles anywhere; GGUF's halves (byte j holds j
        // and j + half) in whole groups, each vector inside one half.
        const hn::RebindToUnsigned<decltype(df)> du;
        const hn::Rebind<std::uint8_t, decltype(du)> d8;
        const auto vs = hn::Set(df, s);
        const std::int64_t half = p.block / 2;
        const bool halves = p.packing_halves;
        const bool stream = reinterpret_cast<std::uintptr_t>(o + i) % (N * sizeof(float)) == 0;
        // The group's 16 products, one per code, looked up instead of decoded: each is the
        // contract's one fp32 multiply, done once per code instead of once per element. 16
        // lanes hold them all (a NaN product is s itself, byte 255's canonical NaN: an x86
        // multiply returns its NaN operand); 8 hold the magnitudes, the sign then set on the
        // bits (the rounding is symmetric), so a NaN scale, whose NaN has no sign, leaves the
        // table there.
        constexpr std::int64_t kTableLanes = static_cast<std::int64_t>(hn::MaxLanes(df));
        HWY_ALIGN float products[16];
        for (int c = 0; c < 16; c += static_cast<int>(N))
          hn::Store(hn::Mul(hn::Mul(hn::Load(df, fp4_table + c), hn::Set(df, v_factor)), vs), df, products + c);
        // A product is NaN only where s is.
        const bool table = kTableLanes >= 16 || (kTableLanes == 8 && !std::isnan(s));
        const auto lookup = [&](hn::Vec<decltype(du)> nib) {
          if constexpr (kTableLanes >= 16) {
            const auto t = hn::Load(df, products);
            return hn::TableLookupLanes(t, hn::IndicesFromVec(df, hn::BitCast(hn::RebindToSigned<decltype(df)>(), nib)));
          } else {
            const auto t = hn::Load(df, products);
            const auto mag = hn::BitCast(hn::RebindToSigned<decltype(df)>(), hn::And(nib, hn::Set(du, 7u)));
            const auto sign = hn::ShiftLeft<28>(hn::And(nib, hn::Set(du, 8u)));
            return hn::Or(hn::TableLookupLanes(t, hn::IndicesFromVec(df, mag)), hn::BitCast(df, sign));
          }
        };
        // Codes decoded on their bits where the table cannot serve.
        const auto decoded = [&](hn::Vec<decltype(du)> nib) {
          const auto v = hn::Mul(DecodeE2m1(df, nib), vs);
          return hn::IfThenElse(hn::IsNaN(v), hn::Set(df, bits_to_float(0x7FC00000u)), v);
        };
        if (!halves || (end - begin == p.block && half % N == 0)) {
          for (; i + N <= end; i += N) {
            hn::Vec<decltype(du)> nib;
            if (halves) {
              const std::int64_t j = i - begin;
              const auto bytes = hn::PromoteTo(du, hn::LoadU(d8, in + begin / 2 + j % half));
              nib = j >= half ? hn::ShiftRight<4>(bytes) : hn::And(bytes, hn::Set(du, 0xFu));
            } else {
              nib = Fp4AdjacentCodes(df, in, i);
            }
            const auto y = table ? lookup(nib) : decoded(nib);
            if (stream) hn::Stream(y, df, o + i);
            else hn::StoreU(y, df, o + i);
          }
        }
      }
#endif
      const std::int64_t half = p.block / 2;
      for (; i < end; ++i) {
        std::uint32_t c;
        if (p.fp4 && p.packing_halves) {  // whole groups: byte j of the group holds j and j + half
          const std::int64_t j = i - begin;
          c = (in[begin / 2 + j % half] >> (j >= half ? 4 : 0)) & 0xFu;
        } else {
          c = p.fp4 ? (in[i / 2] >> (4 * (i % 2))) & 0xFu : in[i];
        }
        const float v = ((p.fp4 ? fp4_table[c] : DecodeScalar(p, c)) * v_factor) * s;
        o[i] = v != v ? bits_to_float(0x7FC00000u) : v;  // the canonical quiet NaN
      }
    }
  }
  hwy::FlushStream();  // the streamed lines are visible to other threads once this returns
}

}  // namespace qexact::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qexact::kernels {
HWY_EXPORT(DequantizeMxRows);
void dequantize_mx_rows(const MxPlan& p, const std::uint8_t* payload, const std::uint8_t* scale, float* out,
                        std::int64_t first, std::int64_t last) {
  HWY_DYNAMIC_DISPATCH(DequantizeMxRows)(p, payload, scale, out, first, last);
}
}  // namespace qexact::kernels
#endif
