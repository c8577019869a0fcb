// Fast nvfp4 quantizer: one SIMD body compiled for every x86 target (google/highway), dispatched
// at run time. It reads a vector's worth of blocks of 16 at once (one block per lane of the
// scale epilogue): |x| maxima on the fp32 bits, the E4M3 scale codes and multipliers in one
// vector of IEEE divisions with the code rounded on the bits, then the elements multiplied,
// clamped and rounded to E2M1 by integer arithmetic on the fp32 bits. The stacks' general steps
// (ModelOpt's and compressed-tensors' divisions, zero rules, E4M3 subnormal scales) and the
// 16x16 tiles' maxima batch the same way. A batch holding an inf or a NaN, a tensor scale of 0
// or inf, 4over6, JAX's prescaled steps and the last blocks take the one-block steps: scale and
// multiplier in scalar fp32 (nvfp4_block_math.hpp), and, where the block or its multiplier is
// not finite, the elements one by one through the scalar steps that carry torchao's NaN bits.
// It shares no code with reference/.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/nvfp4/nvfp4_quantize.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cmath>
#include <cstring>

#include <hwy/cache_control.h>

#include "kernels/cpu/common/float_lanes-inl.h"
#include "kernels/cpu/common/flush_subnormal-inl.h"
#include "kernels/cpu/common/scalar_load.hpp"
#include "kernels/cpu/nvfp4/nvfp4_block_math.hpp"
#include "kernels/cpu/nvfp4/nvfp4_plan.hpp"

HWY_BEFORE_NAMESPACE();
namespace qexact::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// At most one block per vector: the one-block steps go through 16 elements.
using DF16 = hn::CappedTag<float, 16>;
using DI16 = hn::RebindToSigned<DF16>;
// Whole vectors: the batch path holds one block per lane.
using DF = hn::ScalableTag<float>;
using DI = hn::RebindToSigned<DF>;
using DU = hn::RebindToUnsigned<DF>;
using VF = hn::Vec<DF>;
using VI = hn::Vec<DI>;

std::uint32_t Nvfp4AbsMaxBits(DType dtype, const std::uint8_t* data, std::int64_t first, std::int64_t last) {
  const std::int64_t size = dtype == DType::f32 ? 4 : 2;
  return AbsMaxBitsOfRun(dtype, data + first * size, last - first);
}

#if HWY_TARGET != HWY_SCALAR
constexpr int kBatchLanes = static_cast<int>(hn::MaxLanes(DF()));
static_assert(kBatchLanes <= kNvfp4Block && kNvfp4Block % kBatchLanes == 0, "a block is whole vectors");
constexpr int kPer = kNvfp4Block / kBatchLanes;  // vectors per block

// kBatchLanes blocks from `src` into `bits` (block j in bits[j * kPer ...]), and their |x| max
// bits, block j in lane j (each level of ConcatEven/ConcatOdd + Max halves the vectors and the
// lanes per block).
template <DType kDtype>
HWY_INLINE VI LoadBlocks(const std::uint8_t* src, VI* bits) {
  const DF df;
  const DI di;
  constexpr int kN = kBatchLanes;
  constexpr std::int64_t kSize = kDtype == DType::f32 ? 4 : 2;
  for (int v = 0; v < kNvfp4Block; ++v) bits[v] = hn::BitCast(di, LoadWidened(df, kDtype, src + v * kN * kSize));
  const VI abs_mask = hn::Set(di, 0x7FFFFFFF);
  VI level[kN];
  for (int j = 0; j < kN; ++j) {
    VI m = hn::And(bits[j * kPer], abs_mask);
    for (int v = 1; v < kPer; ++v) m = hn::Max(m, hn::And(bits[j * kPer + v], abs_mask));
    level[j] = m;
  }
  return LaneMaxima<kN>(di, level);
}
#endif

// |x| max bits of each block in [first, last) into out[0 .. last - first): kBatchLanes blocks
// at a time (LoadBlocks), the rest one by one.
template <DType kDtype>
void BlockMaximaOf(const std::uint8_t* data, std::int64_t first, std::int64_t last, std::uint32_t* out) {
  constexpr std::int64_t kSize = kDtype == DType::f32 ? 4 : 2;
  std::int64_t b = first;
#if HWY_TARGET != HWY_SCALAR
  for (; kBatchLanes > 1 && b + kBatchLanes <= last; b += kBatchLanes) {
    const std::uint8_t* src = data + b * kNvfp4Block * kSize;
    PrefetchAheadBytes(src, kBatchLanes * kNvfp4Block * kSize);
    VI bits[kNvfp4Block];
    hn::StoreU(hn::BitCast(DU(), LoadBlocks<kDtype>(src, bits)), DU(), out + (b - first));
  }
#endif
  for (; b < last; ++b)
    out[b - first] = AbsMaxBitsOfRun(kDtype, data + b * kNvfp4Block * kSize, kNvfp4Block);
}

