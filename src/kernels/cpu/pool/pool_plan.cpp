#include "kernels/cpu/pool/pool_plan.hpp"

#include "kernels/cpu/common/strided_dims.hpp"

namespace qexact::kernels {

PoolPlan make_pool_plan(const TensorView& x, std::int64_t pool) {
  PoolPlan p;
  p.dtype = x.dtype;
  p.esize = dtype_size(x.dtype);
  p.data = static_cast<const std::uint8_t*>(x.data);
  p.batch = x.shape[0];
  p.length = x.shape[1];
  p.pool = pool;
  p.cells = (p.length + pool - 1) / pool;
  p.batch_stride = x.strides[0];
  p.seq_stride = x.strides[1];
  p.features = 1;
  for (std::size_t d = 2; d < x.shape.size(); ++d) p.features *= x.shape[d];
  const StridedDims dims(x.shape, x.strides, 2, x.shape.size());
  p.features_regular = dims.single_stride();
  p.feature_stride = dims.stride();
  if (!p.features_regular) {
    p.feature_offsets.resize(static_cast<std::size_t>(p.features));
    for (std::int64_t f = 0; f < p.features; ++f) p.feature_offsets[static_cast<std::size_t>(f)] = dims.offset_of(f);
  }
  return p;
}

}  // namespace qexact::kernels
