// The steps of the HiF4 contract (contracts §5) on SIMD lanes, for the fast kernels (a Highway
// per-target header). Every step is lane-wise and is the contract's own IEEE fp32 operation in
// the contract's order (Mul, Div, never MulAdd; -ffp-contract=off); the roundings (bf16, the
// E6M2 scale) are done on the integer bits. Two layouts use them: line blocks (64 contiguous
// values, below) and column blocks (one whole block per lane, in hif4_fake_quant.cpp).
#if defined(QEXACT_KERNELS_CPU_HIF4_HIF4_LANES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef QEXACT_KERNELS_CPU_HIF4_HIF4_LANES_INL_H_
#undef QEXACT_KERNELS_CPU_HIF4_HIF4_LANES_INL_H_
#else
#define QEXACT_KERNELS_CPU_HIF4_HIF4_LANES_INL_H_
#endif

#include <hwy/highway.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "kernels/cpu/common/float_lanes-inl.h"
#include "kernels/cpu/hif4/hif4_plan.hpp"

HWY_BEFORE_NAMESPACE();
namespace qexact::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// At most 16 fp32 lanes: a line block's 16 sub-groups fill at most one vector.
using Hif4DF = hn::CappedTag<float, 16>;
using Hif4DI = hn::RebindToSigned<Hif4DF>;
using Hif4VF = hn::Vec<Hif4DF>;
using Hif4VI = hn::Vec<Hif4DI>;
using Hif4MF = hn::Mask<Hif4DF>;
using Hif4MI = hn::Mask<Hif4DI>;

inline constexpr std::int32_t kHif4NaNBits = 0x7FC00000;  // the NaN of a non-finite block
inline constexpr std::int32_t kHif4LargestFinite = 0x7F7FFFFF;

// |x| as fp32 bits, NaN and +/-inf counted as 0 (for every max and every element code).
HWY_INLINE Hif4VI Hif4FiniteMagnitude(Hif4VI bits) {
  const Hif4DI di;
  const Hif4VI abs = hn::And(bits, hn::Set(di, 0x7FFFFFFF));
  return hn::IfThenZeroElse(hn::Gt(abs, hn::Set(di, kHif4LargestFinite)), abs);
}

// The sign of the output: bit 31 set when x is finite and x < 0 (so -0.0 and the non-finite
// elements are positive), every other bit clear.
HWY_INLINE Hif4VI Hif4Sign(Hif4VI bits) {
  const Hif4DI di;
  const Hif4VI abs = hn::And(bits, hn::Set(di, 0x7FFFFFFF));
  const Hif4MI finite_non_zero = hn::And(hn::Gt(abs, hn::Zero(di)), hn::Lt(abs, hn::Set(di, 0x7F800000)));
  return hn::IfThenElseZero(finite_non_zero, hn::And(bits, hn::Set(di, static_cast<std::int32_t>(0x80000000u))));
}

// The same for an x known to be finite, given |x| as abs.
HWY_INLINE Hif4VI Hif4FiniteSign(Hif4VI bits, Hif4VI abs) {
  const Hif4DI di;
  return hn::IfThenZeroElse(hn::Eq(abs, hn::Zero(di)),
                            hn::And(bits, hn::Set(di, static_cast<std::int32_t>(0x80000000u))));
}

// bf16(v) by the integer trick, for the finite non-negative values the contract rounds (a
// NaN cannot reach it, so it needs no NaN case).
HWY_INLINE Hif4VF Hif4Bf16(Hif4VF v) {
  const Hif4DF df;
  const Hif4DI di;
  const Hif4VI bits = hn::BitCast(di, v);
  const Hif4VI lsb = hn::And(hn::ShiftRight<16>(bits), hn::Set(di, 1));
  const Hif4VI rounded = hn::Add(bits, hn::Add(hn::Set(di, 0x7FFF), lsb));
  return hn::BitCast(df, hn::And(rounded, hn::Set(di, static_cast<std::int32_t>(0xFFFF0000u))));
}

struct Hif4Scale {
  Hif4VI bits;   // fp32 bits of the E6M2 scale
  Hif4VF value;  // m * 2^(e-2)
  Hif4VF rec;    // bf16(1 / scale)
};