void Nvfp4BlockMaxima(DType dtype, const std::uint8_t* data, std::int64_t first, std::int64_t last, std::uint32_t* out) {
  switch (dtype) {
    case DType::f32: return BlockMaximaOf<DType::f32>(data, first, last, out);
    case DType::bf16: return BlockMaximaOf<DType::bf16>(data, first, last, out);
    default: return BlockMaximaOf<DType::f16>(data, first, last, out);
  }
}

// E2M1 codes (int32 lanes) of products v = x * multiplier that are not NaN, by integer
// arithmetic on the fp32 bits: |v| clamped to 6 on the bits (inf included); at and above 1 the
// significand is rounded to one bit (ties to even) and the exponent rebiased from 127 to 1;
// below 1, 2|v| + 2^23 rounds to 0, 1 or 2 (RNE) in the low mantissa bits. The sign comes from
// v (a negative value that rounds to 0 keeps it).
template <class D>
HWY_INLINE hn::Vec<hn::RebindToSigned<D>> E2m1Codes(D df, hn::Vec<D> v) {
  const hn::RebindToSigned<D> di;
  const auto bits = hn::BitCast(di, v);
  const auto ab = hn::Min(hn::And(bits, hn::Set(di, 0x7FFFFFFF)), hn::Set(di, 0x40C00000));
  const auto lsb = hn::And(hn::ShiftRight<22>(ab), hn::Set(di, 1));
  const auto normal = hn::ShiftRight<22>(hn::Add(hn::Add(ab, hn::Set(di, 0x1FFFFF - (126 << 23))), lsb));
  const auto twice = hn::Mul(hn::BitCast(df, ab), hn::Set(df, 2.0f));
  const auto sub = hn::Sub(hn::BitCast(di, hn::Add(twice, hn::Set(df, 8388608.0f))), hn::Set(di, 0x4B000000));
  const auto code = hn::IfThenElse(hn::Lt(ab, hn::Set(di, 0x3F800000)), sub, normal);
  return hn::Or(code, hn::And(hn::ShiftRight<28>(bits), hn::Set(di, 8)));
}

// Packs the E2M1 codes of Lanes(di) consecutive elements (int32 lanes) two to a byte, the
// first of each pair in the low nibble, and stores the Lanes(di) / 2 bytes at out: the codes
// narrowed to bytes, each byte pair read as a u16 (first code low), its high code shifted
// down onto the low byte's high nibble, the low bytes kept.
template <class DI>
HWY_INLINE void StorePairs(DI di, hn::Vec<DI> codes, std::uint8_t* out) {
#if HWY_TARGET <= HWY_AVX3
  if constexpr (hn::MaxLanes(DI()) == 16) {
    // One 64-bit lane per pair (first code low): the second code shifted onto the first one's
    // high nibble, then vpmovqb, which Highway's TruncateTo does not use here.
    const __m512i pairs = _mm512_or_si512(codes.raw, _mm512_srli_epi64(codes.raw, 28));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out), _mm512_cvtepi64_epi8(pairs));
    return;
  }
#endif
  const hn::Rebind<std::uint8_t, DI> d8;
  const hn::Repartition<std::uint16_t, decltype(d8)> d16;
  const hn::Rebind<std::uint8_t, decltype(d16)> dpair;
  const auto bytes = hn::BitCast(d16, hn::TruncateTo(d8, hn::BitCast(hn::RebindToUnsigned<DI>(), codes)));
  (void)di;
  hn::StoreU(hn::TruncateTo(dpair, hn::Or(bytes, hn::ShiftRight<4>(bytes))), dpair, out);
}

// The per-call constants of the block scale epilogue.
struct Epilogue {
  bool vector = false;  // the batch path may derive the scales (finite, nonzero tensor scale)
  float one = 1.0f;     // two level: fp32(1 / t)
  float te_k = 0.0f;    // te: S_enc * fp32(1/6)
  float te_inv = 0.0f;  // te: fp32(1 / S_enc)
};

Epilogue EpilogueOf(const Nvfp4Plan& p) {
  Epilogue e;
  const float t = p.tensor_scale;
  if (p.te) {
    e.te_k = t * (1.0f / 6.0f);
    e.te_inv = 1.0f / t;
    e.vector = std::isfinite(t) && t != 0.0f;
  } else if (p.two_level) {
    e.one = nvfp4::div_x86(1.0f, t);
    // one / s with s >= 2^-6 stays finite for |one| < 2^100: no multiplier overflows.
    e.vector = std::isfinite(t) && t != 0.0f && std::fabs(e.one) < 0x1p100f;
  } else {
    e.vector = true;
  }
  return e;
}

