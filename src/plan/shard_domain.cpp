#include "plan/shard_domain.hpp"

#include "contracts/ceil_div.hpp"
#include "contracts/family_table.hpp"
#include "qexact/error.hpp"
#include "qexact/quantize.hpp"

namespace qexact::plan {
namespace {

}  // namespace

ScaleAxis scale_axis_along(const Contract& c, const Shape& x, int axis) {
  const int rank = static_cast<int>(x.size());
  const std::string who = c.preset.empty() ? family_name(c.family) : c.preset;
  auto refuse = [&](const std::string& why) -> ScaleAxis {
    fail(ErrorKind::bad_argument, "cannot shard axis " + std::to_string(axis) + " of " + shape_str(x) + " for " + who +
                                      ": " + why);
  };
  const FamilyTraits& f = family_traits(c.family);
  if (!f.quantizes)
    return refuse(c.family == Family::pool ? "pool.mean is not a quantizer (move it with collective pool_mean)"
                                           : std::string(f.name) + " has no quantize");
  if (c.layout == ScaleLayout::padded || c.layout == ScaleLayout::swizzled)  // MX's TransformerEngine, cuBLAS
    return refuse("its scale layout pads or tiles the scales of the whole tensor, so a shard's scales are not a slice of them");
  f.outputs(c, x);  // rank, tail and granularity checks
  const ScaleGrain g = f.grain(c);
  switch (g.kind) {
    case Granularity::tensor:
      return refuse("one scale spans the whole tensor: its amax is the tensor's (\"scale\": \"global\" agrees on it)");
    case Granularity::row:
    case Granularity::group:
      if (axis != rank - 1) return {axis, 1};
      if (f.uncut_last_axis) return refuse(std::string(f.uncut_last_axis) + " run along the last axis, which sharding would cut");
      if (g.kind == Granularity::row)
        return refuse("one scale spans each whole row of the last axis, which sharding would cut");
      return {rank - 1, g.cols};
    case Granularity::head_block:
      switch (axis) {
        case 0: return {0, 1};
        case 1: return {2, g.rows};
        case 2: return {1, 1};
        default: return refuse("a block spans all D channels of its tokens");
      }
    case Granularity::tile: {
      // Tiles of the [R, C] view, R the leading axes flattened: a run of axis 0 is a run of
      // rows only when a tile's M rows are whole indices of axis 0.
      if (axis == rank - 1) return {1, g.cols};
      const std::int64_t inner = shape_numel(Shape(x.begin() + 1, x.end() - 1));
      if (axis == 0 && g.rows % inner == 0) return {0, g.rows / inner, 1};
      if (axis == 0 && inner % g.rows == 0) return {0, 1, inner / g.rows};
      if (axis == 0)
        return refuse("a tile's " + std::to_string(g.rows) + " rows of the [R, C] view and the " +
                      std::to_string(inner) + " rows of one index of axis 0 do not divide one another");
      return refuse("the [R, C] view flattens the leading axes, so a shard of axis " + std::to_string(axis) +
                    " is not a run of tile rows");
    }
  }
  return refuse("unknown granularity");
}

namespace {

// The family row's grain is one scale for the whole tensor (fp8.scaled granularity=tensor).
bool one_tensor_scale(const Contract& c) {
  const auto grain = family_traits(c.family).grain;
  return grain && grain(c).kind == Granularity::tensor;
}

}  // namespace

bool has_tensor_amax(const Contract& c) { return one_tensor_scale(c) || amax_sets_tensor_scale(c); }

bool amax_sets_tensor_scale(const Contract& c) {
  return c.tensor_scale == TensorScale::amax || c.tensor_scale == TensorScale::multiplier;
}

const char* tensor_amax_output(const Contract& c) { return amax_sets_tensor_scale(c) ? "tensor_scale" : "scale"; }

std::int64_t scale_element_bytes(const Contract& c, const Shape& x) {
  return static_cast<std::int64_t>(dtype_size(output_specs(c, x)[1].dtype));
}

std::optional<std::string> quantize_before_refusal(const TensorPlan& t) {
  if (!t.quantized() || t.is_int8_channel()) return std::nullopt;
  const Contract c = t.contract();
  if (has_tensor_amax(c)) {
    if (t.collective == Collective::all_to_all && t.scale != ScaleScope::global)
      return "each shard's own amax cannot give the tensor scale of the head shard a rank holds afterwards: "
             "give \"scale\": \"global\" (one all_reduce(MAX) of one amax per destination rank first)";
    if (one_tensor_scale(c)) return std::nullopt;  // elementwise once the scale is agreed: any axis
  }
  try {
    scale_axis_along(c, t.shape, t.axis);
    if (t.collective == Collective::all_to_all) {
      const ScaleAxis after = scale_axis_along(c, t.shape, t.to_axis);
      if (after.elements_per_scale != 1)
        return "to_axis " + std::to_string(t.to_axis) + " would cut " + c.preset + "'s scale blocks of " +
               std::to_string(after.elements_per_scale) +
               ": all_to_all must re-shard along an axis whose every index has its own scales";
    }
  } catch (const Error& e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

PieceGeometry piece_geometry(const Contract& c, const Shape& full, int axis, std::int64_t offset, std::int64_t length) {
  const ScaleAxis sa = scale_axis_along(c, full, axis);
  Shape local = full;
  local[static_cast<std::size_t>(axis)] = length;
  PieceGeometry g;
  g.payload = payload_shape(c, local);
  g.scale = scale_shape(c, local);
  const std::int64_t e = sa.elements_per_scale, k = sa.scales_per_index;
  g.scale_first = offset / e * k;
  g.scale[static_cast<std::size_t>(sa.scale_axis)] = length == 0 ? 0 : (ceil_div(offset + length, e) - offset / e) * k;
  return g;
}

std::int64_t straddled_runs(std::int64_t length, int world, std::int64_t block) {
  const std::int64_t shard = length / world;
  std::int64_t count = 0, last = -1;
  for (std::int64_t r = 1; r < world; ++r) {
    const std::int64_t cut = r * shard;
    if (cut % block == 0) continue;
    const std::int64_t run = cut / block;
    if (run != last) ++count;  // boundaries increase, so a run holding two of them comes twice in a row
    last = run;
  }
  return count;
}

}  // namespace qexact::plan
