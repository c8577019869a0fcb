// Group layout and fillers shared by the adversarial cases (cases.cpp) and the discriminating
// probes (probes.cpp), so that both lay out groups alike and draw the same values from the same
// Rng calls.
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "conformance/cases.hpp"
#include "conformance/lab_family.hpp"
#include "conformance/predicates.hpp"
#include "qexact/contract.hpp"
#include "qexact/tensor.hpp"

namespace qexact::conformance {

// Elements that share one scale (pool: one pooling window).
inline std::int64_t case_group_len(const Contract& c) { return lab_family(c.family).group_len(c); }

// A shape of at least n full groups.
inline Shape case_shape_for_groups(const Contract& c, std::int64_t n) { return lab_family(c.family).shape_for_groups(c, n); }

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