// One lane per block: Lanes(df) consecutive blocks of 16, held in registers after one read.
// Each block's |x| max is reduced within its vectors, then across the blocks (each level of
// ConcatEven/ConcatOdd + Max halves both the vectors and the lanes per block, leaving block j's
// max in lane j); the E4M3 scale codes and the multipliers come out of one vector of divisions
// (IEEE, as the contract's scalar steps); the elements are multiplied and encoded as above.
// Returns false, having written nothing, when a block holds an inf or a NaN: the caller then
// takes the scalar steps, which carry torchao's NaN bits.
#if HWY_TARGET != HWY_SCALAR
// LoadBlocks of the blocks from b0, with the tile's maxima instead of the blocks' where the
// plan has them (block_rows=16, computed beforehand).
template <DType kDtype>
HWY_INLINE VI LoadBlockBatch(const Nvfp4Plan& p, std::int64_t b0, VI* bits) {
  constexpr std::int64_t kSize = kDtype == DType::f32 ? 4 : 2;
  const VI own = LoadBlocks<kDtype>(p.data + b0 * kNvfp4Block * kSize, bits);
  return p.tile_amax ? hn::BitCast(DI(), hn::LoadU(DU(), p.tile_amax + b0)) : own;
}

// LoadBlockBatch where every block of the batch is finite; false (nothing written) otherwise, and
// the caller's one-block steps take the batch with their NaN and inf rules.
template <DType kDtype>
HWY_INLINE bool LoadFiniteBlockBatch(const Nvfp4Plan& p, std::int64_t b0, VI* bits, VI& amax) {
  amax = LoadBlockBatch<kDtype>(p, b0, bits);
  return hn::AllFalse(DI(), hn::Gt(amax, hn::Set(DI(), 0x7F7FFFFF)));
}

// E4M3 codes (satfinite, RNE) of finite v >= 0: 448 and above saturate to 0x7E, below 2^-6 the
// subnormal grid (v * 2^9 is exact, + 2^23 rounds it), else rounded on the bits.
HWY_INLINE VI E4m3SatfiniteCodes(VF v) {
  const DF df;
  const DI di;
  const VI vb = hn::BitCast(di, v);
  const VI r = hn::ShiftRight<20>(hn::Add(hn::Add(vb, hn::Set(di, 0x7FFFF)), hn::And(hn::ShiftRight<20>(vb), hn::Set(di, 1))));
  const VI sub = hn::Sub(hn::BitCast(di, hn::Add(hn::Mul(v, hn::Set(df, 512.0f)), hn::Set(df, 8388608.0f))),
                         hn::Set(di, 0x4B000000));
  const VI code = hn::IfThenElse(hn::RebindMask(di, hn::Lt(v, hn::Set(df, 0x1p-6f))), sub, hn::Sub(r, hn::Set(di, 120 << 3)));
  return hn::IfThenElse(hn::RebindMask(di, hn::Ge(v, hn::Set(df, 448.0f))), hn::Set(di, 0x7E), code);
}

// The values of E4M3 codes 0 .. 0x7E: e = 0 is m * 2^-9, else the bits (e + 120, m) in fp32's.
HWY_INLINE VF E4m3CodeValues(VI code) {
  const DF df;
  const DI di;
  const VF normal = hn::BitCast(df, hn::ShiftLeft<20>(hn::Add(code, hn::Set(di, 120 << 3))));
  const VF subnormal = hn::Mul(hn::ConvertTo(df, hn::And(code, hn::Set(di, 7))), hn::Set(df, 0x1p-9f));
  return hn::IfThenElse(hn::RebindMask(df, hn::Eq(hn::ShiftRight<3>(code), hn::Zero(di))), subnormal, normal);
}

// The batch's payload: codes(x, j) gives the E2M1 codes of block j's vector x; the kBatchLanes
// * 8 bytes are staged, then leave in whole-vector streaming stores where the payload is aligned
// (it is not read again: no line is fetched for it).
template <class Codes>
HWY_INLINE void StoreBatchPayload(const VI* bits, const Codes& codes, std::uint8_t* out) {
  const DF df;
  const DI di;
  constexpr int kN = kBatchLanes;
  constexpr int kBytes = kN * kNvfp4Block / 2;
  HWY_ALIGN std::uint8_t staged[kBytes];
  for (int j = 0; j < kN; ++j)
    for (int v = 0; v < kPer; ++v) StorePairs(di, codes(hn::BitCast(df, bits[j * kPer + v]), j), staged + (j * kPer + v) * kN / 2);
  const hn::ScalableTag<std::uint8_t> dbytes;
  constexpr int kVec = static_cast<int>(hn::MaxLanes(hn::ScalableTag<std::uint8_t>()));
  static_assert(kBytes % kVec == 0, "the staged bytes are whole vectors");
  if (reinterpret_cast<std::uintptr_t>(out) % kVec == 0) {
    for (int i = 0; i < kBytes; i += kVec) hn::Stream(hn::Load(dbytes, staged + i), dbytes, out + i);
  } else {
    std::memcpy(out, staged, kBytes);
  }
}

