// An exact sum of fp32 values, and its mean rounded once.
// Every finite fp32 value is an integer multiple of 2^-149 (the smallest subnormal) below
// 2^128, so a sum of them is an integer in units of 2^-149 of at most 277 + 63 bits for up to
// 2^63 addends. ExactSum holds that integer in 384-bit two's complement: additions and merges
// are exact, hence independent of order and of how the addends were split.
#pragma once
#include <array>
#include <cstdint>

#include "qexact/tensor.hpp"

namespace qexact::ref {

class ExactSum {
 public:
  static constexpr int kLimbs = 6;

  // v must be finite (throws bad_argument otherwise). Exact for up to 2^63 addends in all.
  void add(float v);
  // Adds another exact sum (a shard's partial sum, say); exact.
  void merge(const ExactSum& other);

  // sum / n (n >= 1) rounded once, to nearest even, to `out` (f32, bf16 or f16) with that
  // dtype's subnormals and its overflow to +/-inf; returned as the fp32 value it denotes (every
  // bf16 and f16 value is an fp32 value). An exact zero sum gives +0; a non-zero quotient that
  // rounds to zero keeps its sign.
  float mean(std::uint64_t n, DType out) const;

  bool operator==(const ExactSum&) const = default;

  // The 384-bit integer itself, least significant limb first: what a shard sends to its peers.
  const std::array<std::uint64_t, kLimbs>& limbs() const { return limbs_; }
  static ExactSum from_limbs(const std::array<std::uint64_t, kLimbs>& limbs) {
    ExactSum s;
    s.limbs_ = limbs;
    return s;
  }

 private:
  std::array<std::uint64_t, kLimbs> limbs_{};  // units of 2^-149, least significant limb first
};

}  // namespace qexact::ref