// sf = bf16(max * bf16(1/7)), clamped to [2^-48, 49152], rounded to the E6M2 grid: RNE of the
// fp32 significand to 2 bits on the integer bits, where m = 8 carries into the exponent by
// itself. rec is one correctly rounded fp32 division, then bf16.
HWY_INLINE Hif4Scale Hif4ScaleOf(Hif4VF max) {
  const Hif4DF df;
  const Hif4DI di;
  Hif4VF sf = Hif4Bf16(hn::Mul(max, hn::Set(df, 0.142578125f)));
  sf = hn::Min(hn::Max(sf, hn::Set(df, 0x1p-48f)), hn::Set(df, 49152.0f));
  const Hif4VI b = hn::BitCast(di, sf);
  const Hif4VI lsb = hn::And(hn::ShiftRight<21>(b), hn::Set(di, 1));
  const Hif4VI bits = hn::And(hn::Add(b, hn::Add(hn::Set(di, 0xFFFFF), lsb)), hn::Set(di, ~0x1FFFFF));
  const Hif4VF value = hn::BitCast(df, bits);
  return Hif4Scale{bits, value, Hif4Bf16(hn::Div(hn::Set(df, 1.0f), value))};
}

// (e + 48) << 2 | (m - 4) from the scale's bits: the biased exponent (e + 127) and the two
// mantissa bits sit together above bit 21, and 316 = (127 - 48) << 2.
HWY_INLINE Hif4VI Hif4ScaleByte(Hif4VI scale_bits) {
  const Hif4DI di;
  return hn::Sub(hn::ShiftRight<21>(scale_bits), hn::Set(di, 316));
}

// d8 = (max8 * rec >= 4).
HWY_INLINE Hif4MF Hif4L2Bit(Hif4VF max8, Hif4VF rec) { return hn::Ge(hn::Mul(max8, rec), hn::Set(Hif4DF(), 4.0f)); }

// v * 2^-bit, exactly as the contract's multiply by 2^-d.
HWY_INLINE Hif4VF Hif4Halve(Hif4MF bit, Hif4VF v) {
  return hn::IfThenElse(bit, hn::Mul(v, hn::Set(Hif4DF(), 0.5f)), v);
}

// d4 = ((max4 * rec) * 2^-d8 >= 2); down8 = 2^-d8.
HWY_INLINE Hif4MF Hif4L3Bit(Hif4VF max4, Hif4VF rec, Hif4VF down8) {
  return hn::Ge(hn::Mul(hn::Mul(max4, rec), down8), hn::Set(Hif4DF(), 2.0f));
}

// The contract's c = min(floor(bf16((|x| * rec) * 2^-(d8 + d4)) * 4 + 0.5), 7), given
// r = rec * 4 * 2^-(d8 + d4) (a power-of-two multiple of rec: exact), as the fp32 2^23 + c.
// Five instructions, each step exact:
// - t = min(|x| * r, 7): the one rounding of the contract's product (scaling by 2^(2-d) is
//   exact above fp32's subnormals; below them every path gives c = 0), and bf16 rounding is
//   monotonic with 7 a bf16 value, so the min may come first.
// - bf16(t) half up (+0x8000 on the bits) instead of to nearest even: the two differ only when
//   t is a tie and the upper neighbour has an odd mantissa, and then c is the same for both,
//   because c steps up only at k + 0.5 (k = 0..6), bf16 values whose mantissas are even.
// - | 0xFFFF: the bf16 value plus less than one bf16 step, so the final round to nearest
//   below sends a value at exactly k + 0.5 up (the contract's half up), and no other value
//   across a k + 0.5 (they are at least one bf16 step away from it).
// - + 2^23: fp32 rounds to the nearest integer, which lands in the low mantissa bits.
HWY_INLINE Hif4VF Hif4CodeMagic(Hif4VF magnitude, Hif4VF r) {
  const Hif4DF df;
  const Hif4DI di;
  const Hif4VI t = hn::BitCast(di, hn::Min(hn::Mul(magnitude, r), hn::Set(df, 7.0f)));
  const Hif4VI sticky = hn::Or(hn::Add(t, hn::Set(di, 0x8000)), hn::Set(di, 0xFFFF));
  return hn::Add(hn::BitCast(df, sticky), hn::Set(df, 8388608.0f));
}

// The code c (an fp32 integer, 0..7) of 2^23 + c: exact.
HWY_INLINE Hif4VF Hif4CodeOfMagic(Hif4VF magic) { return hn::Sub(magic, hn::Set(Hif4DF(), 8388608.0f)); }

// The integer c of 2^23 + c: its low mantissa bits.
HWY_INLINE Hif4VI Hif4CodeBits(Hif4VF magic) { return hn::And(hn::BitCast(Hif4DI(), magic), hn::Set(Hif4DI(), 7)); }

// r of Hif4CodeMagic: rec * 4 * 2^-(d8 + d4), from rec4 = rec * 4 and down = 2^-(d8 + d4).
HWY_INLINE Hif4VF Hif4CodeMultiplier(Hif4VF rec4, Hif4VF down) { return hn::Mul(rec4, down); }