// The batch's outputs: its scale codes (one per lane, each < 256) as bytes, then its payload,
// codes(x, o) giving the E2M1 codes of a vector x of block j, o being lane j of `operand` (the
// block's multiplier or divisor) in every lane.
template <class Codes>
HWY_INLINE void StoreBatch(const Nvfp4Plan& p, std::int64_t b0, VI code, VF operand, const VI* bits, const Codes& codes) {
  const DF df;
  const hn::Rebind<std::uint8_t, DU> d8;
  hn::StoreU(hn::TruncateTo(d8, hn::BitCast(DU(), code)), d8, p.scale + b0);
  HWY_ALIGN float lanes[kBatchLanes];
  hn::Store(operand, df, lanes);
  StoreBatchPayload(
      bits, [&](VF x, int j) { return codes(x, hn::Set(df, lanes[j])); }, p.payload + b0 * (kNvfp4Block / 2));
}
#endif

template <DType kDtype>
HWY_INLINE bool QuantizeBlockBatch(const Nvfp4Plan& p, const Epilogue& e, std::int64_t b0) {
#if HWY_TARGET == HWY_SCALAR
  (void)p, (void)e, (void)b0;
  return false;
#else
  const DF df;
  const DI di;
  VI bits[kNvfp4Block];  // kBatchLanes blocks of kPer vectors
  VI amax;
  if (!LoadFiniteBlockBatch<kDtype>(p, b0, bits, amax)) return false;
  const VF a = hn::BitCast(df, amax);
  VI code;
  VF mult;
  if (!p.te) {
    // e4m3(clamp((amax / 6) [/ t], 2^-6, 448)): a normal E4M3 value, rounded on the bits.
    VF s = hn::Div(a, hn::Set(df, 6.0f));
    if (p.two_level) s = hn::Div(s, hn::Set(df, p.tensor_scale));
    const VI cb = hn::BitCast(di, hn::Min(hn::Max(s, hn::Set(df, 0x1p-6f)), hn::Set(df, 448.0f)));
    const VI r = hn::ShiftRight<20>(hn::Add(hn::Add(cb, hn::Set(di, 0x7FFFF)), hn::And(hn::ShiftRight<20>(cb), hn::Set(di, 1))));
    code = hn::Sub(r, hn::Set(di, 120 << 3));
    mult = hn::Div(hn::Set(df, e.one), hn::BitCast(df, hn::ShiftLeft<20>(r)));  // the code's value: r's bits
  } else {
    // e4m3 satfinite of amax * (S_enc / 6); the multiplier 1 / (s * (1 / S_enc)) capped.
    code = E4m3SatfiniteCodes(hn::Mul(a, hn::Set(df, e.te_k)));
    const VF value = E4m3CodeValues(code);
    mult = hn::Min(hn::Div(hn::Set(df, 1.0f), hn::Mul(value, hn::Set(df, e.te_inv))), hn::Set(df, 0x1.fffffep127f));
  }
  StoreBatch(p, b0, code, mult, bits, [&](VF x, VF m) { return E2m1Codes(df, hn::Mul(x, m)); });
  return true;
#endif
}

// E2m1Codes with each zero code's sign by signed_zero: kept (true), always dropped (false), or
// dropped where the quotient q is a zero (underflow: the sign iff q < 0).
template <class D>
HWY_INLINE hn::Vec<hn::RebindToSigned<D>> E2m1CodesWithZeroSign(D df, hn::Vec<D> q, SignedZero rule) {
  const hn::RebindToSigned<D> di;
  const auto c = E2m1Codes(df, q);
  if (rule == SignedZero::keep) return c;
  const auto zero_code = hn::Eq(hn::And(c, hn::Set(di, 7)), hn::Zero(di));
  const auto clear =
      rule == SignedZero::drop ? zero_code : hn::And(zero_code, hn::RebindMask(di, hn::Eq(q, hn::Zero(df))));
  return hn::IfThenZeroElse(clear, c);
}

// One quotient's code in scalar: `nan_code` for a NaN (ModelOpt's table cast 7, XLA's convert 8),
// else clamped to +-6, its zero's sign by signed_zero.
HWY_INLINE std::int32_t ScalarCode(float q, std::int32_t nan_code, SignedZero rule) {
  if (nvfp4::is_nan_bits(nvfp4::bits(q))) return nan_code;
  const float a = std::fabs(q);
  const auto mag = nvfp4::e2m1_magnitude_code(a > 6.0f ? 6.0f : a);
  return nvfp4::zero_sign(rule, static_cast<std::uint8_t>(mag | ((nvfp4::bits(q) >> 31) << 3)), q);
}

