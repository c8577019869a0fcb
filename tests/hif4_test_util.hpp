// The HiF4 adversarial blocks shared by the reference tests (test_hif4) and the fast-vs-reference
// tests (test_fast_hif4): maxima at every power of two and beside it, on and between every E6M2
// scale, extremes, and exact half-up ties on the code grid.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "qexact/formats/e6m2.hpp"

namespace qexact::test {

inline constexpr unsigned kHif4BlocksSeed = 31337u;

// Blocks of 64 values, concatenated; deterministic (seed kHif4BlocksSeed).
inline std::vector<float> hif4_adversarial_blocks() {
  std::mt19937 rng(kHif4BlocksSeed);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_int_distribution<int> position(0, 63);
  std::vector<float> blocks;
  // A block whose max (placed at a random position, with either sign) is `max`, the others
  // random below it.
  auto add_block = [&](float max) {
    std::vector<float> b(64);
    for (float& f : b) f = unit(rng) * max;
    b[static_cast<std::size_t>(position(rng))] = (unit(rng) < 0 ? -max : max);
    blocks.insert(blocks.end(), b.begin(), b.end());
  };
  for (int k = -149; k <= 127; ++k) {
    add_block(std::ldexp(1.0f, k));                            // max exactly 2^k
    add_block(std::nextafter(std::ldexp(1.0f, k), INFINITY));  // just above
    add_block(std::nextafter(std::ldexp(1.0f, k), 0.0f));      // just below
  }
  for (int byte = 0; byte < 0xFF; ++byte) {  // a max that lands on, and between, every scale
    const float s = e6m2_decode(static_cast<std::uint8_t>(byte));
    add_block(s / 0.142578125f);
    add_block(s * 7.0f);
    add_block(s * 7.5f);
  }
  for (float max :
       {13.15f, 1e6f, 344064.0f, std::numeric_limits<float>::max(), 1e-20f, 0x1p-48f * 7.0f, 1e-40f, 1e-42f, 65504.0f})
    add_block(max);
  // Exact half-up ties on the code grid: scale 1 (max 7) and elements (c + 0.5) / 4.
  std::vector<float> ties(64, 0.0f);
  ties[0] = 7.0f;
  for (int c = 0; c < 7; ++c) ties[static_cast<std::size_t>(8 + c)] = (static_cast<float>(c) + 0.5f) / 4.0f;
  blocks.insert(blocks.end(), ties.begin(), ties.end());
  return blocks;
}

}  // namespace qexact::test
