#include "kernels/cpu/hif4/hif4_plan.hpp"

namespace qexact::kernels {

Hif4Plan make_hif4_plan(const TensorView& x, int axis) {
  const auto a = static_cast<std::size_t>(axis);
  Hif4Plan p;
  p.dtype = x.dtype;
  p.esize = dtype_size(x.dtype);
  p.data = static_cast<const std::uint8_t*>(x.data);
  p.length = x.shape[a];
  p.blocks_per_line = p.length / kHif4Block;
  p.axis_stride = x.strides[a];
  p.outer = 1;
  for (std::size_t d = 0; d < a; ++d) p.outer *= x.shape[d];
  p.inner = 1;
  for (std::size_t d = a + 1; d < x.shape.size(); ++d) p.inner *= x.shape[d];
  p.outer_dims = StridedDims(x.shape, x.strides, 0, a);
  p.inner_dims = StridedDims(x.shape, x.strides, a + 1, x.shape.size());
  return p;
}

}  // namespace qexact::kernels
