// Byte codes held in the int32 lanes of a vector (0..255 each), stored as one byte per lane:
// the payload writer of the fast quantizers (a Highway per-target header: foreach_target
// includes it once per target). Truncating a lane to its low byte is exact for such codes (one
// vpmovdb on AVX-512, where a saturating demotion takes two packs). Callers that stream must
// call hwy::FlushStream() before their threads' results are read.
#if defined(QEXACT_KERNELS_CPU_COMMON_BYTE_CODE_WRITER_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef QEXACT_KERNELS_CPU_COMMON_BYTE_CODE_WRITER_INL_H_
#undef QEXACT_KERNELS_CPU_COMMON_BYTE_CODE_WRITER_INL_H_
#else
#define QEXACT_KERNELS_CPU_COMMON_BYTE_CODE_WRITER_INL_H_
#endif

#include <hwy/highway.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

HWY_BEFORE_NAMESPACE();
namespace qexact::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Writes the codes of a run's vectors: four vectors' bytes at a time, with one streaming store
// where the destination is 64-byte aligned (the payload is not read again: no line is fetched
// for it), else ordinary stores.
class CodeWriter {
 public:
  using DF = hn::ScalableTag<float>;
  using DU = hn::RebindToUnsigned<DF>;
  using VI = hn::Vec<hn::RebindToSigned<DF>>;
  using D8 = hn::Rebind<std::uint8_t, DU>;
  static constexpr std::int64_t kN = static_cast<std::int64_t>(hn::MaxLanes(DF()));

  HWY_INLINE static void Store(VI code, std::uint8_t* out) {
    hn::StoreU(hn::TruncateTo(D8(), hn::BitCast(DU(), code)), D8(), out);
  }

  HWY_INLINE static void Store4(VI c0, VI c1, VI c2, VI c3, std::uint8_t* out) {
#if HWY_TARGET <= HWY_AVX3
    if ((reinterpret_cast<std::uintptr_t>(out) & 63) == 0) {
      // Two saturating packs (exact: codes are 0..255) leave, in each 128-bit lane L, the four
      // codes of lanes 4L..4L+3 of c0, then of c1, c2, c3; one dword permutation puts them in
      // order. Four instructions for 64 codes, where narrowing each vector takes two.
      const __m512i c01 = _mm512_packus_epi32(c0.raw, c1.raw);
      const __m512i c23 = _mm512_packus_epi32(c2.raw, c3.raw);
      const __m512i packed = _mm512_packus_epi16(c01, c23);
      const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
      _mm512_stream_si512(reinterpret_cast<__m512i*>(out), _mm512_permutexvar_epi32(order, packed));
      return;
    }
#endif
    Store(c0, out);
    Store(c1, out + kN);
    Store(c2, out + 2 * kN);
    Store(c3, out + 3 * kN);
  }

  // Two vectors of 16-bit code pairs held in 32-bit lanes (0..65535 each; lane i: the codes of
  // elements 2i and 2i + 1, first in the low byte): 4 Lanes bytes at out, in element order.
  HWY_INLINE static void StorePairs2(VI lo, VI hi, std::uint8_t* out) {
#if HWY_TARGET <= HWY_AVX3
    if ((reinterpret_cast<std::uintptr_t>(out) & 63) == 0) {
      // One saturating pack (exact: the pairs are 16-bit) leaves, in each 128-bit lane L, lo's
      // pairs 4L..4L+3 then hi's; one qword permutation puts them in order.
      const __m512i order = _mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7);
      _mm512_stream_si512(reinterpret_cast<__m512i*>(out), _mm512_permutexvar_epi64(order, _mm512_packus_epi32(lo.raw, hi.raw)));
      return;
    }
#endif
    const hn::Rebind<std::uint16_t, DU> d16;
    hn::StoreU(hn::TruncateTo(d16, hn::BitCast(DU(), lo)), d16, reinterpret_cast<std::uint16_t*>(out));
    hn::StoreU(hn::TruncateTo(d16, hn::BitCast(DU(), hi)), d16, reinterpret_cast<std::uint16_t*>(out + 2 * kN));
  }

  // The first count bytes of a partial vector's codes.
  HWY_INLINE static void StorePartial(VI code, std::int64_t count, std::uint8_t* out) {
    HWY_ALIGN std::uint8_t tmp[kN];
    hn::StoreU(hn::TruncateTo(D8(), hn::BitCast(DU(), code)), D8(), tmp);
    // count < Lanes <= sizeof tmp; the min makes that visible to GCC's overread check (ASan build).
    std::memcpy(out, tmp, std::min(static_cast<std::size_t>(count), sizeof tmp));
  }
};

}  // namespace qexact::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // QEXACT_KERNELS_CPU_COMMON_BYTE_CODE_WRITER_INL_H_ toggle