// The value of one code step, scale * 2^(d8 + d4 - 2), so that out = c * step. The contract's
// (c / 4) * 2^d8 * 2^d4 * scale has at most 3 x 3 significant bits and stays above 2^-50: every
// product is exact, in any order.
HWY_INLINE Hif4VF Hif4Step(Hif4VF scale, Hif4MF d8, Hif4MF d4) {
  const Hif4DF df;
  const Hif4VF quarter = hn::Mul(scale, hn::Set(df, 0.25f));
  const Hif4VF after_d8 = hn::IfThenElse(d8, hn::Add(quarter, quarter), quarter);
  return hn::IfThenElse(d4, hn::Add(after_d8, after_d8), after_d8);
}

// sign(x) * c * step, the sign as from Hif4Sign: a negative x whose code is 0 gives -0.0.
HWY_INLINE Hif4VF Hif4Value(Hif4VF code, Hif4VI sign, Hif4VF step) {
  return hn::Or(hn::Mul(code, step), hn::BitCast(Hif4DF(), sign));
}

// ---- line blocks: 64 contiguous fp32 values each ----
// A block is 64 / N natural vectors, in element order. A sub-group of 4 is one 128-bit block of
// a natural vector (N >= 4), so two in-block shuffles give its max; the maxima of natural
// vectors 4c..4c+3 are gathered into compact vector c, whose lane 4b + w holds the sub-group in
// 128-bit block b of natural vector 4c + w. The bits and steps are computed once per sub-group
// on the compact vectors, and Broadcast<w> (lane w of every 128-bit block) hands them back to the
// elements of natural vector 4c + w. On the scalar target a natural vector is one element and a
// compact vector one sub-group.
//
// Blocks go in batches of up to 16: all are scanned (maxima), then their scales are computed
// together, one block per lane, then all are quantized. The batch breaks the chain max ->
// scale -> division -> codes of one block, which no out-of-order window could overlap, into
// three runs of independent work, and divides once per batch.

inline constexpr std::size_t kHif4Lanes = hn::MaxLanes(Hif4DF());
inline constexpr std::size_t kHif4Compacts = 16 / kHif4Lanes;  // compact vectors per block
inline constexpr std::size_t kHif4Batch = 16;

struct Hif4LineBatch {
  HWY_ALIGN std::int32_t max4[kHif4Batch][16];  // fp32 bits of the sub-group maxima, compact order
  HWY_ALIGN std::int32_t block_max[kHif4Batch];
  HWY_ALIGN std::int32_t scale_byte[kHif4Batch];  // of a finite block: (e + 48) << 2 | (m - 4)
  HWY_ALIGN float rec[kHif4Batch];
  HWY_ALIGN std::int32_t rec4_bits[kHif4Batch];     // fp32 bits of rec * 4
  HWY_ALIGN std::int32_t quarter_bits[kHif4Batch];  // fp32 bits of scale / 4
  bool non_finite[kHif4Batch];
};

// The sub-group index of lane `lane` of compact vector c.
inline constexpr std::size_t Hif4SubGroupOf(std::size_t c, std::size_t lane) {
  return kHif4Lanes == 1 ? c : (4 * c + lane % 4) * (kHif4Lanes / 4) + lane / 4;
}

// Compact vector of the sub-group maxima of four natural vectors of magnitudes. Per 128-bit
// block: [a0..a3] and [c0..c3] give [max(a0,a2), max(a1,a3), max(c0,c2), max(c1,c3)] by one
// 64-bit interleave each way, the same for b and d; a swap of neighbours then leaves the four
// sub-group maxima in lanes 0 and 2 of one vector and 1 and 3 of the other, merged by one
// blend: eleven instructions for 4 vectors, where a reduction per vector took nineteen.
HWY_INLINE Hif4VI Hif4CompactMax(Hif4VI m0, Hif4VI m1, Hif4VI m2, Hif4VI m3) {
#if HWY_TARGET == HWY_SCALAR
  return hn::Max(hn::Max(m0, m1), hn::Max(m2, m3));
#else
  const Hif4DI di;
  const hn::Repartition<std::int64_t, Hif4DI> d64;
  auto halves_max = [&](Hif4VI a, Hif4VI c) {
    const auto a64 = hn::BitCast(d64, a), c64 = hn::BitCast(d64, c);
    const Hif4VI m = hn::Max(hn::BitCast(di, hn::InterleaveLower(d64, a64, c64)),
                             hn::BitCast(di, hn::InterleaveUpper(d64, a64, c64)));
    return hn::Max(m, hn::Shuffle2301(m));  // per block: a's max twice, then c's twice
  };
  return hn::OddEven(halves_max(m1, m3), halves_max(m0, m2));  // per block: m0 m1 m2 m3
#endif
}

