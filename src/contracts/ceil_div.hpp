// Whole runs of b that cover a (b > 0): group, block and tile counts along an axis, and the
// padded extents of the MX scale layouts. The one definition the shape rules, kernels, lab and
// planner share.
#pragma once
#include <cstdint>

namespace qexact {

constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
constexpr std::int64_t round_up(std::int64_t a, std::int64_t b) { return ceil_div(a, b) * b; }

}  // namespace qexact
