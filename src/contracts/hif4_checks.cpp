#include "contracts/hif4_checks.hpp"

#include <string>

#include "qexact/error.hpp"

namespace qexact::hif4_checks {

void require_float_input(const TensorView& x, const char* op) {
  if (!is_float_dtype(x.dtype))
    fail(ErrorKind::bad_argument, std::string(op) + " takes f32, bf16 or f16 input, got " + dtype_name(x.dtype));
}

void require_non_empty(const TensorView& x, const char* op) {
  if (x.numel() == 0)
    fail(ErrorKind::bad_argument, std::string(op) + " needs a non-empty tensor, got shape " + shape_str(x.shape));
}

void require_whole_blocks(std::int64_t length, int axis, const Shape& shape, const char* op) {
  if (length % kBlock != 0)
    fail(ErrorKind::bad_argument, std::string(op) + ": dimension " + std::to_string(axis) + " of shape " +
                                      shape_str(shape) + " has length " + std::to_string(length) +
                                      ", not a multiple of the HiF4 block " + std::to_string(kBlock));
}

int normalized_axis(int qdim, int rank, const Shape& shape) {
  if (qdim < -rank || qdim >= rank)
    fail(ErrorKind::bad_argument, "qdim " + std::to_string(qdim) + " is out of range for shape " + shape_str(shape) +
                                      " (rank " + std::to_string(rank) + ")");
  return qdim < 0 ? qdim + rank : qdim;
}

void require_u8(const TensorView& t, const char* what) {
  if (t.dtype != DType::u8)
    fail(ErrorKind::bad_argument, std::string("hif4_unpack: ") + what + " must be u8, got " + dtype_name(t.dtype));
}

}  // namespace qexact::hif4_checks
