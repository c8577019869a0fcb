// The per-block work of the fast HiF4 kernels, dispatched to the best SIMD target (bodies in
// hif4_fake_quant.cpp, hif4_pack.cpp, hif4_unpack.cpp; checks and threads in hif4_fast.cpp).
// Each function handles the work items [first, last) and writes only their output bytes.
#pragma once
#include <cstdint>

#include "kernels/cpu/hif4/hif4_plan.hpp"

namespace qexact::kernels {

// Blocks along the last axis (inner == 1): item = o * blocks_per_line + l / 64; `out` is the
// contiguous output of the input's dtype.
void hif4_fake_quant_lines(const Hif4Plan& p, std::uint8_t* out, std::int64_t first, std::int64_t last);
// Blocks across inner positions (inner > 1): item = (o * blocks_per_line + l / 64) * chunks + c
// for the inner positions [c * 16, c * 16 + 16).
void hif4_fake_quant_columns(const Hif4Plan& p, std::uint8_t* out, std::int64_t first, std::int64_t last);
// Line blocks of a 2-D input (outer = rows): 4 scale bytes and 32 value bytes per block.
void hif4_pack_blocks(const Hif4Plan& p, std::uint8_t* scale, std::uint8_t* value, std::int64_t first,
                      std::int64_t last);
// Contiguous packed blocks (4 scale bytes, 32 value bytes each) to 64 fp32 values each.
void hif4_unpack_blocks(const std::uint8_t* scale, const std::uint8_t* value, float* out, std::int64_t first,
                        std::int64_t last);

}  // namespace qexact::kernels
