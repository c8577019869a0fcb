// Fast HiF4 fake-quant, pack and unpack (contracts §5): the checks (the reference's, with the
// same messages), the output tensors and the threads; the per-block work is in the SIMD kernels
// (hif4_kernels.hpp). Work items are whole blocks, so no output byte depends on the threads.
#include <string>

#include "contracts/hif4_checks.hpp"
#include "kernels/cpu/common/parallel.hpp"
#include "kernels/cpu/common/simd_target.hpp"
#include "kernels/cpu/hif4/hif4_fast.hpp"
#include "kernels/cpu/hif4/hif4_kernels.hpp"

namespace qexact::fast {
namespace {

using namespace hif4_checks;

// Blocks per work item: enough to amortise a thread's start, few enough to balance.
constexpr std::int64_t kLineGrain = 512;
constexpr std::int64_t kColumnGrain = 16;


}  // namespace

void hif4_fake_quant_into(const TensorView& x, int qdim, void* out, int threads) {
  kernels::apply_forced_target();
  const char* op = "hifloat4_fake_quant";
  require_float_input(x, op);
  if (x.rank() < 1) fail(ErrorKind::bad_argument, "hifloat4_fake_quant needs a tensor of rank >= 1, got a scalar");
  const int axis = normalized_axis(qdim, x.rank(), x.shape);
  require_non_empty(x, op);
  require_whole_blocks(x.shape[static_cast<std::size_t>(axis)], axis, x.shape, op);

  const kernels::Hif4Plan plan = kernels::make_hif4_plan(x, axis);
  auto* dst = static_cast<std::uint8_t*>(out);
  if (plan.inner == 1) {
    kernels::parallel_for(plan.outer * plan.blocks_per_line, kLineGrain, threads,
                          [&](std::int64_t b, std::int64_t e) { kernels::hif4_fake_quant_lines(plan, dst, b, e); });
  } else {
    kernels::parallel_for(plan.outer * plan.blocks_per_line * plan.column_chunks(), kColumnGrain, threads,
                          [&](std::int64_t b, std::int64_t e) { kernels::hif4_fake_quant_columns(plan, dst, b, e); });
  }
}

Tensor hif4_fake_quant(const TensorView& x, int qdim, int threads) {
  Tensor out = Tensor::uninitialized(x.dtype, x.shape);
  hif4_fake_quant_into(x, qdim, out.raw(), threads);
  return out;
}

void hif4_pack_into(const TensorView& x, std::uint8_t* scale, std::uint8_t* value, int threads) {
  kernels::apply_forced_target();
  const PackGrid grid = require_pack_input(x);
  const kernels::Hif4Plan plan = kernels::make_hif4_plan(x, 1);
  kernels::parallel_for(grid.rows * plan.blocks_per_line, kLineGrain, threads,
                        [&](std::int64_t b, std::int64_t e) { kernels::hif4_pack_blocks(plan, scale, value, b, e); });
}

Hif4Packed hif4_pack(const TensorView& x, int threads) {
  const PackGrid grid = require_pack_input(x);
  Hif4Packed p{Tensor::uninitialized(DType::u8, Shape{grid.rows, grid.cols / kernels::kHif4Block, 4}),
               Tensor::uninitialized(DType::u8, Shape{grid.rows, grid.cols / 2})};
  hif4_pack_into(x, p.scale.data<std::uint8_t>(), p.value.data<std::uint8_t>(), threads);
  return p;
}

void hif4_unpack_into(const TensorView& scale_view, const TensorView& value_view, float* dst, int threads) {
  kernels::apply_forced_target();
  const hif4_checks::UnpackGrid grid = hif4_checks::require_unpack_inputs(scale_view, value_view);
  const std::int64_t rows = grid.rows, blocks = grid.blocks;

  // The packed bytes are an eighth of the output's: strided ones are copied to C order first.
  const Tensor scale_copy = scale_view.is_contiguous() ? Tensor() : contiguous_copy(scale_view);
  const Tensor value_copy = value_view.is_contiguous() ? Tensor() : contiguous_copy(value_view);
  const auto* scale = static_cast<const std::uint8_t*>(scale_view.is_contiguous() ? scale_view.data : scale_copy.raw());
  const auto* value = static_cast<const std::uint8_t*>(value_view.is_contiguous() ? value_view.data : value_copy.raw());
  kernels::parallel_for(rows * blocks, kLineGrain, threads,
                        [&](std::int64_t b, std::int64_t e) { kernels::hif4_unpack_blocks(scale, value, dst, b, e); });
}

Tensor hif4_unpack(const TensorView& scale_view, const TensorView& value_view, int threads) {
  const hif4_checks::UnpackGrid grid = hif4_checks::require_unpack_inputs(scale_view, value_view);
  Tensor out = Tensor::uninitialized(DType::f32, Shape{grid.rows, grid.blocks * kernels::kHif4Block});
  hif4_unpack_into(scale_view, value_view, out.data<float>(), threads);
  return out;
}

}  // namespace qexact::fast