// Per compact lane, the max of the other sub-group of its group of 8.
HWY_INLINE Hif4VI Hif4OtherHalfMax(const std::int32_t* max4, std::size_t c) {
  const Hif4DI di;
#if HWY_TARGET == HWY_SCALAR
  return hn::Set(di, max4[c ^ 1]);
#else
  const Hif4VI m4 = hn::Load(di, max4 + c * kHif4Lanes);
  if constexpr (kHif4Lanes == 4) {
    return hn::Shuffle2301(m4);  // sub-groups 4c + w: the other half is lane w ^ 1
  } else {
    // Sub-groups of one natural vector sit in neighbouring 128-bit blocks: lane L ^ 4.
    alignas(64) static constexpr std::int32_t kOther[16] = {4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11};
    return hn::TableLookupLanes(m4, hn::SetTableIndices(di, kOther));
  }
#endif
}

// The compact vector's values for the elements of natural vector 4c + kW.
template <int kW>
HWY_INLINE Hif4VF Hif4Expand(Hif4VF compact) {
#if HWY_TARGET == HWY_SCALAR
  return compact;
#else
  return hn::Broadcast<kW>(compact);
#endif
}

// Sub-group maxima (into max4, compact order) of the block at x, and the lane-wise max of its
// compact vectors (whose lanes' max is the block max).
template <class Magnitude>
HWY_INLINE Hif4VI Hif4ScanCompacts(const float* HWY_RESTRICT x, std::int32_t* HWY_RESTRICT max4,
                                   Magnitude magnitude) {
  const Hif4DF df;
  const Hif4DI di;
  constexpr std::size_t N = kHif4Lanes;
  Hif4VI lane_max = hn::Zero(di);
  for (std::size_t c = 0; c < kHif4Compacts; ++c) {
    const float* q = x + 4 * N * c;
    const Hif4VI m = Hif4CompactMax(magnitude(hn::LoadU(df, q)), magnitude(hn::LoadU(df, q + N)),
                                    magnitude(hn::LoadU(df, q + 2 * N)), magnitude(hn::LoadU(df, q + 3 * N)));
    hn::Store(m, di, max4 + c * N);
    lane_max = hn::Max(lane_max, m);
  }
  return lane_max;
}

// The block maxima of a batch, one block per lane of the result: from each block's lane-wise
// maxima, N blocks at a time reduced together (LaneMaxima), where a reduction per block took
// log2(N) shuffles and maxima each.
HWY_INLINE void Hif4BlockMaxima(const std::int32_t (*lane_max)[kHif4Lanes], std::int32_t* HWY_RESTRICT block_max) {
#if HWY_TARGET == HWY_SCALAR
  for (std::size_t i = 0; i < kHif4Batch; ++i) block_max[i] = lane_max[i][0];
#else
  const Hif4DI di;
  constexpr std::size_t N = kHif4Lanes;
  for (std::size_t g = 0; g < kHif4Batch; g += N) {
    Hif4VI level[N];
    for (std::size_t j = 0; j < N; ++j) level[j] = hn::Load(di, lane_max[g + j]);
    hn::Store(LaneMaxima<static_cast<int>(N)>(di, level), di, block_max + g);
  }
#endif
}

// |x| as fp32 bits (NaN above +inf: a block holding one has a block max above the largest
// finite).
HWY_INLINE Hif4VI Hif4RawMagnitude(Hif4VF v) {
  const Hif4DI di;
  return hn::And(hn::BitCast(di, v), hn::Set(di, 0x7FFFFFFF));
}

// The scales of the batch's first `count` blocks, scanned: one block per lane.
HWY_INLINE void Hif4ScaleBatch(Hif4LineBatch& b, std::size_t count) {
  const Hif4DF df;
  const Hif4DI di;
  constexpr std::size_t N = kHif4Lanes;
  for (std::size_t i = 0; i < count; i += N) {
    const Hif4Scale scale = Hif4ScaleOf(hn::BitCast(df, hn::Load(di, b.block_max + i)));
    hn::Store(Hif4ScaleByte(scale.bits), di, b.scale_byte + i);
    hn::Store(scale.rec, df, b.rec + i);
    hn::Store(hn::BitCast(di, hn::Mul(scale.rec, hn::Set(df, 4.0f))), di, b.rec4_bits + i);
    hn::Store(hn::BitCast(di, hn::Mul(scale.value, hn::Set(df, 0.25f))), di, b.quarter_bits + i);
  }
}

