// fp8.scaled's scale granularity (contracts §9.1): which elements of x share one fp32 scale, the
// scale tensor's shape, and the spelling of a grain as a parameter value
// (tensor, row, group:N, tile:MxN, head_block:T).
#pragma once
#include <cstdint>
#include <string>

#include "qexact/contract.hpp"
#include "qexact/tensor.hpp"

namespace qexact {

ScaleGrain parse_scale_grain(const std::string& s);  // throws bad_argument naming the spellings
std::string scale_grain_name(const ScaleGrain& g);
// One domain of the grain in words, for messages: "one scale for the whole tensor", "row scales",
// "groups of N", "MxN tiles of the [R, C] view", "(b, head, T-token block) scales".
std::string grain_words(const ScaleGrain& g);

// Checks x against the grain (rank, (B, S, N, D) for head_block) and returns the scale shape:
// [] tensor, x[:-1] row, [..., ceil(C/N)] group, [ceil(R/M), ceil(C/N)] tile (R = product of the
// leading dims), (B, N, ceil(S/T)) head_block. `what` names the contract in errors.
Shape grain_scale_shape(const ScaleGrain& g, const Shape& x, const char* what);

// Flat index (C order) into the scale tensor of the element with C-order flat index `i` of x.
// The obviously correct mapping, one element at a time (the reference's and the tests').
std::int64_t grain_scale_index(const ScaleGrain& g, const Shape& x, std::int64_t i);

}  // namespace qexact
