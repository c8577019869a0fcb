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

PackGrid require_pack_input(const TensorView& x) {
  const char* op = "hif4_pack";
  require_float_input(x, op);
  if (x.rank() != 2)
    fail(ErrorKind::bad_argument, "hif4_pack needs a 2-D [rows, cols] tensor, got shape " + shape_str(x.shape));
  require_non_empty(x, op);
  require_whole_blocks(x.shape[1], 1, x.shape, op);
  return PackGrid{x.shape[0], x.shape[1]};
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

UnpackGrid require_unpack_inputs(const TensorView& scale_view, const TensorView& value_view) {
  require_u8(scale_view, "scale");
  require_u8(value_view, "value");
  if (scale_view.rank() != 3 || scale_view.shape[2] != 4)
    fail(ErrorKind::bad_argument,
         "hif4_unpack: scale must have shape [rows, cols/64, 4], got " + shape_str(scale_view.shape));
  if (value_view.rank() != 2)
    fail(ErrorKind::bad_argument,
         "hif4_unpack: value must have shape [rows, cols/2], got " + shape_str(value_view.shape));
  const std::int64_t rows = scale_view.shape[0];
  const std::int64_t blocks = scale_view.shape[1];
  const Shape expected_value{rows, blocks * (kBlock / 2)};
  if (value_view.shape != expected_value)
    fail(ErrorKind::bad_argument, "hif4_unpack: value shape " + shape_str(value_view.shape) + " does not match " +
                                      shape_str(expected_value) + " implied by scale shape " +
                                      shape_str(scale_view.shape));
  if (rows * blocks == 0)
    fail(ErrorKind::bad_argument,
         "hif4_unpack needs a non-empty tensor, got scale shape " + shape_str(scale_view.shape));
  return {rows, blocks};
}

}  // namespace qexact::hif4_checks