// What the elements of compact vector c's sub-groups are quantized with: their L2 and L3 bits,
// the code multiplier r (Hif4CodeMagic) and the value of a code step.
struct Hif4SubGroupSteps {
  Hif4MF d8, d4;
  Hif4VF r, step;
};

// The contract's d8 = (max8 * rec >= 4) and d4 = ((max4 * rec) * 2^-d8 >= 2), the latter as
// max4 * rec >= 2^(1 + d8) (scaling by 2^-d8 is exact above fp32's subnormals, and below them
// both tests are false); r and step then differ from rec * 4 and scale / 4 by 2^(d8 + d4) only,
// so they are those with d8 + d4 subtracted from or added to their exponent bits (all normal).
HWY_INLINE Hif4SubGroupSteps Hif4StepsOf(const Hif4LineBatch& b, std::size_t i, std::size_t c) {
  const Hif4DF df;
  const Hif4DI di;
  const Hif4VF rec = hn::Set(df, b.rec[i]);
  const Hif4VI m4 = hn::Load(di, b.max4[i] + c * kHif4Lanes);
  const Hif4VF max8 = hn::BitCast(df, hn::Max(m4, Hif4OtherHalfMax(b.max4[i], c)));
  const Hif4MF d8 = hn::Ge(hn::Mul(max8, rec), hn::Set(df, 4.0f));
  const Hif4MF d4 = hn::Ge(hn::Mul(hn::BitCast(df, m4), rec), hn::IfThenElse(d8, hn::Set(df, 4.0f), hn::Set(df, 2.0f)));
  const Hif4VI one = hn::Set(di, 1 << 23);  // 1 in the exponent field
  const Hif4VI e = hn::Add(hn::IfThenElseZero(hn::RebindMask(di, d8), one), hn::IfThenElseZero(hn::RebindMask(di, d4), one));
  const Hif4VF r = hn::BitCast(df, hn::Sub(hn::Set(di, b.rec4_bits[i]), e));
  const Hif4VF step = hn::BitCast(df, hn::Add(hn::Set(di, b.quarter_bits[i]), e));
  return Hif4SubGroupSteps{d8, d4, r, step};
}

// The sign of x (bits, |x| as abs) in bit 31, the other bits undefined: x's own sign bit where
// |x| != 0 (abs + 0x7FFFFFFF carries into bit 31 exactly then), so -0.0 is positive.
HWY_INLINE Hif4VI Hif4SignBit(Hif4VI bits, Hif4VI abs) {
  return hn::And(hn::Add(abs, hn::Set(Hif4DI(), 0x7FFFFFFF)), bits);
}

// Quantizes block i (at x) of a scanned and scaled batch: per compact vector c,
// out.Bits(c, d8, d4) with its sub-groups' L2 and L3 bits, then per natural vector v (4c..4c+3)
// out.Codes(v, magic, sign, step): the element codes as 2^23 + c (Hif4CodeMagic), signs
// (Hif4Sign) and steps. kFinite: the block holds no NaN or +/-inf, so |x| needs no masking and
// the sign no finiteness test.
template <bool kFinite, class Out>
HWY_INLINE void Hif4QuantizeLine(const float* HWY_RESTRICT x, const Hif4LineBatch& b, std::size_t i, Out& out) {
  const Hif4DF df;
  const Hif4DI di;
  constexpr std::size_t N = kHif4Lanes;
  for (std::size_t c = 0; c < kHif4Compacts; ++c) {
    const Hif4SubGroupSteps s = Hif4StepsOf(b, i, c);
    out.Bits(c, s.d8, s.d4);
    auto natural = [&](auto w) {
      constexpr int kW = decltype(w)::value;
      const std::size_t v = 4 * c + kW;
      const Hif4VI bits = hn::BitCast(di, hn::LoadU(df, x + v * N));
      Hif4VF code;
      Hif4VI sign;
      if constexpr (kFinite) {
        const Hif4VI abs = hn::And(bits, hn::Set(di, 0x7FFFFFFF));
        code = Hif4CodeMagic(hn::BitCast(df, abs), Hif4Expand<kW>(s.r));
        sign = Hif4FiniteSign(bits, abs);
      } else {
        code = Hif4CodeMagic(hn::BitCast(df, Hif4FiniteMagnitude(bits)), Hif4Expand<kW>(s.r));
        sign = Hif4Sign(bits);
      }
      out.Codes(v, code, sign, Hif4Expand<kW>(s.step));
    };
    natural(std::integral_constant<int, 0>());
    natural(std::integral_constant<int, 1>());
    natural(std::integral_constant<int, 2>());
    natural(std::integral_constant<int, 3>());
  }
}

