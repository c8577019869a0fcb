#include "plan/shard_domain.hpp"

#include "qexact/error.hpp"
#include "qexact/quantize.hpp"

namespace qexact::plan {
namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

}  // namespace

ScaleAxis scale_axis_along(const Contract& c, const Shape& x, int axis) {
  const int rank = static_cast<int>(x.size());
  const std::string who = c.preset.empty() ? family_name(c.family) : c.preset;
  auto refuse = [&](const std::string& why) -> ScaleAxis {
    fail(ErrorKind::bad_argument, "cannot shard axis " + std::to_string(axis) + " of " + shape_str(x) + " for " + who +
                                      ": " + why);
  };
  switch (c.family) {
    case Family::mx:
      if (c.layout == ScaleLayout::padded || c.layout == ScaleLayout::swizzled)
        return refuse("its scale layout pads or tiles the scales of the whole tensor, so a shard's scales are not a slice of them");
      [[fallthrough]];
    case Family::int8_token:
    case Family::int8_group:
      payload_shape(c, x);  // rank and tail checks
      if (axis == rank - 1) return refuse("its scale groups run along the last axis, which sharding would cut");
      return {axis, 1};
    case Family::int8_block:
      payload_shape(c, x);
      switch (axis) {
        case 0: return {0, 1};
        case 1: return {2, c.token_block};
        case 2: return {1, 1};
        default: return refuse("a block spans all D channels of its tokens");
      }
    case Family::hif4:
      return refuse("hif4 has no quantize");
    case Family::pool:
      return refuse("pool.mean is not a quantizer (move it with collective pool_mean)");
    case Family::fp8_scaled:
    case Family::nvfp4:
      return refuse(std::string("the collective judge does not model ") + family_name(c.family) + " yet");
  }
  return refuse("unknown family");
}

std::int64_t scale_element_bytes(const Contract& c) {
  if (c.family == Family::mx) return 1;
  return c.scale_store == ScaleStore::f16 ? 2 : 4;
}

std::optional<std::string> quantize_before_refusal(const TensorPlan& t) {
  if (!t.quantized() || t.scale == ScaleScope::global) return std::nullopt;
  const Contract c = t.contract();
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
  const std::int64_t e = sa.elements_per_scale;
  g.scale_first = offset / e;
  g.scale[static_cast<std::size_t>(sa.scale_axis)] = length == 0 ? 0 : ceil_div(offset + length, e) - offset / e;
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
