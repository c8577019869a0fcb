// The contract model (qexact/contract.hpp, docs/contracts.md "The contract model"): every
// parameter sets a field of exactly the spec the documentation puts it in (element, scale,
// tensor scale, or the contract's own family parameters), and each contract's scale encoding
// is the one its scale output is stored in.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "qexact/contract.hpp"
#include "qexact/error.hpp"
#include "qexact/quantize.hpp"

namespace qexact {
namespace {

enum class Part { element, scale, tensor_scale, family };

// Where each parameter belongs, as docs/contracts.md lists it.
const std::map<std::string, Part>& documented_parts() {
  static const std::map<std::string, Part> parts = {
      {"element", Part::element},         {"rounding", Part::element},      {"overflow", Part::element},
      {"signed_zero", Part::element},     {"prequant_round", Part::element}, {"int_rounding", Part::element},
      {"range", Part::element},           {"nonfinite", Part::element},     {"nonfinite_input", Part::element},
      {"ftz", Part::element},
      {"block", Part::scale},             {"token_block", Part::scale},     {"group", Part::scale},
      {"granularity", Part::scale},       {"qdim", Part::scale},            {"tail", Part::scale},
      {"scale_rule", Part::scale},        {"log2_fp32", Part::scale},       {"ratio", Part::scale},
      {"byte0", Part::scale},             {"scale_mode", Part::scale},      {"scale_min", Part::scale},
      {"scale_kind", Part::scale},        {"scale_arith", Part::scale},     {"scale_pow2", Part::scale},
      {"quotient_arith", Part::scale},    {"round_mbits", Part::scale},     {"qmax", Part::scale},
      {"amax_floor", Part::scale},        {"zero_group", Part::scale},      {"quotient", Part::scale},
      {"scale_store", Part::scale},       {"stored", Part::scale},          {"layout", Part::scale},
      {"block_arith", Part::scale},       {"block_min", Part::scale},       {"zero_block", Part::scale},
      {"scale_wrap", Part::scale},        {"finite_products", Part::scale}, {"packing", Part::scale},
      {"block_rows", Part::scale},        {"four_over_six", Part::scale},
      {"tensor_scale", Part::tensor_scale}, {"global_e4m3_max", Part::tensor_scale},
      {"budget", Part::family},           {"pool", Part::family},           {"divisor", Part::family},
      {"out", Part::family},
  };
  return parts;
}

// Values to try for the numeric parameters (param_choices lists the enumerated ones).
const std::map<std::string, std::vector<std::string>>& numeric_values() {
  static const std::map<std::string, std::vector<std::string>> v = {
      {"block", {"16", "32"}},          {"token_block", {"64", "128"}},  {"group", {"32", "64"}},
      {"granularity", {"tensor", "row", "group:128", "tile:128x128", "head_block:64"}},
      {"qdim", {"-1", "0"}},            {"scale_min", {"0", "1e-06"}},   {"amax_floor", {"0", "1e-12"}},
      {"range", {"127", "128"}},        {"budget", {"1024", "1048576"}}, {"pool", {"8", "64"}},
      {"round_mbits", {"-1", "1"}},     {"block_min", {"0", "0.015625"}}, {"qmax", {"127", "127.5"}},
      {"block_rows", {"1", "16"}},      {"global_e4m3_max", {"448", "256"}},
  };
  return v;
}

// Which parts of b differ from a.
std::vector<Part> changed_parts(const Contract& a, const Contract& b) {
  std::vector<Part> out;
  if (!(static_cast<const ElementSpec&>(a) == static_cast<const ElementSpec&>(b))) out.push_back(Part::element);
  if (!(static_cast<const ScaleSpec&>(a) == static_cast<const ScaleSpec&>(b))) out.push_back(Part::scale);
  if (!(static_cast<const TensorScaleSpec&>(a) == static_cast<const TensorScaleSpec&>(b)))
    out.push_back(Part::tensor_scale);
  if (a.budget != b.budget || a.pool != b.pool || a.divisor != b.divisor || a.pool_out != b.pool_out)
    out.push_back(Part::family);
  return out;
}

TEST(ContractSpec, EveryParameterSetsTheSpecItIsDocumentedIn) {
  int changes = 0;
  for (const std::string& name : preset_names()) {
    const Contract base = make_preset(name);
    for (const auto& [key, value] : params(base)) {
      const auto part = documented_parts().find(key);
      ASSERT_NE(part, documented_parts().end()) << "parameter " << key << " has no documented spec";
      std::vector<std::string> values = param_choices(base.family, key);
      if (values.empty()) {
        const auto n = numeric_values().find(key);
        ASSERT_NE(n, numeric_values().end()) << "no values to try for " << key;
        values = n->second;
      }
      for (const std::string& v : values) {
        if (v == value) continue;
        Contract c = base;
        set_param(c, key, v);
        const std::vector<Part> parts = changed_parts(base, c);
        ASSERT_EQ(parts.size(), 1u) << name << " " << key << "=" << v;
        EXPECT_EQ(parts[0], part->second) << name << " " << key << "=" << v;
        EXPECT_EQ(c.preset, base.preset);
        EXPECT_EQ(c.family, base.family);
        ++changes;
      }
    }
  }
  EXPECT_GT(changes, 100);
}

TEST(ContractSpec, AContractIsEqualToItsCopyOnly) {
  const Contract a = make_preset("mxfp8.ascend");
  Contract b = a;
  EXPECT_EQ(a, b);
  b.block = 16;
  EXPECT_NE(a, b);
  EXPECT_EQ(static_cast<const ElementSpec&>(a), static_cast<const ElementSpec&>(b));
}

// A shape every quantizing family accepts: rank 4 (int8.block, head_block), last axis a
// multiple of every block and group size.
const Shape kShape = {2, 64, 2, 128};

TEST(ContractSpec, ScaleEncodingIsTheStoredScale) {
  std::map<ScaleEncoding, int> seen;
  for (const std::string& name : preset_names()) {
    const Contract c = make_preset(name);
    const ScaleEncoding e = scale_encoding(c);
    ++seen[e];
    if (c.family == Family::hif4 || c.family == Family::pool) {
      EXPECT_EQ(e, ScaleEncoding::none) << name;
      EXPECT_THROW((void)scale_dtype(e), Error);
      continue;
    }
    const std::vector<OutputSpec> specs = output_specs(c, kShape);
    ASSERT_GE(specs.size(), 2u) << name;
    EXPECT_EQ(specs[1].name, "scale");
    EXPECT_EQ(scale_dtype(e), specs[1].dtype) << name;
  }
  EXPECT_EQ(scale_encoding(make_preset("mxfp8.ascend")), ScaleEncoding::e8m0);
  EXPECT_EQ(scale_encoding(make_preset("nvfp4.torchao")), ScaleEncoding::e4m3);
  EXPECT_EQ(scale_encoding(make_preset("int8.token.blaze")), ScaleEncoding::fp32);
  EXPECT_EQ(scale_encoding(make_contract("int8.token.blaze", {"scale_store=f16"})), ScaleEncoding::f16);
  const Contract f16 = make_contract("int8.token.blaze", {"scale_store=f16"});
  EXPECT_EQ(output_specs(f16, kShape)[1].dtype, DType::f16);
  for (ScaleEncoding e : {ScaleEncoding::none, ScaleEncoding::e8m0, ScaleEncoding::e4m3, ScaleEncoding::fp32})
    EXPECT_GT(seen[e], 0) << static_cast<int>(e);
}

}  // namespace
}  // namespace qexact