// Walks the line blocks of an input whose blocks lie along its last axis (inner == 1) in
// order, from block `first` (= o * blocks_per_line + l / 64), with no division per block.
class Hif4LineCursor {
 public:
  Hif4LineCursor(const Hif4Plan& p, std::int64_t first)
      : p_(p),
        o_(first / p.blocks_per_line),
        l_(first % p.blocks_per_line * kHif4Block),
        base_(p.outer_dims.offset_of(o_)) {}

  // The fp32 values of the current block: the input itself when it is contiguous fp32, else
  // widened (and gathered first when strided, through `raw`) into `widened`.
  const float* values(float* HWY_RESTRICT widened, std::uint8_t* HWY_RESTRICT raw) const {
    const auto esize = static_cast<std::int64_t>(p_.esize);
    const std::uint8_t* src = p_.data + (base_ + l_ * p_.axis_stride) * esize;
    if (p_.axis_stride != 1) {
      const std::int64_t step = p_.axis_stride * esize;
      for (std::int64_t k = 0; k < kHif4Block; ++k) std::memcpy(raw + k * esize, src + k * step, p_.esize);
      src = raw;
    } else {
      PrefetchAheadBytes(src, kHif4Block * esize);
      if (p_.dtype == DType::f32) return reinterpret_cast<const float*>(src);
    }
    const Hif4DF df;
    const auto N = static_cast<std::int64_t>(hn::Lanes(df));
    for (std::int64_t i = 0; i < kHif4Block; i += N)
      hn::Store(LoadWidened(df, p_.dtype, src + i * esize), df, widened + i);
    return widened;
  }

  // The block's bf16 elements where they lie (contiguous bf16 input only).
  const std::uint16_t* bf16_in_place() const {
    const std::uint8_t* src = p_.data + (base_ + l_) * 2;
    PrefetchAheadBytes(src, kHif4Block * 2);
    return reinterpret_cast<const std::uint16_t*>(src);
  }

  void next() {
    l_ += kHif4Block;
    if (l_ == p_.length) {
      l_ = 0;
      base_ = p_.outer_dims.offset_of(++o_);
    }
  }

 private:
  const Hif4Plan& p_;
  std::int64_t o_, l_, base_;
};

// Runs the line blocks [first, last) in batches: a batch's blocks are scanned, their scales
// computed, then emit(block, i, batch, x) quantizes each (i: its place in the batch, x: its
// values as Scan returned them). Scan(cursor, i, max4, lane_max) reads the current block, stores
// its sub-group maxima of |x| (NaN above +inf) and lane-wise maxima; Rescan(x, max4) takes them
// again with NaN and +/-inf as 0 and returns the lane-wise maxima.
template <class Scan, class Rescan, class Emit>
HWY_INLINE void Hif4ForBatches(const Hif4Plan& p, std::int64_t first, std::int64_t last, Scan&& scan, Rescan&& rescan,
                               Emit&& emit) {
  HWY_ALIGN std::int32_t lane_max[kHif4Batch][kHif4Lanes];
  const Hif4DI di;
  Hif4LineBatch batch;
  using X = decltype(scan(std::declval<const Hif4LineCursor&>(), std::size_t{0}, batch.max4[0], lane_max[0]));
  X x[kHif4Batch];
  Hif4LineCursor cursor(p, first);
  for (std::int64_t begin = first; begin < last; begin += static_cast<std::int64_t>(kHif4Batch)) {
    const auto count =
        static_cast<std::size_t>(std::min<std::int64_t>(static_cast<std::int64_t>(kHif4Batch), last - begin));
    for (std::size_t i = 0; i < count; ++i, cursor.next()) x[i] = scan(cursor, i, batch.max4[i], lane_max[i]);
    for (std::size_t i = count; i < kHif4Batch; ++i) hn::Store(hn::Zero(di), di, lane_max[i]);
    Hif4BlockMaxima(lane_max, batch.block_max);
    for (std::size_t i = 0; i < count; ++i) {
      batch.non_finite[i] = batch.block_max[i] > kHif4LargestFinite;
      if (batch.non_finite[i]) batch.block_max[i] = hn::GetLane(hn::MaxOfLanes(di, rescan(x[i], batch.max4[i])));
    }
    Hif4ScaleBatch(batch, count);
    for (std::size_t i = 0; i < count; ++i) emit(begin + static_cast<std::int64_t>(i), i, batch, x[i]);
  }
}