// plan.general in batches (one block per lane, as QuantizeBlockBatch): the block scales by
// general_block_code's steps in vectors of the same IEEE operations (the amax / 6 rounded to the
// input's dtype by the integer trick under scale_arith=input; E4M3 subnormals below 2^-6 by
// v * 2^9 + 2^23, exact and RNE), then each block's x / d or x * m as QuantizeGeneralBlock's
// vector branch. Returns false, having written nothing, where QuantizeGeneralBlock would take
// its scalar branch for a block of the batch (a non-finite amax, d or m not finite or zero).
template <DType kDtype>
HWY_INLINE bool QuantizeGeneralBatch(const Nvfp4Plan& p, std::int64_t b0) {
#if HWY_TARGET == HWY_SCALAR
  (void)p, (void)b0;
  return false;
#else
  const DF df;
  const DI di;
  VI bits[kNvfp4Block];  // kBatchLanes blocks of kPer vectors
  VI amax;
  if (!LoadFiniteBlockBatch<kDtype>(p, b0, bits, amax)) return false;
  const VF a = hn::BitCast(df, amax);
  const float t = p.tensor_scale;
  VF s;
  if (p.multiplier) {
    VF r = hn::Div(a, hn::Set(df, 6.0f));
    if (p.input_arith && p.dtype == DType::bf16) r = RoundedToBf16(df, r);  // a is finite: no NaN
    else if (p.input_arith && p.dtype == DType::f16) r = RoundedToF16(df, r);
    s = hn::Mul(hn::Set(df, t), r);
  } else if (p.fused) {
    s = hn::Div(a, hn::Set(df, 6.0f * t));
  } else {
    s = hn::Div(a, hn::Set(df, 6.0f));
    if (p.two_level) s = hn::Div(s, hn::Set(df, t));
  }
  if (p.zero_one) s = hn::IfThenElse(hn::Eq(s, hn::Zero(df)), hn::Set(df, 1.0f), s);
  // s >= 0 here (amax finite, t finite and positive: EpilogueOf's checks), never NaN.
  VI code = E4m3SatfiniteCodes(hn::Min(hn::Max(s, hn::Set(df, p.block_min)), hn::Set(df, 448.0f)));
  if (p.zero_eps) code = hn::IfThenElse(hn::Eq(code, hn::Zero(di)), hn::Set(di, 0x20), code);
  const VF value = E4m3CodeValues(code);
  VF d;
  if (p.divide) {
    d = p.multiplier ? hn::Div(value, hn::Set(df, t)) : p.two_level ? hn::Mul(value, hn::Set(df, t)) : value;
  } else {
    const float one = p.two_level ? nvfp4::div_x86(1.0f, t) : 1.0f;
    d = hn::Div(hn::Set(df, one), value);
  }
  const VI d_mag = hn::And(hn::BitCast(di, d), hn::Set(di, 0x7FFFFFFF));
  if (!hn::AllTrue(di, hn::And(hn::Gt(d_mag, hn::Zero(di)), hn::Lt(d_mag, hn::Set(di, 0x7F800000))))) return false;
  StoreBatch(p, b0, code, d, bits, [&](VF x, VF o) {
    return E2m1CodesWithZeroSign(df, p.divide ? hn::Div(x, o) : hn::Mul(x, o), p.signed_zero);
  });
  return true;
#endif
}

// XLA's FTZ on x86 (quotient=prescaled): nvfp4::flush_if in vectors.
template <class D>
HWY_INLINE hn::Vec<D> FlushIf(bool ftz, D df, hn::Vec<D> v) {
  const hn::RebindToSigned<D> di;
  return ftz ? hn::BitCast(df, FlushSubnormalBits(di, hn::BitCast(di, v))) : v;
}

// quotient=prescaled in batches (one block per lane, as QuantizeBlockBatch): QuantizePrescaledBlock's
// steps in vectors of the same operations. With t > 0, x' = flush(flush(x) * t) is nondecreasing
// in |x|, so the |x'| max of a block is that of its |x| max (a prescaled contract has no tiles:
// block_rows=1). A block whose scale code is 0 has m = 1 / 0 = inf, where the one-block steps go
// one by one: x' * inf is +-inf (code 7 or 15, as the vectors encode it) or, for x' = 0, NaN
// (code 8, XLA's convert), so those lanes stay in the batch too. Returns false, having written
// nothing, when a block holds an inf or a NaN.
template <DType kDtype>
HWY_INLINE bool QuantizePrescaledBatch(const Nvfp4Plan& p, std::int64_t b0) {
#if HWY_TARGET != HWY_SCALAR
  VI bits[kNvfp4Block];  // kBatchLanes blocks of kPer vectors
  VI amax;
  if (!LoadFiniteBlockBatch<kDtype>(p, b0, bits, amax)) return false;
  const DF df;
  const DI di;
  const auto flush = [&](VF v) { return FlushIf(p.ftz, df, v); };
  const VF t = hn::Set(df, p.t_reciprocal);
  const VF a = flush(hn::Mul(flush(hn::BitCast(df, amax)), t));
  const VF r = flush(hn::Mul(a, hn::Set(df, 1.0f / 6.0f)));
  const VI code = E4m3SatfiniteCodes(hn::Min(hn::Max(r, hn::Set(df, p.block_min)), hn::Set(df, 448.0f)));
  const VF m = flush(hn::Div(hn::Set(df, 1.0f), flush(E4m3CodeValues(code))));
  StoreBatch(p, b0, code, m, bits, [&](VF x, VF mv) {
    const VF q = flush(hn::Mul(flush(hn::Mul(flush(x), t)), mv));
    return hn::IfThenElse(hn::RebindMask(di, hn::IsNaN(q)), hn::Set(di, 8), E2m1CodesWithZeroSign(df, q, p.signed_zero));
  });
  return true;
#else
  (void)p, (void)b0;
  return false;  // one lane: the one-block steps
#endif
}

