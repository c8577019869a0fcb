#include "contracts/family_table.hpp"

#include <string>

#include "contracts/ceil_div.hpp"
#include "contracts/scale_grain.hpp"
#include "qexact/error.hpp"

namespace qexact {
namespace {

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

OutputCodes int8_codes(const Contract&) { return OutputCodes::int8; }
OutputCodes e2m1_pair_codes(const Contract&) { return OutputCodes::e2m1_pairs; }

// The scale output's codes follow its encoding.
OutputCodes scale_codes(const Contract& c) {
  switch (scale_encoding(c)) {
    case ScaleEncoding::e8m0: return OutputCodes::e8m0;
    case ScaleEncoding::e4m3: return OutputCodes::e4m3;
    case ScaleEncoding::f16: return OutputCodes::f16;
    case ScaleEncoding::fp32:
    case ScaleEncoding::none: break;
  }
  return OutputCodes::f32;
}

// The payload of one-code-per-element families (MX; fp8.scaled, whose element is e4m3 or e5m2).
OutputCodes element_codes(const Contract& c) {
  switch (c.element) {
    case ElemFormat::e4m3: return OutputCodes::e4m3;
    case ElemFormat::e5m2: return OutputCodes::e5m2;
    case ElemFormat::e2m3: return OutputCodes::e2m3;
    case ElemFormat::e3m2: return OutputCodes::e3m2;
    case ElemFormat::e2m1: return c.packing == Packing::halves ? OutputCodes::e2m1_halves : OutputCodes::e2m1_pairs;
  }
  return OutputCodes::e4m3;
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
  return {{"payload", DType::u8, element_codes(c), p}, {"scale", DType::u8, scale_codes(c), s}};
}

DType int8_scale_dtype(const Contract& c) { return scale_dtype(scale_encoding(c)); }

std::vector<OutputSpec> int8_block_outputs(const Contract& c, const Shape& x) {
  if (x.size() != 4)
    fail(ErrorKind::bad_argument, "int8.block needs a (B, S, N, D) tensor, got shape " + shape_str(x));
  return {{"payload", DType::i8, OutputCodes::int8, x},
          {"scale", int8_scale_dtype(c), scale_codes(c), Shape{x[0], x[2], ceil_div(x[1], c.token_block)}}};
}

std::vector<OutputSpec> int8_token_outputs(const Contract& c, const Shape& x) {
  need_rank_at_least(x, 1, "int8.token");
  return {{"payload", DType::i8, OutputCodes::int8, x},
          {"scale", int8_scale_dtype(c), scale_codes(c), leading(x)}};
}

std::vector<OutputSpec> int8_group_outputs(const Contract& c, const Shape& x) {
  need_rank_at_least(x, 1, "int8.group");
  need_whole_groups(x, c.group, "group");
  Shape s = leading(x);
  s.push_back(x.back() / c.group);
  return {{"payload", DType::i8, OutputCodes::int8, x},
          {"scale", int8_scale_dtype(c), scale_codes(c), s}};
}

std::vector<OutputSpec> fp8_scaled_outputs(const Contract& c, const Shape& x) {
  return {{"payload", DType::u8, element_codes(c), x},
          {"scale", DType::f32, scale_codes(c), grain_scale_shape(c.granularity, x, "fp8.scaled")}};
}

// The one place that says which contracts have a tensor scale output (outputs and output_names).
bool has_tensor_scale(const Contract& c) { return c.family == Family::nvfp4 && c.tensor_scale != TensorScale::none; }

std::vector<OutputSpec> nvfp4_outputs(const Contract& c, const Shape& x) {
  need_rank_at_least(x, 1, "nvfp4");
  need_whole_groups(x, kNvfp4Block, "nvfp4 block");
  Shape s = leading(x);
  s.push_back(x.back() / kNvfp4Block);
  std::vector<OutputSpec> out = {{"payload", DType::u8, e2m1_pair_codes(c), packed_e2m1(x)},
                                    {"scale", DType::u8, scale_codes(c), s}};
  if (has_tensor_scale(c)) out.push_back({"tensor_scale", DType::f32, OutputCodes::f32, Shape{}});
  return out;
}

ScaleEncoding no_scales(const Contract&) { return ScaleEncoding::none; }
ScaleEncoding e8m0_scales(const Contract&) { return ScaleEncoding::e8m0; }
ScaleEncoding e4m3_scales(const Contract&) { return ScaleEncoding::e4m3; }
ScaleEncoding fp32_scales(const Contract&) { return ScaleEncoding::fp32; }
ScaleEncoding int8_scales(const Contract& c) {
  return c.scale_store == ScaleStore::f16 ? ScaleEncoding::f16 : ScaleEncoding::fp32;
}

ScaleGrain mx_grain(const Contract& c) { return {Granularity::group, 1, c.block}; }
ScaleGrain int8_block_grain(const Contract& c) { return {Granularity::head_block, c.token_block, 1}; }
ScaleGrain row_grain(const Contract&) { return {Granularity::row, 1, 1}; }
ScaleGrain int8_group_grain(const Contract& c) { return {Granularity::group, 1, c.group}; }
ScaleGrain hif4_grain(const Contract&) { return {Granularity::group, 1, 64}; }  // along qdim
ScaleGrain fp8_scaled_grain(const Contract& c) { return c.granularity; }
ScaleGrain nvfp4_grain(const Contract&) { return {Granularity::group, 1, kNvfp4Block}; }

std::string int8_block_domain(const Contract&) { return "(b, head, token block) scales"; }
std::string nvfp4_domain(const Contract&) { return "blocks of " + std::to_string(kNvfp4Block); }
std::string grain_domain(const Contract& c) { return grain_words(family_traits(c.family).grain(c)); }

}  // namespace

const std::vector<FamilyTraits>& family_table() {
  static const std::vector<FamilyTraits> rows = {
      {Family::mx, "mx", "§1-2", true, e8m0_scales, element_codes, mx_outputs, mx_grain, grain_domain, "block",
       "its scale groups"},
      {Family::int8_block, "int8.block", "§3", true, int8_scales, int8_codes, int8_block_outputs, int8_block_grain,
       int8_block_domain, "token_block", nullptr},
      {Family::int8_token, "int8.token", "§4", true, int8_scales, int8_codes, int8_token_outputs, row_grain, grain_domain,
       nullptr, "its scale groups"},
      {Family::int8_group, "int8.group", "§4", true, int8_scales, int8_codes, int8_group_outputs, int8_group_grain,
       grain_domain, "group", "its scale groups"},
      {Family::hif4, "hif4", "§5", false, no_scales, nullptr, nullptr, hif4_grain, grain_domain, nullptr, nullptr},
      {Family::pool, "pool", "§6", false, no_scales, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr},
      {Family::fp8_scaled, "fp8.scaled", "§9.1", true, fp32_scales, element_codes, fp8_scaled_outputs, fp8_scaled_grain,
       grain_domain, nullptr, nullptr},
      {Family::nvfp4, "nvfp4", "§9.2", true, e4m3_scales, e2m1_pair_codes, nvfp4_outputs, nvfp4_grain, nvfp4_domain, nullptr,
       "its blocks of 16"},
  };
  return rows;
}

const FamilyTraits& family_traits(Family f) {
  for (const auto& r : family_table())
    if (r.family == f) return r;
  fail(ErrorKind::bad_argument, "family " + std::to_string(static_cast<int>(f)) + " has no row in the family table");
}

std::vector<std::pair<std::string, OutputCodes>> output_codes(const Contract& c) {
  std::vector<std::pair<std::string, OutputCodes>> out;
  for (const std::string& name : output_names(c))
    out.emplace_back(name, name == "payload" ? family_traits(c.family).payload_codes(c)
                                             : name == "scale" ? scale_codes(c) : OutputCodes::f32);
  return out;
}

std::vector<std::string> output_names(const Contract& c) {
  require_quantizer(c, "quantize");
  std::vector<std::string> names = {"payload", "scale"};
  if (has_tensor_scale(c)) names.push_back("tensor_scale");
  return names;
}

void require_quantized(const Contract& c, const TensorView& payload, const TensorView& scale,
                       const TensorView& tensor_scale, const Shape& x) {
  const std::vector<OutputSpec> specs = family_traits(c.family).outputs(c, x);
  const TensorView* given[] = {&payload, &scale, &tensor_scale};
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const TensorView& g = *given[i];
    if (g.data == nullptr && shape_numel(specs[i].shape) > 0)
      fail(ErrorKind::bad_argument, std::string(family_name(c.family)) + " dequantize needs its " + specs[i].name);
    if (g.dtype != specs[i].dtype || g.shape != specs[i].shape)
      fail(ErrorKind::bad_argument, std::string(family_name(c.family)) + " " + specs[i].name + " must be " +
                                        dtype_name(specs[i].dtype) + " of shape " + shape_str(specs[i].shape) +
                                        ", got " + dtype_name(g.dtype) + " " + shape_str(g.shape));
  }
  if (specs.size() < 3 && tensor_scale.data != nullptr)
    fail(ErrorKind::bad_argument, std::string(family_name(c.family)) + " has no tensor scale, but one was given");
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