// The same with each block's values as fp32 (widened or gathered into a buffer when needed).
template <class Emit>
HWY_INLINE void Hif4ForLineBatches(const Hif4Plan& p, std::int64_t first, std::int64_t last, Emit&& emit) {
  HWY_ALIGN float widened[kHif4Batch][64];
  HWY_ALIGN std::uint8_t raw[64 * 4];
  const Hif4DI di;
  Hif4ForBatches(
      p, first, last,
      [&](const Hif4LineCursor& cursor, std::size_t i, std::int32_t* max4, std::int32_t* lane_max) {
        const float* x = cursor.values(widened[i], raw);
        hn::Store(Hif4ScanCompacts(x, max4, Hif4RawMagnitude), di, lane_max);
        return x;
      },
      [&](const float* x, std::int32_t* max4) {
        return Hif4ScanCompacts(x, max4, [&](Hif4VF v) { return Hif4FiniteMagnitude(hn::BitCast(di, v)); });
      },
      emit);
}

// ---- bf16 line blocks in place, two elements per 32-bit lane ----
// Lane L of a 32-bit vector loaded from a bf16 block holds elements 2L (low half) and 2L + 1:
// shifted left by 16 and masked, one load gives the fp32 bits of the even elements and of the
// odd ones, with no widening pass and no buffer; both halves of a lane are in one sub-group.
// A chunk is the 2N elements of one load, compact vector c's sub-groups are chunks 2c and
// 2c + 1. The pair outputs are cheap too: bf16 results recombine by one shift and one select,
// and two nibbles of a value byte are already in one lane.
#if HWY_TARGET != HWY_SCALAR
using Hif4DU = hn::RebindToUnsigned<Hif4DI>;

// The compact lane (Hif4SubGroupOf) of sub-group k of compact vector c, counted from c's first.
inline constexpr std::size_t Hif4CompactLaneOf(std::size_t k) {
  return 4 * (k % (kHif4Lanes / 4)) + k / (kHif4Lanes / 4);
}

// (mask & yes) | (~mask & no), bit by bit: one ternary-logic instruction on AVX-512. (Highway's
// IfVecThenElse takes whole-lane masks on the other targets: a blend by each byte's top bit.)
HWY_INLINE Hif4VI Hif4BitSelect(Hif4VI mask, Hif4VI yes, Hif4VI no) {
#if HWY_TARGET <= HWY_AVX3
  return hn::IfVecThenElse(mask, yes, no);
#else
  return hn::Or(hn::And(mask, yes), hn::AndNot(mask, no));
#endif
}

// Lane permutations of the bf16 path: compact[L'] = the sub-group (counted from the compact
// vector's first) that compact lane L' holds; chunk[h][L] = the compact lane of the sub-group
// of lane L of chunk h, (N / 2) * h + L / 2.
struct Hif4LaneTables {
  std::int32_t compact[16];
  std::int32_t chunk[2][16];
};

inline constexpr Hif4LaneTables Hif4LaneTablesOf() {
  Hif4LaneTables t{};
  constexpr std::size_t N = kHif4Lanes;
  for (std::size_t lane = 0; lane < N; ++lane) {
    t.compact[lane] = static_cast<std::int32_t>((lane % 4) * (N / 4) + lane / 4);
    for (std::size_t h = 0; h < 2; ++h)
      t.chunk[h][lane] = static_cast<std::int32_t>(Hif4CompactLaneOf(h * (N / 2) + lane / 2));
  }
  return t;
}

// Sub-group maxima of the bf16 block at x (16-bit maxima of |x|, four halves per 64-bit lane,
// then the odd 32-bit lanes of two chunks to the compact order) and their lane-wise max.
template <bool kFiniteOnly>
HWY_INLINE Hif4VI Hif4ScanBf16(const std::uint16_t* HWY_RESTRICT x, std::int32_t* HWY_RESTRICT max4) {
  const Hif4DI di;
  const Hif4DU du;
  const hn::Repartition<std::uint16_t, Hif4DU> d16;
  const hn::RebindToSigned<decltype(d16)> di16;
  constexpr std::size_t N = kHif4Lanes;
  alignas(64) static constexpr Hif4LaneTables kTables = Hif4LaneTablesOf();
  auto chunk_max = [&](const std::uint16_t* q) {
    auto h = hn::And(hn::LoadU(d16, q), hn::Set(d16, 0x7FFF));
    if constexpr (kFiniteOnly) {
      const auto hi = hn::BitCast(di16, h);
      h = hn::BitCast(d16, hn::IfThenZeroElse(hn::Gt(hi, hn::Set(di16, 0x7F7F)), hi));
    }
    const auto w = hn::BitCast(du, h);
    const auto a = hn::BitCast(du, hn::Max(h, hn::BitCast(d16, hn::Shuffle2301(w))));
    return hn::BitCast(du, hn::Max(hn::BitCast(d16, a), hn::BitCast(d16, hn::ShiftLeft<16>(a))));
  };
  Hif4VI lane_max = hn::Zero(di);
  for (std::size_t c = 0; c < kHif4Compacts; ++c) {
    const auto odd = hn::ConcatOdd(du, chunk_max(x + 4 * N * c + 2 * N), chunk_max(x + 4 * N * c));
    Hif4VI m = hn::And(hn::BitCast(di, odd), hn::Set(di, static_cast<std::int32_t>(0xFFFF0000u)));
    if constexpr (N > 4) m = hn::TableLookupLanes(m, hn::SetTableIndices(di, kTables.compact));
    hn::Store(m, di, max4 + c * N);
    lane_max = hn::Max(lane_max, m);
  }
  return lane_max;
}

