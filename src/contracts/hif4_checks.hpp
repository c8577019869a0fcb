// Input checks of the HiFloat4 entry points, shared by the reference and the fast engine so
// that both reject exactly the same inputs with exactly the same messages. Validation only:
// no arithmetic of the contract lives here.
#pragma once
#include <cstdint>

#include "qexact/tensor.hpp"

namespace qexact::hif4_checks {

inline constexpr int kBlock = 64;  // elements per HiF4 block (one L1 scale)

void require_float_input(const TensorView& x, const char* op);
void require_non_empty(const TensorView& x, const char* op);
void require_whole_blocks(std::int64_t length, int axis, const Shape& shape, const char* op);
// qdim in [-rank, rank) mapped to [0, rank).
int normalized_axis(int qdim, int rank, const Shape& shape);
void require_u8(const TensorView& t, const char* what);

// hif4_pack's input: a non-empty float [rows, cols] with cols a multiple of the block.
struct PackGrid {
  std::int64_t rows, cols;
};
PackGrid require_pack_input(const TensorView& x);

// hif4_unpack's inputs: u8 scale [rows, blocks, 4] and value [rows, blocks * 32], non-empty.
struct UnpackGrid {
  std::int64_t rows, blocks;
};
UnpackGrid require_unpack_inputs(const TensorView& scale, const TensorView& value);

}  // namespace qexact::hif4_checks