// plan.general (finite inputs, except torchao's propagate, which never takes it): the block scale
// in scalar fp32 by the plan's steps, then the elements x / d or x * m in vectors while d (m) is
// finite and nonzero, each zero code's sign by signed_zero; otherwise one by one, where a NaN
// quotient (0 / 0 against a zero tensor scale) is code 7.
HWY_INLINE void QuantizeGeneralBlock(const Nvfp4Plan& p, const float* x, float amax, std::uint32_t amax_bits,
                                     std::int64_t b, std::uint8_t* out) {
  const DF16 df;
  const DI16 di;
  const int n = static_cast<int>(hn::Lanes(df));
  HWY_ALIGN std::int32_t codes[kNvfp4Block];
  const std::uint8_t code = nvfp4::general_block_code(p, amax);
  p.scale[b] = code;
  const float one = p.two_level ? nvfp4::div_x86(1.0f, p.tensor_scale) : 1.0f;
  const float m = p.divide ? nvfp4::general_block_descale(p, code)
                           : nvfp4::div_x86(one, nvfp4::e4m3_scale_value(code));
  const bool vector = amax_bits < 0x7F800000u && std::isfinite(m) && m != 0.0f;
  if (vector) {
    const auto mv = hn::Set(df, m);
    for (int i = 0; i < kNvfp4Block; i += n) {
      const auto q = p.divide ? hn::Div(hn::Load(df, x + i), mv) : hn::Mul(hn::Load(df, x + i), mv);
      hn::Store(E2m1CodesWithZeroSign(df, q, p.signed_zero), di, codes + i);
    }
  } else {
    for (int i = 0; i < kNvfp4Block; ++i) {
      if (p.divide) {
        codes[i] = ScalarCode(nvfp4::div_x86(x[i], m), 7, p.signed_zero);
      } else {
        const float q = nvfp4::mul_multiplier_x86(x[i], m);
        const std::uint8_t c = nvfp4::e2m1_code(x[i], m);
        codes[i] = nvfp4::is_nan_bits(nvfp4::bits(q)) ? c : nvfp4::zero_sign(p.signed_zero, c, q);
      }
    }
  }
  for (int i = 0; i < kNvfp4Block; i += 2) out[i / 2] = static_cast<std::uint8_t>(codes[i] | (codes[i + 1] << 4));
}

// quotient=prescaled: x' = x * (1 / t) in vectors (ftz: flushed), its |x'| max, the block
// scale e4m3(clamp(amax' * fp32(1 / 6), block_min, 448)) and m = 1 / s in scalar fp32, then the
// codes of x' * m in vectors while the block and m are finite and nonzero; otherwise one by one,
// where a NaN quotient is code 8 (XLA's convert).
HWY_INLINE void QuantizePrescaledBlock(const Nvfp4Plan& p, float* x, std::int64_t b, std::uint8_t* out) {
  const DF16 df;
  const DI16 di;
  const int n = static_cast<int>(hn::Lanes(df));
  const auto abs_mask = hn::Set(di, 0x7FFFFFFF);
  const auto flush = [&](auto v) { return FlushIf(p.ftz, df, v); };
  const bool finite_t = std::isfinite(p.t_reciprocal) && p.t_reciprocal != 0.0f;
  auto mx = hn::Zero(di);
  for (int i = 0; i < kNvfp4Block; i += n) {
    if (finite_t) {
      const auto v = flush(hn::Mul(flush(hn::Load(df, x + i)), hn::Set(df, p.t_reciprocal)));
      hn::Store(v, df, x + i);
    } else {
      for (int j = 0; j < n; ++j) x[i + j] = nvfp4::xla_mul(p.ftz, x[i + j], p.t_reciprocal);
    }
    mx = hn::Max(mx, hn::And(hn::BitCast(di, hn::Load(df, x + i)), abs_mask));
  }
  const auto amax_bits = static_cast<std::uint32_t>(hn::GetLane(hn::MaxOfLanes(di, mx)));
  // |x'| of a NaN is a positive NaN: the scale's NaN code is 0x7F.
  const float amax = nvfp4::is_nan_bits(amax_bits) ? nvfp4::value(0x7FC00000u) : nvfp4::value(amax_bits);
  const float r = nvfp4::xla_mul(p.ftz, amax, 1.0f / 6.0f);
  const std::uint8_t code = nvfp4::is_nan_bits(nvfp4::bits(r))
                                ? std::uint8_t{0x7F}
                                : nvfp4::e4m3_satfinite_code(r < p.block_min ? p.block_min : r > 448.0f ? 448.0f : r);
  p.scale[b] = code;
  const float m = nvfp4::xla_reciprocal(p.ftz, nvfp4::e4m3_scale_value(code));
  HWY_ALIGN std::int32_t codes[kNvfp4Block];
  if (amax_bits < 0x7F800000u && std::isfinite(m) && m != 0.0f) {
    const auto mv = hn::Set(df, m);
    for (int i = 0; i < kNvfp4Block; i += n) {
      const auto q = flush(hn::Mul(hn::Load(df, x + i), mv));
      hn::Store(E2m1CodesWithZeroSign(df, q, p.signed_zero), di, codes + i);
    }
  } else {
    for (int i = 0; i < kNvfp4Block; ++i) {
      codes[i] = ScalarCode(nvfp4::xla_mul(p.ftz, x[i], m), 8, p.signed_zero);
    }
  }
  for (int i = 0; i < kNvfp4Block; i += 2) out[i / 2] = static_cast<std::uint8_t>(codes[i] | (codes[i + 1] << 4));
}

