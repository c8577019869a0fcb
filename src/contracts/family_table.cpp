#include "contracts/family_table.hpp"

#include <string>

#include "contracts/scale_grain.hpp"
#include "qexact/error.hpp"

namespace qexact {
namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
std::int64_t round_up(std::int64_t a, std::int64_t b) { return ceil_div(a, b) * b; }

void need_rank_at_least(const Shape& x, std::size_t r, const char* what) {
  if (x.size() < r)
    fail(ErrorKind::bad_argument, std::string(what) + " needs a tensor of rank >= " + std::to_string(r) +
                                      ", got shape " + shape_str(x));
}

void need_whole_groups(const Shape& x, std::int64_t n, const char* what) {
  if (x.back() % n != 0)
    fail(ErrorKind::bad_argument, "last dimension " + std::to_string(x.back()) + " of shape " + shape_str(x) +
                                      " is not a multiple of the " + what + " " + std::to_string(n));
}

Shape leading(const Shape& x) { return Shape(x.begin(), x.end() - 1); }

Shape packed_e2m1(Shape x) {
  x.back() = ceil_div(x.back(), 2);
  return x;
}

std::vector<OutputSpec> mx_outputs(const Contract& c, const Shape& x) {
  need_rank_at_least(x, 1, "an MX contract");
  const std::int64_t k = x.back();
  if (c.tail == TailRule::reject && k % c.block != 0)
    fail(ErrorKind::bad_argument, "last dimension " + std::to_string(k) + " of shape " + shape_str(x) +
                                      " is not a multiple of the block " + std::to_string(c.block) +
                                      " (this contract has tail=reject)");
  const Shape p = c.element == ElemFormat::e2m1 ? packed_e2m1(x) : x;
  const std::int64_t g = ceil_div(k, c.block);
  std::int64_t rows = 1;
  for (std::size_t i = 0; i + 1 < x.size(); ++i) rows *= x[i];
  Shape s = leading(x);
  switch (c.layout) {
    case ScaleLayout::pairs: s.push_back(ceil_div(g, 2)); s.push_back(2); break;
    case ScaleLayout::rowmajor: s.push_back(g); break;
    case ScaleLayout::padded: s = Shape{round_up(rows, 128), round_up(g, 4)}; break;
    case ScaleLayout::swizzled: s = Shape{round_up(rows, 128) * round_up(g, 4)}; break;
  }
  return {{"payload", DType::u8, p}, {"scale", DType::u8, s}};
}

DType int8_scale_dtype(const Contract& c) { return c.scale_store == ScaleStore::f16 ? DType::f16 : DType::f32; }

std::vector<OutputSpec> int8_block_outputs(const Contract& c, const Shape& x) {
  if (x.size() != 4)
    fail(ErrorKind::bad_argument, "int8.block needs a (B, S, N, D) tensor, got shape " + shape_str(x));
  return {{"payload", DType::i8, x}, {"scale", int8_scale_dtype(c), Shape{x[0], x[2], ceil_div(x[1], c.token_block)}}};
}

std::vector<OutputSpec> int8_token_outputs(const Contract& c, const Shape& x) {
  need_rank_at_least(x, 1, "int8.token");
  return {{"payload", DType::i8, x}, {"scale", int8_scale_dtype(c), leading(x)}};
}

std::vector<OutputSpec> int8_group_outputs(const Contract& c, const Shape& x) {
  need_rank_at_least(x, 1, "int8.group");
  need_whole_groups(x, c.group, "group");
  Shape s = leading(x);
  s.push_back(x.back() / c.group);
  return {{"payload", DType::i8, x}, {"scale", int8_scale_dtype(c), s}};
}

std::vector<OutputSpec> fp8_scaled_outputs(const Contract& c, const Shape& x) {
  return {{"payload", DType::u8, x}, {"scale", DType::f32, grain_scale_shape(c.granularity, x, "fp8.scaled")}};
}

// The one place that says which contracts have a tensor scale output (outputs and output_names).
bool has_tensor_scale(const Contract& c) { return c.family == Family::nvfp4 && c.tensor_scale == TensorScale::amax; }

std::vector<OutputSpec> nvfp4_outputs(const Contract& c, const Shape& x) {
  need_rank_at_least(x, 1, "nvfp4");
  need_whole_groups(x, kNvfp4Block, "nvfp4 block");
  Shape s = leading(x);
  s.push_back(x.back() / kNvfp4Block);
  std::vector<OutputSpec> out = {{"payload", DType::u8, packed_e2m1(x)}, {"scale", DType::u8, s}};
  if (has_tensor_scale(c)) out.push_back({"tensor_scale", DType::f32, Shape{}});
  return out;
}

}  // namespace

const std::vector<FamilyTraits>& family_table() {
  static const std::vector<FamilyTraits> rows = {
      {Family::mx, "mx", "§1-2", true, mx_outputs},
      {Family::int8_block, "int8.block", "§3", true, int8_block_outputs},
      {Family::int8_token, "int8.token", "§4", true, int8_token_outputs},
      {Family::int8_group, "int8.group", "§4", true, int8_group_outputs},
      {Family::hif4, "hif4", "§5", false, nullptr},
      {Family::pool, "pool", "§6", false, nullptr},
      {Family::fp8_scaled, "fp8.scaled", "§9.1", true, fp8_scaled_outputs},
      {Family::nvfp4, "nvfp4", "§9.2", true, nvfp4_outputs},
  };
  return rows;
}

const FamilyTraits& family_traits(Family f) {
  for (const auto& r : family_table())
    if (r.family == f) return r;
  fail(ErrorKind::bad_argument, "family " + std::to_string(static_cast<int>(f)) + " has no row in the family table");
}

std::vector<std::string> output_names(const Contract& c) {
  require_quantizer(c, "quantize");
  std::vector<std::string> names = {"payload", "scale"};
  if (has_tensor_scale(c)) names.push_back("tensor_scale");
  return names;
}

void require_quantizer(const Contract& c, const char* what) {
  if (c.family == Family::hif4)
    fail(ErrorKind::bad_argument, std::string("hif4 has no ") + what + ": use " +
                                      (std::string(what) == "dequantize" ? "hif4-unpack" : "fake-quant or hif4-pack"));
  if (c.family == Family::pool)
    fail(ErrorKind::bad_argument, "'" + (c.preset.empty() ? std::string("pool.mean") : c.preset) +
                                      "' is a pooled mean, not a quantizer: it has no payload or scale "
                                      "(its one output is pooled_block_mean's)");
}

}  // namespace qexact
