// Fast int8.group kernel (ggml q8_0): one scale per `group` consecutive values of a row. A
// unit is one group, numbered in C order (the scale's flat index): reduce, form the scale,
// quantize the group again from cache.
//
// Contiguous groups of whole vectors (q8_0's 32 values on every target) go a vector of groups
// at a time: each group's |x| maximum folded into one vector, a vector's worth of those turned
// into one vector of maxima (lane j: group j), and the scale steps (contracts §3.2 steps 2-4)
// run on that vector, one lane per group, with the same IEEE operations as int8_scale_domain;
// the payload of two groups then leaves in one 64-byte store. Per group that replaces a
// horizontal reduction, two scalar divisions and a scalar f16 round trip with a sixteenth of
// their vector forms.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/int8/int8_group.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/cpu/int8/int8_span-inl.h"

HWY_BEFORE_NAMESPACE();
namespace qexact::kernels::HWY_NAMESPACE {

// Groups are handled in batches: reduce every group of the batch, form their scales (the
// scalar divisions of independent groups overlap), then quantize the batch, still in L1.
constexpr std::int64_t kBatch = 64;

// The groups of one batch: where each starts, and its quotient.
struct GroupBatch {
  Span spans[kBatch];
  Int8Quotient q[kBatch];
};

#if HWY_TARGET != HWY_SCALAR
using DF = hn::ScalableTag<float>;
using DI = hn::RebindToSigned<DF>;
using VF = hn::Vec<DF>;
constexpr std::int64_t kLanes = static_cast<std::int64_t>(hn::MaxLanes(DF()));

// std::max(a, b) lane by lane: b only where a < b (on ties a, whatever the zeros' signs).
HWY_INLINE VF StdMax(VF a, VF b) { return hn::IfThenElse(hn::Lt(a, b), b, a); }

// Steps 2-4 of the groups whose amaxes (finite, >= +0) are the lanes of `amax`, as
// int8_scale_domain does them one at a time: the scales stored at `scale_out` (f32 or f16
// bits, all lanes), each group's operand, and the value that is 0 exactly where its payload
// is 0.
HWY_INLINE void ScaleDomains(const Int8Plan& p, VF amax, void* scale_out, float* operand, float* divisor) {
  const DF df;
  const hn::RebindToUnsigned<DF> du;
  const auto qmax = hn::Set(df, p.qmax);
  const auto smin = hn::Set(df, p.scale_min);
  const VF s = p.scale_mode == ScaleMode::before ? hn::Div(StdMax(amax, smin), qmax) : StdMax(hn::Div(amax, qmax), smin);
  VF stored = s;
  if (p.f16_scale) {
    const auto h = NarrowToHalfBits(du, hn::BitCast(du, s));
    const hn::Rebind<std::uint16_t, DF> d16;
    hn::StoreU(hn::DemoteTo(d16, hn::BitCast(DI(), h)), d16, static_cast<std::uint16_t*>(scale_out));
    stored = WidenHalfBits(df, h);
  } else {
    hn::StoreU(s, df, static_cast<float*>(scale_out));
  }
  VF d, op;
  switch (p.quotient) {
    case Quotient::divide:
      d = stored;
      op = stored;
      break;
    case Quotient::reciprocal:
      d = StdMax(amax, smin);
      op = hn::Div(qmax, d);
      break;
    case Quotient::inv_scale:
      d = s;
      op = hn::Div(hn::Set(df, 1.0f), s);
      break;
  }
  hn::StoreU(d, df, divisor);
  hn::StoreU(op, df, operand);
}

// The batch path: `size` groups of `group` contiguous values (a multiple of the lanes). False,
// with *p.nonfinite set, where a group holds a NaN or an infinity.
template <IntRounding kRounding, bool kDivide>
HWY_INLINE bool VectorBatch(const Int8Plan& p, std::int64_t batch, std::int64_t size, GroupBatch& g) {
  const DF df;
  const DI di;
  const std::int64_t per_group = p.group / kLanes;
  const auto magnitude = hn::Set(di, 0x7FFFFFFF);
  const std::int64_t bytes = static_cast<std::int64_t>(p.elem_bytes);
  HWY_ALIGN float operand[kBatch], divisor[kBatch];
  HWY_ALIGN std::uint32_t scales[kBatch];  // f32, or f16 bits in the first half
  for (std::int64_t c = 0; c < size; c += kLanes) {
    hn::Vec<DI> level[kLanes];
    for (std::int64_t j = 0; j < kLanes; ++j) {
      auto m = hn::Zero(di);
      if (c + j < size)
        for (std::int64_t v = 0; v < per_group; ++v) {
          const std::uint8_t* at = g.spans[c + j].first + v * kLanes * bytes;
          m = hn::Max(m, hn::And(hn::BitCast(di, LoadWidened(df, p.dtype, at)), magnitude));
        }
      level[j] = m;
    }
    const auto amax = LaneMaxima<static_cast<int>(kLanes)>(di, level);
    if (!hn::AllFalse(di, hn::Gt(amax, hn::Set(di, static_cast<std::int32_t>(kNonFiniteBits) - 1)))) {
      p.nonfinite->store(true, std::memory_order_relaxed);
      return false;
    }
    void* scale_out = p.f16_scale ? static_cast<void*>(reinterpret_cast<std::uint16_t*>(scales) + c)
                                  : static_cast<void*>(scales + c);
    ScaleDomains(p, hn::BitCast(df, amax), scale_out, operand + c, divisor + c);
  }
  const std::size_t scale_bytes = p.f16_scale ? 2 : 4;
  std::memcpy(static_cast<std::uint8_t*>(p.scale) + static_cast<std::size_t>(batch) * scale_bytes, scales,
              static_cast<std::size_t>(size) * scale_bytes);
  for (std::int64_t j = 0; j < size; ++j) g.q[j] = {divisor[j] == 0.0f, operand[j]};
  return true;
}

// Steps 4-5 of a batch the batch path formed: its `size` groups' payloads are consecutive, so
// the batch's vectors are encoded in order, four to a CodeWriter store, each by its group's
// encoder (rebuilt when the group changes; a zero-payload group's codes are 0).
template <IntRounding kRounding, bool kDivide>
HWY_INLINE void EncodeBatch(const Int8Plan& p, const GroupBatch& g, std::int64_t size, std::uint8_t* out) {
  const DF df;
  const std::int64_t per_group = p.group / kLanes;
  const std::int64_t bytes = static_cast<std::int64_t>(p.elem_bytes);
  Encoder<kRounding, kDivide, DType::f32> encode(1.0f, p.lowest);
  std::int64_t encoder_group = -1;
  // The batch's next vector: vector k of group j (counters, not a division per vector).
  std::int64_t j = 0, k = 0;
  const auto next_codes = [&]() {
    const std::int64_t group = j, at = k;
    if (++k == per_group) k = 0, ++j;
    if (g.q[group].zero_payload) return hn::Zero(DI());
    if (group != encoder_group) {
      encode = Encoder<kRounding, kDivide, DType::f32>(g.q[group].operand, p.lowest);
      encoder_group = group;
    }
    return encode(LoadWidened(df, p.dtype, g.spans[group].first + at * kLanes * bytes));
  };
  const std::int64_t vectors = size * per_group;
  std::int64_t t = 0;
  for (; t + 4 <= vectors; t += 4) {
    const auto c0 = next_codes();
    const auto c1 = next_codes();
    const auto c2 = next_codes();
    const auto c3 = next_codes();
    CodeWriter::Store4(c0, c1, c2, c3, out + t * kLanes);
  }
  for (; t < vectors; ++t) CodeWriter::Store(next_codes(), out + t * kLanes);
}
#endif

template <IntRounding kRounding, bool kDivide, DType kRound>
void GroupUnits(const Int8Plan& p, std::int64_t first, std::int64_t last) {
  const std::int64_t per_row = p.cols / p.group;
  std::int64_t row = first / per_row, g = first % per_row;
  std::int64_t row_start = p.rows.offset(row);
  GroupBatch b;
  std::uint32_t amax[kBatch];
#if HWY_TARGET != HWY_SCALAR
  // torch's steps (the scale rounded to the input's dtype, eps or x / 0 for a zero scale) stay
  // with the per-group path: in the batch they measured no faster on AVX-512 and slower on AVX2
  // (int8.ct.group, groups of 128: 0.38 -> 0.47 ns/element out of cache at one thread).
  const bool vector_batch = p.col_stride == 1 && p.group % kLanes == 0 && !p.torch_steps();
#else
  const bool vector_batch = false;
#endif
  for (std::int64_t batch = first; batch < last; batch += kBatch) {
    if (p.nonfinite->load(std::memory_order_relaxed)) break;
    const std::int64_t size = std::min(kBatch, last - batch);
    for (std::int64_t j = 0; j < size; ++j) {
      b.spans[j] = Span{p.element(row_start + g * p.group * p.col_stride), p.group, p.col_stride};
      if (++g == per_row && batch + j + 1 < last) {
        g = 0;
        row_start = p.rows.offset(++row);
      }
    }
    if (vector_batch) {
#if HWY_TARGET != HWY_SCALAR
      // A quotient rounded to the input's dtype is one of torch's steps, never batched: the
      // batch is not compiled for it.
      if constexpr (kRound == DType::f32) {
        if (!VectorBatch<kRounding, kDivide>(p, batch, size, b)) break;
        EncodeBatch<kRounding, kDivide>(p, b, size, reinterpret_cast<std::uint8_t*>(p.payload + batch * p.group));
      }
#endif
      continue;
    }
    std::uint32_t any = 0;
    for (std::int64_t j = 0; j < size; ++j) {
      amax[j] = AbsMaxBits(p.dtype, b.spans[j]);
      any = std::max(any, amax[j]);
    }
    if (any >= kNonFiniteBits) {
      p.nonfinite->store(true, std::memory_order_relaxed);
      break;
    }
    for (std::int64_t j = 0; j < size; ++j) b.q[j] = int8_scale_domain(p, std::bit_cast<float>(amax[j]), batch + j);
    for (std::int64_t j = 0; j < size; ++j)
      QuantizeSpan<kRounding, kDivide, kRound>(p, b.q[j], p.dtype, b.spans[j], p.payload + (batch + j) * p.group);
  }
  hwy::FlushStream();  // the streamed payload is visible to other threads once this returns
}

void QuantizeInt8GroupUnits(const Int8Plan& p, std::int64_t first, std::int64_t last) {
  WithElementArithmetic(p, [&]<IntRounding kRounding, bool kDivide, DType kRound>() {
    GroupUnits<kRounding, kDivide, kRound>(p, first, last);
  });
}

}  // namespace qexact::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qexact::kernels {
HWY_EXPORT(QuantizeInt8GroupUnits);
void quantize_int8_group_units(const Int8Plan& p, std::int64_t first, std::int64_t last) {
  HWY_DYNAMIC_DISPATCH(QuantizeInt8GroupUnits)(p, first, last);
}
}  // namespace qexact::kernels
#endif
