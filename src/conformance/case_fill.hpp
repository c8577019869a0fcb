// Group layout and fillers shared by the adversarial cases (cases.cpp) and the discriminating
// probes (probes.cpp), so that both lay out groups alike and draw the same values from the same
// Rng calls.
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "conformance/cases.hpp"
#include "conformance/predicates.hpp"
#include "qexact/contract.hpp"
#include "qexact/tensor.hpp"

namespace qexact::conformance {

inline constexpr std::int64_t kCaseRowLen = 256;  // int8.token row length Q
inline constexpr std::int64_t kCaseHeadDim = 16;  // int8.block D (small: the references are scalar)

// Elements that share one scale (pool: one pooling window).
inline std::int64_t case_group_len(const Contract& c) {
  switch (c.family) {
    case Family::mx: return c.block;
    case Family::int8_group: return c.group;
    case Family::hif4: return 64;
    case Family::int8_token: return kCaseRowLen;
    case Family::int8_block: return static_cast<std::int64_t>(c.token_block) * kCaseHeadDim;
    case Family::pool: return c.pool;
    case Family::nvfp4: return kNvfp4Block;
    case Family::fp8_scaled:
      switch (c.granularity.kind) {
        case Granularity::group: return c.granularity.cols;
        case Granularity::tile: return static_cast<std::int64_t>(c.granularity.rows) * c.granularity.cols;
        case Granularity::head_block: return static_cast<std::int64_t>(c.granularity.rows) * kCaseHeadDim;
        case Granularity::tensor:
        case Granularity::row: return kCaseRowLen;
      }
  }
  return 1;
}

// A shape of at least n full groups.
inline Shape case_shape_for_groups(const Contract& c, std::int64_t n) {
  const std::int64_t len = case_group_len(c);
  switch (c.family) {
    case Family::mx:
    case Family::int8_group: return Shape{(n + 7) / 8, 8 * len};
    case Family::hif4: return Shape{(n + 3) / 4, 4 * len};
    case Family::int8_token: return Shape{n, kCaseRowLen};
    case Family::int8_block: return Shape{1, (n + 1) / 2 * c.token_block, 2, kCaseHeadDim};
    case Family::pool: return Shape{1, n * len, 8};
    case Family::nvfp4: return Shape{(n + 7) / 8, 8 * len};
    case Family::fp8_scaled:
      switch (c.granularity.kind) {
        case Granularity::group: return Shape{(n + 7) / 8, 8 * len};
        case Granularity::tile: return Shape{c.granularity.rows * ((n + 1) / 2), 2 * c.granularity.cols};
        case Granularity::head_block: return Shape{1, (n + 1) / 2 * c.granularity.rows, 2, kCaseHeadDim};
        case Granularity::tensor: return Shape{1, n * len};  // one scale, whatever n
        case Granularity::row: return Shape{n, kCaseRowLen};
      }
  }
  return Shape{n, len};
}

inline double pow2(int k) { return std::ldexp(1.0, k); }

// Fills `size` elements with uniform(-1, 1) * scale.
inline std::vector<float> uniform_content(Rng& r, std::int64_t size, double scale) {
  std::vector<float> v(static_cast<std::size_t>(size));
  for (float& x : v) x = static_cast<float>(r.uniform(-1.0, 1.0) * scale);
  return v;
}

// A group whose max |x| is `anchor` (at a random position, random sign) over uniform filler
// strictly below it (below every rounding of it, too).
inline std::vector<float> anchored_content(Rng& r, std::int64_t size, double anchor) {
  std::vector<float> v = uniform_content(r, size, anchor * (1.0 - 0x1p-6));
  v[static_cast<std::size_t>(r.below(size))] = static_cast<float>(r.sign() * anchor);
  return v;
}

// The values of one group: its size and index are given (a tail group can be shorter).
using GroupFill = std::function<std::vector<float>(Rng&, std::int64_t size, std::int64_t g)>;

// A tensor of `shape` whose every group of `c` is filled by `fill`, group by group, from one Rng
// seeded with `seed`.
inline std::vector<float> fill_groups(const Contract& c, const Shape& shape, std::uint64_t seed, const GroupFill& fill) {
  const Groups groups(c, shape);
  std::vector<float> values(static_cast<std::size_t>(shape_numel(shape)), 0.0f);
  Rng r(seed);
  for (std::int64_t g = 0; g < groups.count(); ++g) {
    const std::vector<float> content = fill(r, groups.size(g), g);
    for (std::int64_t i = 0; i < groups.size(g); ++i)
      values[static_cast<std::size_t>(groups.member(g, i))] = content[static_cast<std::size_t>(i)];
  }
  return values;
}

}  // namespace qexact::conformance
