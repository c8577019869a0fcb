// Fast HiF4 fake-quant, pack and unpack (contracts §5): the checks (the reference's, with the
// same messages), the output tensors and the threads; the per-block work is in the SIMD kernels
// (hif4_kernels.hpp). Work items are whole blocks, so no output byte depends on the threads.
#include <string>

#include "contracts/hif4_checks.hpp"
#include "kernels/cpu/fast.hpp"
#include "kernels/cpu/hif4_kernels.hpp"
#include "kernels/cpu/parallel.hpp"
#include "kernels/cpu/simd_target.hpp"

namespace qexact::fast {
namespace {

using namespace hif4_checks;

// Blocks per work item: enough to amortise a thread's start, few enough to balance.
constexpr std::int64_t kLineGrain = 512;
constexpr std::int64_t kColumnGrain = 16;


}  // namespace

Tensor hif4_fake_quant(const TensorView& x, int qdim, int threads) {
  kernels::apply_forced_target();
  const char* op = "hifloat4_fake_quant";
  require_float_input(x, op);
  if (x.rank() < 1) fail(ErrorKind::bad_argument, "hifloat4_fake_quant needs a tensor of rank >= 1, got a scalar");
  const int axis = normalized_axis(qdim, x.rank(), x.shape);
  require_non_empty(x, op);
  require_whole_blocks(x.shape[static_cast<std::size_t>(axis)], axis, x.shape, op);

  const kernels::Hif4Plan plan = kernels::make_hif4_plan(x, axis);
  Tensor out(x.dtype, x.shape);
  auto* dst = static_cast<std::uint8_t*>(out.raw());
  if (plan.inner == 1) {
    kernels::parallel_for(plan.outer * plan.blocks_per_line, kLineGrain, threads,
                          [&](std::int64_t b, std::int64_t e) { kernels::hif4_fake_quant_lines(plan, dst, b, e); });
  } else {
    kernels::parallel_for(plan.outer * plan.blocks_per_line * plan.column_chunks(), kColumnGrain, threads,
                          [&](std::int64_t b, std::int64_t e) { kernels::hif4_fake_quant_columns(plan, dst, b, e); });
  }
  return out;
}

Hif4Packed hif4_pack(const TensorView& x, int threads) {
  kernels::apply_forced_target();
  const char* op = "hif4_pack";
  require_float_input(x, op);
  if (x.rank() != 2)
    fail(ErrorKind::bad_argument, "hif4_pack needs a 2-D [rows, cols] tensor, got shape " + shape_str(x.shape));
  require_non_empty(x, op);
  const std::int64_t rows = x.shape[0];
  const std::int64_t cols = x.shape[1];
  require_whole_blocks(cols, 1, x.shape, op);

  const kernels::Hif4Plan plan = kernels::make_hif4_plan(x, 1);
  Hif4Packed p{Tensor(DType::u8, Shape{rows, cols / kernels::kHif4Block, 4}), Tensor(DType::u8, Shape{rows, cols / 2})};
  std::uint8_t* scale = p.scale.data<std::uint8_t>();
  std::uint8_t* value = p.value.data<std::uint8_t>();
  kernels::parallel_for(rows * plan.blocks_per_line, kLineGrain, threads,
                        [&](std::int64_t b, std::int64_t e) { kernels::hif4_pack_blocks(plan, scale, value, b, e); });
  return p;
}

Tensor hif4_unpack(const TensorView& scale_view, const TensorView& value_view, int threads) {
  kernels::apply_forced_target();
  const hif4_checks::UnpackGrid grid = hif4_checks::require_unpack_inputs(scale_view, value_view);
  const std::int64_t rows = grid.rows, blocks = grid.blocks;

  // The packed bytes are an eighth of the output's: strided ones are copied to C order first.
  const Tensor scale_copy = scale_view.is_contiguous() ? Tensor() : contiguous_copy(scale_view);
  const Tensor value_copy = value_view.is_contiguous() ? Tensor() : contiguous_copy(value_view);
  const auto* scale = static_cast<const std::uint8_t*>(scale_view.is_contiguous() ? scale_view.data : scale_copy.raw());
  const auto* value = static_cast<const std::uint8_t*>(value_view.is_contiguous() ? value_view.data : value_copy.raw());
  Tensor out(DType::f32, Shape{rows, blocks * kernels::kHif4Block});
  float* dst = out.data<float>();
  kernels::parallel_for(rows * blocks, kLineGrain, threads,
                        [&](std::int64_t b, std::int64_t e) { kernels::hif4_unpack_blocks(scale, value, dst, b, e); });
  return out;
}

}  // namespace qexact::fast
