// Group fillers shared by the adversarial cases (cases.cpp) and the discriminating probes
// (probes.cpp), so that both draw the same values from the same Rng calls.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "conformance/cases.hpp"

namespace qexact::conformance {

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

}  // namespace qexact::conformance
