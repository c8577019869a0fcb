// Fast int8.token kernel (contracts §4): one scale per row over the complete last axis, by the
// path the shared selector chose from the working-buffer budget:
//   single pass       the row is read once from memory: a contiguous row is reduced in place
//                     and quantized from its own bytes, still in cache (the row is its own
//                     working buffer, at most as large as the fp32 one the budget admits); a
//                     strided row is gathered into this thread's fp32 working buffer (reduced
//                     on the way), then quantized from the buffer;
//   two passes        pass 1 reduces the row from the source chunk by chunk, pass 2 reads the
//                     source again chunk by chunk and quantizes: nothing row-sized is held.
// Both apply the same lane arithmetic to the same values, so they give the same bytes.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/int8/int8_token.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <vector>

#include "kernels/cpu/int8/int8_span-inl.h"

HWY_BEFORE_NAMESPACE();
namespace qexact::kernels::HWY_NAMESPACE {

template <IntRounding kRounding, bool kDivide, DType kRound>
void TokenRows(const Int8Plan& p, std::int64_t first, std::int64_t last) {
  const std::int64_t cols = p.cols;
  const auto chunk_span = [&](const std::uint8_t* row, std::int64_t start) {
    return Span{row + start * p.col_stride * static_cast<std::int64_t>(p.elem_bytes), std::min(p.chunk, cols - start),
                p.col_stride};
  };
  const bool in_place = p.single_pass && p.col_stride == 1;
  std::vector<float> working(p.single_pass && !in_place ? static_cast<std::size_t>(cols) : 0);
  for (std::int64_t row = first; row < last; ++row) {
    if (p.nonfinite->load(std::memory_order_relaxed)) break;
    const std::uint8_t* source = p.element(p.rows.offset(row));
    std::int8_t* out = p.payload + row * cols;
    std::uint32_t amax = 0;
    if (in_place) {
      amax = AbsMaxBitsOfRun(p.dtype, source, cols);
    } else if (p.single_pass) {
      amax = LoadF32AbsMaxBits(p.dtype, Span{source, cols, p.col_stride}, working.data());
    } else {
      for (std::int64_t start = 0; start < cols; start += p.chunk)
        amax = std::max(amax, AbsMaxBits(p.dtype, chunk_span(source, start)));
    }
    if (amax >= kNonFiniteBits) {
      p.nonfinite->store(true, std::memory_order_relaxed);
      break;
    }
    const Int8Quotient q = int8_scale_domain(p, std::bit_cast<float>(amax), row);
    if (in_place) {
      QuantizeSpan<kRounding, kDivide, kRound>(p, q, p.dtype, Span{source, cols, 1}, out);
    } else if (p.single_pass) {
      QuantizeSpan<kRounding, kDivide, kRound>(p, q, DType::f32,
                                               Span{reinterpret_cast<const std::uint8_t*>(working.data()), cols, 1}, out);
    } else {
      for (std::int64_t start = 0; start < cols; start += p.chunk)
        QuantizeSpan<kRounding, kDivide, kRound>(p, q, p.dtype, chunk_span(source, start), out + start);
    }
  }
  hwy::FlushStream();  // the streamed payload is visible to other threads once this returns
}

void QuantizeInt8TokenRows(const Int8Plan& p, std::int64_t first, std::int64_t last) {
  WithElementArithmetic(p, [&]<IntRounding kRounding, bool kDivide, DType kRound>() {
    TokenRows<kRounding, kDivide, kRound>(p, first, last);
  });
}

}  // namespace qexact::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qexact::kernels {
HWY_EXPORT(QuantizeInt8TokenRows);
void quantize_int8_token_rows(const Int8Plan& p, std::int64_t first, std::int64_t last) {
  HWY_DYNAMIC_DISPATCH(QuantizeInt8TokenRows)(p, first, last);
}
}  // namespace qexact::kernels
#endif