// Quantizes bf16 block i (at x, in place) of a scanned and scaled batch: per compact vector c,
// out.Bits(c, d8, d4), then per chunk q (2c, 2c + 1) out.Pairs(q, even, odd) with each half's
// codes as 2^23 + c, signs in bit 31 (the other bits undefined) and steps.
struct Hif4Halves {
  Hif4VF magic;
  Hif4VI sign;
  Hif4VF step;
};

template <bool kFinite, class Out>
HWY_INLINE void Hif4QuantizeLine(const std::uint16_t* HWY_RESTRICT x, const Hif4LineBatch& b, std::size_t i, Out& out) {
  const Hif4DF df;
  const Hif4DI di;
  const hn::Repartition<std::uint16_t, Hif4DU> d16;
  constexpr std::size_t N = kHif4Lanes;
  alignas(64) static constexpr Hif4LaneTables kTables = Hif4LaneTablesOf();
  const auto index0 = hn::SetTableIndices(df, kTables.chunk[0]);
  const auto index1 = hn::SetTableIndices(df, kTables.chunk[1]);
  for (std::size_t c = 0; c < kHif4Compacts; ++c) {
    const Hif4SubGroupSteps s = Hif4StepsOf(b, i, c);
    out.Bits(c, s.d8, s.d4);
    for (std::size_t h = 0; h < 2; ++h) {
      const auto& idx = h == 0 ? index0 : index1;
      const Hif4VF r = hn::TableLookupLanes(s.r, idx);
      const Hif4VF step = hn::TableLookupLanes(s.step, idx);
      const std::size_t q = 2 * c + h;
      const Hif4VI w = hn::BitCast(di, hn::LoadU(d16, x + 2 * N * q));  // loaded as the bf16 it is
      const Hif4VI even = hn::ShiftLeft<16>(w);
      const Hif4VI odd = hn::And(w, hn::Set(di, static_cast<std::int32_t>(0xFFFF0000u)));
      Hif4VI even_abs, odd_abs;
      if constexpr (kFinite) {
        even_abs = hn::And(even, hn::Set(di, 0x7FFFFFFF));
        odd_abs = hn::And(w, hn::Set(di, 0x7FFF0000));
      } else {
        even_abs = Hif4FiniteMagnitude(even);
        odd_abs = Hif4FiniteMagnitude(odd);
      }
      out.Pairs(q, Hif4Halves{Hif4CodeMagic(hn::BitCast(df, even_abs), r), Hif4SignBit(even, even_abs), step},
                Hif4Halves{Hif4CodeMagic(hn::BitCast(df, odd_abs), r), Hif4SignBit(odd, odd_abs), step});
    }
  }
}

// Hif4ForBatches over contiguous bf16 line blocks, read in place.
template <class Emit>
HWY_INLINE void Hif4ForBf16LineBatches(const Hif4Plan& p, std::int64_t first, std::int64_t last, Emit&& emit) {
  const Hif4DI di;
  Hif4ForBatches(
      p, first, last,
      [&](const Hif4LineCursor& cursor, std::size_t, std::int32_t* max4, std::int32_t* lane_max) {
        const std::uint16_t* x = cursor.bf16_in_place();
        hn::Store(Hif4ScanBf16<false>(x, max4), di, lane_max);
        return x;
      },
      [&](const std::uint16_t* x, std::int32_t* max4) { return Hif4ScanBf16<true>(x, max4); }, emit);
}
#endif

}  // namespace qexact::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // QEXACT_KERNELS_CPU_HIF4_HIF4_LANES_INL_H_ toggle