// te four_over_six (finite inputs): the two candidate scales e4m3((amax / 6) * S_enc * 1.5) and
// e4m3((amax / 6) * S_enc), the codes under each in vectors, each candidate's error summed in
// order over its 16 decoded values ((code value * s) * amax_tensor) / (6 * E), and the smaller
// error's candidate (a tie keeps the second).
HWY_INLINE void FourOverSixBlock(const Nvfp4Plan& p, const float* x, float amax, std::int64_t b, std::uint8_t* out) {
  static constexpr float kE2m1[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                      -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  const DF16 df;
  const DI16 di;
  const int n = static_cast<int>(hn::Lanes(df));
  const float base = (amax / 6.0f) * p.tensor_scale;
  const float decode = 1.0f / p.tensor_scale;
  std::uint8_t scale[2];
  HWY_ALIGN std::int32_t codes[2][kNvfp4Block];
  float err[2] = {0.0f, 0.0f};
  for (int k = 0; k < 2; ++k) {
    const float s = k == 0 ? base * 1.5f : base;
    scale[k] = nvfp4::e4m3_satfinite_code(s > 448.0f ? 448.0f : s);
    const float sf = nvfp4::e4m3_scale_value(scale[k]);
    const float m = std::min(1.0f / (sf * decode), 0x1.fffffep127f);
    const auto mv = hn::Set(df, m);
    for (int i = 0; i < kNvfp4Block; i += n) hn::Store(E2m1Codes(df, hn::Mul(hn::Load(df, x + i), mv)), di, codes[k] + i);
    for (int i = 0; i < kNvfp4Block; ++i) {
      const float d = ((kE2m1[codes[k][i]] * sf) * p.amax_tensor) / p.error_denom - x[i];
      err[k] += p.mse ? d * d : std::fabs(d);
    }
  }
  const int pick = err[0] < err[1] ? 0 : 1;
  p.scale[b] = scale[pick];
  for (int i = 0; i < kNvfp4Block; i += 2)
    out[i / 2] = static_cast<std::uint8_t>(codes[pick][i] | (codes[pick][i + 1] << 4));
}

// One block by the scalar steps (any input): amax, scale and multiplier in scalar fp32, the
// elements in vectors when the block and its multiplier are finite.
template <DType kDtype>
HWY_INLINE void QuantizeOneBlock(const Nvfp4Plan& p, std::int64_t b) {
  const DF16 df;
  const DI16 di;
  constexpr std::int64_t kSize = kDtype == DType::f32 ? 4 : 2;
  const int n = static_cast<int>(hn::Lanes(df));
  HWY_ALIGN float x[kNvfp4Block];
  HWY_ALIGN std::int32_t codes[kNvfp4Block];
  const std::uint8_t* src = p.data + b * kNvfp4Block * kSize;
  auto m = hn::Zero(di);
  for (int i = 0; i < kNvfp4Block; i += n) {
    const auto v = LoadWidened(df, kDtype, src + i * kSize);
    hn::Store(v, df, x + i);
    m = hn::Max(m, hn::And(hn::BitCast(di, v), hn::Set(di, 0x7FFFFFFF)));
  }
  const std::uint32_t amax_bits =
      p.tile_amax ? p.tile_amax[b] : static_cast<std::uint32_t>(hn::GetLane(hn::MaxOfLanes(di, m)));
  // torch.amax's NaN is the canonical one; only its E4M3 code (0x7F) matters here.
  const float amax = nvfp4::is_nan_bits(amax_bits) ? nvfp4::value(0x7FC00000u) : nvfp4::value(amax_bits);
  std::uint8_t* out = p.payload + b * (kNvfp4Block / 2);
  if (p.prescaled) {
    QuantizePrescaledBlock(p, x, b, out);
    return;
  }
  if (p.general) {
    QuantizeGeneralBlock(p, x, amax, amax_bits, b, out);
    return;
  }
  if (p.four_over_six) {
    FourOverSixBlock(p, x, amax, b, out);
    return;
  }
  const nvfp4::BlockScale s =
      p.te ? nvfp4::te_block_scale(amax, p.tensor_scale) : nvfp4::block_scale(p.two_level, amax, p.tensor_scale);
  p.scale[b] = s.code;
  if (amax_bits < 0x7F800000u && std::isfinite(s.multiplier)) {
    const auto mul = hn::Set(df, s.multiplier);
    for (int i = 0; i < kNvfp4Block; i += n) hn::Store(E2m1Codes(df, hn::Mul(hn::Load(df, x + i), mul)), di, codes + i);
  } else {
    for (int i = 0; i < kNvfp4Block; ++i) codes[i] = nvfp4::e2m1_code(x[i], s.multiplier);
  }
  for (int i = 0; i < kNvfp4Block; i += 2) out[i / 2] = static_cast<std::uint8_t>(codes[i] | (codes[i + 1] << 4));
}

template <DType kDtype>
void QuantizeBlocksOf(const Nvfp4Plan& plan, std::int64_t first, std::int64_t last) {
  // A local copy: the byte stores below may alias anything, which would make the compiler
  // reload every plan field after each of them.
  const Nvfp4Plan p = plan;
  const Epilogue e = EpilogueOf(p);
  constexpr std::int64_t kSize = kDtype == DType::f32 ? 4 : 2;
  constexpr std::int64_t kBatch = static_cast<std::int64_t>(hn::MaxLanes(DF()));
  std::int64_t b = first;
  // The general steps batch where their tensor scale is finite and positive (ftz: JAX's, which
  // is prescaled and never general).
  const bool general_batch = p.general && !p.prescaled && !p.ftz && !p.four_over_six &&
                             (p.two_level || p.multiplier ? std::isfinite(p.tensor_scale) && p.tensor_scale > 0.0f
                                                          : true);
  // JAX's steps batch where x * (1 / t) is monotone in |x| (t finite and positive).
  const bool prescaled_batch = p.prescaled && std::isfinite(p.t_reciprocal) && p.t_reciprocal > 0.0f;
  if (kBatch > 1 && (general_batch || prescaled_batch || (e.vector && !p.general && !p.four_over_six))) {
    for (; b + kBatch <= last; b += kBatch) {
      PrefetchAheadBytes(p.data + b * kNvfp4Block * kSize, kBatch * kNvfp4Block * kSize);
      const bool done = p.prescaled ? QuantizePrescaledBatch<kDtype>(p, b)
                        : p.general ? QuantizeGeneralBatch<kDtype>(p, b)
                                    : QuantizeBlockBatch<kDtype>(p, e, b);
      if (!done)
        for (std::int64_t j = 0; j < kBatch; ++j) QuantizeOneBlock<kDtype>(p, b + j);
    }
  }
  for (; b < last; ++b) {
    PrefetchAheadBytes(p.data + b * kNvfp4Block * kSize, kNvfp4Block * kSize);
    QuantizeOneBlock<kDtype>(p, b);
  }
  hwy::FlushStream();  // the streamed lines are visible to other threads once this returns
}

void QuantizeNvfp4Blocks(const Nvfp4Plan& p, std::int64_t first, std::int64_t last) {
  switch (p.dtype) {
    case DType::f32: return QuantizeBlocksOf<DType::f32>(p, first, last);
    case DType::bf16: return QuantizeBlocksOf<DType::bf16>(p, first, last);
    default: return QuantizeBlocksOf<DType::f16>(p, first, last);
  }
}

}  // namespace qexact::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qexact::kernels {
HWY_EXPORT(Nvfp4AbsMaxBits);
HWY_EXPORT(Nvfp4BlockMaxima);
HWY_EXPORT(QuantizeNvfp4Blocks);

std::uint32_t nvfp4_abs_max_bits(DType dtype, const std::uint8_t* data, std::int64_t first, std::int64_t last) {
  return HWY_DYNAMIC_DISPATCH(Nvfp4AbsMaxBits)(dtype, data, first, last);
}
void nvfp4_block_maxima(DType dtype, const std::uint8_t* data, std::int64_t first, std::int64_t last,
                        std::uint32_t* out) {
  HWY_DYNAMIC_DISPATCH(Nvfp4BlockMaxima)(dtype, data, first, last, out);
}
void quantize_nvfp4_blocks(const Nvfp4Plan& p, std::int64_t first, std::int64_t last) {
  HWY_DYNAMIC_DISPATCH(QuantizeNvfp4Blocks)(p, first, last);
}
}  // namespace qexact::kernels
#endif
