#include "qexact/contract.hpp"

#include <cerrno>
#include <charconv>
#include <concepts>
#include <cstdlib>
#include <limits>
#include <utility>
#include <cmath>
#include <functional>
#include <initializer_list>

#include "did_you_mean.hpp"
#include "contracts/family_table.hpp"
#include "contracts/presets/preset_table.hpp"
#include "contracts/scale_grain.hpp"
#include "qexact/error.hpp"

namespace qexact {
namespace {

template <class E>
struct EnumName {
  E value;
  const char* name;
};

constexpr EnumName<ScaleRule> kScaleRules[] = {
    {ScaleRule::floor, "floor"}, {ScaleRule::rceil, "rceil"}, {ScaleRule::ceil, "ceil"}, {ScaleRule::even, "even"},
    {ScaleRule::rceil_bits, "rceil_bits"}};
constexpr EnumName<Byte0Rule> kByte0[] = {
    {Byte0Rule::flush, "flush"},
    {Byte0Rule::quantize, "quantize"},
    {Byte0Rule::min_normal, "min_normal"},
    {Byte0Rule::unscaled, "unscaled"},
    {Byte0Rule::infinite, "infinite"},
    {Byte0Rule::written_one, "written_one"}};
constexpr EnumName<NonFiniteRule> kNonFinite[] = {{NonFiniteRule::zero, "zero"},
                                                  {NonFiniteRule::nan, "nan"},
                                                  {NonFiniteRule::nan_signed, "nan_signed"},
                                                  {NonFiniteRule::te, "te"},
                                                  {NonFiniteRule::te_saturate, "te_saturate"},
                                                  {NonFiniteRule::torchao, "torchao"},
                                                  {NonFiniteRule::torchao_rceil, "torchao_rceil"},
                                                  {NonFiniteRule::torchao_rceil_compiled, "torchao_rceil_compiled"},
                                                  {NonFiniteRule::byte0_nan, "byte0_nan"},
                                                  {NonFiniteRule::negative_zero, "negative_zero"},
                                                  {NonFiniteRule::ct, "ct"},
                                                  {NonFiniteRule::ggml, "ggml"},
                                                  {NonFiniteRule::xla, "xla"},
                                                  {NonFiniteRule::triton, "triton"},
                                                  {NonFiniteRule::quark, "quark"}};
constexpr EnumName<Packing> kPackings[] = {{Packing::adjacent, "adjacent"}, {Packing::halves, "halves"}};
// "true" and "false" keep their boolean spellings (and parse_bool's 1/yes, 0/no below).
constexpr EnumName<SignedZero> kSignedZero[] = {
    {SignedZero::drop, "false"}, {SignedZero::keep, "true"}, {SignedZero::underflow, "underflow"},
    {SignedZero::negative, "negative"}};
constexpr EnumName<ScaleLayout> kLayouts[] = {{ScaleLayout::pairs, "pairs"},
                                              {ScaleLayout::rowmajor, "rowmajor"},
                                              {ScaleLayout::padded, "padded"},
                                              {ScaleLayout::swizzled, "swizzled"}};
constexpr EnumName<TailRule> kTails[] = {{TailRule::partial, "partial"}, {TailRule::reject, "reject"}};
constexpr EnumName<Prequant> kPrequant[] = {{Prequant::none, "none"}, {Prequant::bf16, "bf16"}};
constexpr EnumName<RatioOp> kRatio[] = {{RatioOp::divide, "divide"}, {RatioOp::reciprocal, "reciprocal"}};
constexpr EnumName<ScaleMode> kScaleModes[] = {{ScaleMode::before, "before"}, {ScaleMode::after, "after"}};
constexpr EnumName<Quotient> kQuotients[] = {
    {Quotient::divide, "divide"}, {Quotient::reciprocal, "reciprocal"}, {Quotient::inv_scale, "inv_scale"}};
constexpr EnumName<Fp8Quotient> kFp8Quotients[] = {
    {Fp8Quotient::divide, "divide"}, {Fp8Quotient::reciprocal, "reciprocal"}, {Fp8Quotient::multiply, "multiply"}};
constexpr EnumName<ScaleKind> kScaleKinds[] = {{ScaleKind::descale, "descale"}, {ScaleKind::multiplier, "multiplier"}};
constexpr EnumName<ScaleArith> kScaleArith[] = {
    {ScaleArith::fp32, "fp32"}, {ScaleArith::reciprocal, "reciprocal"}, {ScaleArith::fp64, "fp64"},
    {ScaleArith::fp32_satfinite, "fp32_satfinite"}, {ScaleArith::input, "input"},
    {ScaleArith::reciprocal_multiplier, "reciprocal_multiplier"}};
constexpr EnumName<QuotientArith> kQuotientArith[] = {{QuotientArith::fp32, "fp32"}, {QuotientArith::input, "input"}};
constexpr EnumName<ScalePow2> kScalePow2[] = {
    {ScalePow2::none, "none"}, {ScalePow2::down, "down"}, {ScalePow2::up, "up"}, {ScalePow2::down_log2f, "down_log2f"}};
constexpr EnumName<StoredScale> kStored[] = {{StoredScale::computed, "computed"}, {StoredScale::inverse, "inverse"}};
constexpr EnumName<ZeroGroup> kZeroGroups[] = {
    {ZeroGroup::zero, "zero"}, {ZeroGroup::floor, "floor"}, {ZeroGroup::one, "one"},
    {ZeroGroup::nan, "nan"}, {ZeroGroup::eps, "eps"}, {ZeroGroup::amax_one, "amax_one"},
    {ZeroGroup::one_unless_positive, "one_unless_positive"}};
constexpr EnumName<NonFiniteInput> kNonFiniteInput[] = {{NonFiniteInput::reject, "reject"},
                                                        {NonFiniteInput::propagate, "propagate"}};
constexpr EnumName<TensorScale> kTensorScales[] = {
    {TensorScale::none, "none"}, {TensorScale::amax, "amax"}, {TensorScale::te, "te"},
    {TensorScale::multiplier, "multiplier"}};
constexpr EnumName<BlockArith> kBlockArith[] = {{BlockArith::split, "split"}, {BlockArith::fused, "fused"}};
constexpr EnumName<ZeroBlock> kZeroBlocks[] = {
    {ZeroBlock::clamp, "clamp"}, {ZeroBlock::one, "one"}, {ZeroBlock::eps, "eps"}};
constexpr EnumName<FourOverSix> kFourOverSix[] = {
    {FourOverSix::off, "off"}, {FourOverSix::mae, "mae"}, {FourOverSix::mse, "mse"}};
constexpr EnumName<Nvfp4Quotient> kNvfp4Quotients[] = {{Nvfp4Quotient::reciprocal, "reciprocal"},
                                                       {Nvfp4Quotient::divide, "divide"},
                                                       {Nvfp4Quotient::prescaled, "prescaled"}};
constexpr EnumName<IntRounding> kIntRounding[] = {
    {IntRounding::rne, "rne"}, {IntRounding::half_away, "half_away"}, {IntRounding::half_away_fp32, "half_away_fp32"},
    {IntRounding::trunc, "trunc"}};
constexpr EnumName<ScaleStore> kScaleStore[] = {{ScaleStore::f32, "f32"}, {ScaleStore::f16, "f16"}};
constexpr EnumName<PoolDivisor> kPoolDivisors[] = {{PoolDivisor::true_length, "true_length"},
                                                   {PoolDivisor::uniform, "uniform"}};
constexpr EnumName<DType> kPoolOut[] = {{DType::f32, "f32"}, {DType::bf16, "bf16"}, {DType::f16, "f16"}};

template <class E, std::size_t N>
const char* name_of(const EnumName<E> (&table)[N], E v) {
  for (const auto& e : table)
    if (e.value == v) return e.name;
  return "?";
}

template <class E, std::size_t N>
E parse_enum(const EnumName<E> (&table)[N], const std::string& key, const std::string& s) {
  for (const auto& e : table)
    if (s == e.name) return e.value;
  std::string choices;
  std::vector<std::string> names;
  for (const auto& e : table) {
    choices += (choices.empty() ? "" : ", ") + std::string(e.name);
    names.emplace_back(e.name);
  }
  fail(ErrorKind::bad_argument,
       "parameter " + key + ": unknown value '" + s + "'" + did_you_mean(s, names) + " (" + choices + ")");
}

// An integer parameter as written, converted to its field's type only when it fits: a value
// outside the type's range is an error naming the parameter and the range, never truncated
// (block=4294967328 must not become 32).
class ParsedInt {
 public:
  ParsedInt(std::string key, long long v) : key_(std::move(key)), v_(v) {}
  template <std::integral T>
  operator T() const {
    if (std::cmp_less(v_, std::numeric_limits<T>::min()) || std::cmp_greater(v_, std::numeric_limits<T>::max()))
      fail(ErrorKind::bad_argument, "parameter " + key_ + ": " + std::to_string(v_) + " is out of range (" +
                                        std::to_string(std::numeric_limits<T>::min()) + " to " +
                                        std::to_string(std::numeric_limits<T>::max()) + ")");
    return static_cast<T>(v_);
  }

 private:
  std::string key_;
  long long v_;
};

ParsedInt parse_int(const std::string& key, const std::string& s) {
  long long v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc::result_out_of_range && p == s.data() + s.size())
    fail(ErrorKind::bad_argument, "parameter " + key + ": " + s + " is out of range (" +
                                      std::to_string(std::numeric_limits<long long>::min()) + " to " +
                                      std::to_string(std::numeric_limits<long long>::max()) + ")");
  if (ec != std::errc() || p != s.data() + s.size())
    fail(ErrorKind::bad_argument, "parameter " + key + ": '" + s + "' is not an integer");
  return ParsedInt(key, v);
}

float parse_float(const std::string& key, const std::string& s) {
  // strtof: correctly rounded decimal -> fp32, the caller's value exactly as written. A value too
  // small or too large for fp32 is an error, not a silent 0 or infinity (scale_min=1e-50).
  char* end = nullptr;
  errno = 0;
  const float v = std::strtof(s.c_str(), &end);
  const int err = errno;
  if (s.empty() || end != s.c_str() + s.size())
    fail(ErrorKind::bad_argument, "parameter " + key + ": '" + s + "' is not a number");
  if (err == ERANGE && v == 0.0f)
    fail(ErrorKind::bad_argument, "parameter " + key + ": " + s +
                                      " rounds to 0 in fp32 (the smallest positive fp32 is about 1.4e-45)");
  if (err == ERANGE && std::isinf(v))
    fail(ErrorKind::bad_argument, "parameter " + key + ": " + s +
                                      " overflows fp32 (the largest finite fp32 is about 3.4028235e38)");
  return v;
}

double parse_double(const std::string& key, const std::string& s) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size())
    fail(ErrorKind::bad_argument, "parameter " + key + ": '" + s + "' is not a number");
  if (errno == ERANGE)
    fail(ErrorKind::bad_argument, "parameter " + key + ": " + s + " is out of the range of a double");
  return v;
}

std::string fmt_double(double v) {
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, p);
}

bool parse_bool(const std::string& key, const std::string& s) {
  if (s == "true" || s == "1" || s == "yes") return true;
  if (s == "false" || s == "0" || s == "no") return false;
  fail(ErrorKind::bad_argument, "parameter " + key + ": '" + s + "' is not a boolean (true, false)");
}

std::string fmt_float(float v) {
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);  // shortest round-trip form
  return std::string(buf, p);
}

struct ParamDef {
  const char* name;
  std::vector<Family> families;
  std::function<std::string(const Contract&)> get;
  std::function<void(Contract&, const std::string&)> set;
};

#define QX_ENUM_PARAM(NAME, FIELD, TABLE, ...)                                                     \
  ParamDef {                                                                                       \
    NAME, {__VA_ARGS__}, [](const Contract& c) { return std::string(name_of(TABLE, c.FIELD)); },   \
        [](Contract& c, const std::string& s) { c.FIELD = parse_enum(TABLE, NAME, s); }            \
  }

const std::vector<ParamDef>& param_defs() {
  using F = Family;
  static const std::vector<ParamDef> defs = {
      {"element", {F::mx, F::fp8_scaled}, [](const Contract& c) { return std::string(elem_traits(c.element).name); },
       [](Contract& c, const std::string& s) { c.element = parse_elem_format(s); }},
      {"block", {F::mx}, [](const Contract& c) { return std::to_string(c.block); },
       [](Contract& c, const std::string& s) { c.block = static_cast<int>(parse_int("block", s)); }},
      QX_ENUM_PARAM("scale_rule", scale_rule, kScaleRules, F::mx),
      {"log2_fp32", {F::mx}, [](const Contract& c) { return std::string(c.log2_fp32 ? "true" : "false"); },
       [](Contract& c, const std::string& s) { c.log2_fp32 = parse_bool("log2_fp32", s); }},
      {"scale_wrap", {F::mx}, [](const Contract& c) { return std::string(c.scale_wrap ? "true" : "false"); },
       [](Contract& c, const std::string& s) { c.scale_wrap = parse_bool("scale_wrap", s); }},
      QX_ENUM_PARAM("ratio", ratio, kRatio, F::mx),
      {"round_mbits", {F::mx}, [](const Contract& c) { return std::to_string(c.round_mbits); },
       [](Contract& c, const std::string& s) { c.round_mbits = static_cast<int>(parse_int("round_mbits", s)); }},
      {"rounding", {F::mx}, [](const Contract& c) { return std::string(rounding_name(c.rounding)); },
       [](Contract& c, const std::string& s) { c.rounding = parse_rounding(s); }},
      {"overflow", {F::mx, F::fp8_scaled}, [](const Contract& c) { return std::string(overflow_name(c.overflow)); },
       [](Contract& c, const std::string& s) { c.overflow = parse_overflow(s); }},
      QX_ENUM_PARAM("nonfinite", nonfinite, kNonFinite, F::mx),
      QX_ENUM_PARAM("byte0", byte0, kByte0, F::mx),
      {"finite_products", {F::mx}, [](const Contract& c) { return std::string(c.finite_products ? "true" : "false"); },
       [](Contract& c, const std::string& s) { c.finite_products = parse_bool("finite_products", s); }},
      {"signed_zero", {F::mx, F::fp8_scaled, F::nvfp4}, [](const Contract& c) { return std::string(name_of(kSignedZero, c.signed_zero)); },
       [](Contract& c, const std::string& s) {
         if (s == "1" || s == "yes" || s == "0" || s == "no")  // parse_bool's other spellings
           c.signed_zero = parse_bool("signed_zero", s) ? SignedZero::keep : SignedZero::drop;
         else
           c.signed_zero = parse_enum(kSignedZero, "signed_zero", s);
       }},
      QX_ENUM_PARAM("prequant_round", prequant, kPrequant, F::mx),
      {"ftz", {F::mx, F::nvfp4}, [](const Contract& c) { return std::string(c.ftz ? "true" : "false"); },
       [](Contract& c, const std::string& s) { c.ftz = parse_bool("ftz", s); }},
      QX_ENUM_PARAM("layout", layout, kLayouts, F::mx),
      QX_ENUM_PARAM("packing", packing, kPackings, F::mx),
      QX_ENUM_PARAM("tail", tail, kTails, F::mx),
      {"token_block", {F::int8_block}, [](const Contract& c) { return std::to_string(c.token_block); },
       [](Contract& c, const std::string& s) { c.token_block = static_cast<int>(parse_int("token_block", s)); }},
      {"group", {F::int8_group}, [](const Contract& c) { return std::to_string(c.group); },
       [](Contract& c, const std::string& s) { c.group = static_cast<int>(parse_int("group", s)); }},
      QX_ENUM_PARAM("scale_mode", scale_mode, kScaleModes, F::int8_block, F::int8_token, F::int8_group),
      {"scale_min", {F::int8_block, F::int8_token, F::int8_group},
       [](const Contract& c) { return fmt_float(c.scale_min); },
       [](Contract& c, const std::string& s) { c.scale_min = parse_float("scale_min", s); }},
      QX_ENUM_PARAM("quotient", quotient, kQuotients, F::int8_block, F::int8_token, F::int8_group),
      QX_ENUM_PARAM("quotient", fp8_quotient, kFp8Quotients, F::fp8_scaled),
      QX_ENUM_PARAM("int_rounding", int_rounding, kIntRounding, F::int8_block, F::int8_token, F::int8_group),
      {"qmax", {F::int8_block, F::int8_token, F::int8_group}, [](const Contract& c) { return fmt_float(c.qmax); },
       [](Contract& c, const std::string& s) { c.qmax = parse_float("qmax", s); }},
      {"range", {F::int8_block, F::int8_token, F::int8_group}, [](const Contract& c) { return std::to_string(c.range); },
       [](Contract& c, const std::string& s) { c.range = static_cast<int>(parse_int("range", s)); }},
      QX_ENUM_PARAM("scale_store", scale_store, kScaleStore, F::int8_block, F::int8_token, F::int8_group),
      {"budget", {F::int8_token}, [](const Contract& c) { return std::to_string(c.budget); },
       [](Contract& c, const std::string& s) { c.budget = parse_int("budget", s); }},
      {"qdim", {F::hif4}, [](const Contract& c) { return std::to_string(c.qdim); },
       [](Contract& c, const std::string& s) { c.qdim = static_cast<int>(parse_int("qdim", s)); }},
      {"pool", {F::pool}, [](const Contract& c) { return std::to_string(c.pool); },
       [](Contract& c, const std::string& s) { c.pool = parse_int("pool", s); }},
      QX_ENUM_PARAM("divisor", divisor, kPoolDivisors, F::pool),
      QX_ENUM_PARAM("out", pool_out, kPoolOut, F::pool),
      {"granularity", {F::fp8_scaled}, [](const Contract& c) { return scale_grain_name(c.granularity); },
       [](Contract& c, const std::string& s) { c.granularity = parse_scale_grain(s); }},
      QX_ENUM_PARAM("scale_kind", scale_kind, kScaleKinds, F::fp8_scaled),
      QX_ENUM_PARAM("scale_arith", scale_arith, kScaleArith, F::fp8_scaled, F::nvfp4, F::int8_block, F::int8_token,
                    F::int8_group),
      QX_ENUM_PARAM("quotient_arith", quotient_arith, kQuotientArith, F::mx, F::fp8_scaled, F::int8_block,
                    F::int8_token, F::int8_group),
      QX_ENUM_PARAM("scale_pow2", scale_pow2, kScalePow2, F::fp8_scaled),
      QX_ENUM_PARAM("stored", stored, kStored, F::fp8_scaled),
      {"amax_floor", {F::fp8_scaled}, [](const Contract& c) { return fmt_double(c.amax_floor); },
       [](Contract& c, const std::string& s) { c.amax_floor = parse_double("amax_floor", s); }},
      QX_ENUM_PARAM("zero_group", zero_group, kZeroGroups, F::fp8_scaled, F::int8_block, F::int8_token, F::int8_group),
      QX_ENUM_PARAM("nonfinite_input", nonfinite_input, kNonFiniteInput, F::fp8_scaled, F::nvfp4),
      QX_ENUM_PARAM("tensor_scale", tensor_scale, kTensorScales, F::nvfp4),
      QX_ENUM_PARAM("block_arith", block_arith, kBlockArith, F::nvfp4),
      {"block_min", {F::nvfp4}, [](const Contract& c) { return fmt_float(c.block_min); },
       [](Contract& c, const std::string& s) { c.block_min = parse_float("block_min", s); }},
      QX_ENUM_PARAM("zero_block", zero_block, kZeroBlocks, F::nvfp4),
      QX_ENUM_PARAM("quotient", nvfp4_quotient, kNvfp4Quotients, F::nvfp4),
      {"block_rows", {F::nvfp4}, [](const Contract& c) { return std::to_string(c.block_rows); },
       [](Contract& c, const std::string& s) { c.block_rows = static_cast<int>(parse_int("block_rows", s)); }},
      QX_ENUM_PARAM("four_over_six", four_over_six, kFourOverSix, F::nvfp4),
      {"global_e4m3_max", {F::nvfp4}, [](const Contract& c) { return std::to_string(c.global_e4m3_max); },
       [](Contract& c, const std::string& s) { c.global_e4m3_max = static_cast<int>(parse_int("global_e4m3_max", s)); }},
  };
  return defs;
}

bool applies(const ParamDef& d, Family f) {
  for (Family g : d.families)
    if (g == f) return true;
  return false;
}

}  // namespace

const char* family_name(Family f) { return family_traits(f).name; }

namespace {
const presets::FoundPreset& preset_named(const std::string& name) {
  const presets::FoundPreset* p = presets::find_preset(name);
  if (!p)
    fail(ErrorKind::bad_argument,
         "unknown preset '" + name + "'" + did_you_mean(name, preset_names()) + " (see `qexact presets`)");
  return *p;
}
}  // namespace

std::vector<std::string> preset_names() {
  std::vector<std::string> out;
  for (const auto& p : presets::all_presets()) out.emplace_back(p.def.name);
  return out;
}

std::string preset_description(const std::string& name) { return preset_named(name).def.description; }

std::string preset_verified(const std::string& name) { return preset_named(name).def.verified; }

std::string preset_stack(const std::string& name) { return preset_named(name).stack->key; }

std::vector<std::pair<std::string, std::string>> preset_stacks() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& s : presets::stack_table()) out.emplace_back(s.key, s.title);
  return out;
}

Contract make_preset(const std::string& name) {
  const presets::FoundPreset& p = preset_named(name);
  Contract c;
  p.def.setup(c);
  c.preset = name;
  return c;
}

std::vector<std::pair<std::string, std::string>> params(const Contract& c) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& d : param_defs())
    if (applies(d, c.family)) out.emplace_back(d.name, d.get(c));
  return out;
}

void set_param(Contract& c, const std::string& key, const std::string& value) {
  bool named = false;  // a key may have one definition per family ("quotient")
  for (const auto& d : param_defs()) {
    if (key != d.name) continue;
    named = true;
    if (!applies(d, c.family)) continue;
    d.set(c, value);
    return;
  }
  if (named)
    fail(ErrorKind::bad_argument, "parameter '" + key + "' does not apply to the " + family_name(c.family) +
                                      " family of preset '" + c.preset + "'");
  std::string known;
  std::vector<std::string> names;
  for (const auto& d : param_defs())
    if (applies(d, c.family)) {
      known += (known.empty() ? "" : ", ") + std::string(d.name);
      names.emplace_back(d.name);
    }
  fail(ErrorKind::bad_argument,
       "unknown parameter '" + key + "'" + did_you_mean(key, names) + " (this contract takes: " + known + ")");
}

void set_param(Contract& c, const std::string& kv) {
  const auto eq = kv.find('=');
  if (eq == std::string::npos || eq == 0)
    fail(ErrorKind::bad_argument, "parameter override '" + kv + "' is not of the form key=value");
  set_param(c, kv.substr(0, eq), kv.substr(eq + 1));
}

std::vector<std::string> param_choices(const std::string& key) {
  auto names = [](const auto& table) {
    std::vector<std::string> out;
    for (const auto& e : table) out.emplace_back(e.name);
    return out;
  };
  if (key == "element") return {"e4m3", "e5m2", "e2m3", "e3m2", "e2m1"};
  if (key == "rounding") {
    std::vector<std::string> out;
    for (Rounding r : {Rounding::rne, Rounding::half_away, Rounding::half_away_fp32, Rounding::even_fp32, Rounding::trunc,
                       Rounding::ties_zero})
      out.emplace_back(rounding_name(r));
    return out;
  }
  if (key == "overflow") return {"saturate", "nan", "inf"};
  if (key == "log2_fp32" || key == "scale_wrap" || key == "finite_products" || key == "ftz") return {"false", "true"};
  if (key == "packing") return names(kPackings);
  if (key == "signed_zero") return names(kSignedZero);
  if (key == "scale_rule") return names(kScaleRules);
  if (key == "ratio") return names(kRatio);
  if (key == "nonfinite") return names(kNonFinite);
  if (key == "byte0") return names(kByte0);
  if (key == "prequant_round") return names(kPrequant);
  if (key == "layout") return names(kLayouts);
  if (key == "tail") return names(kTails);
  if (key == "scale_mode") return names(kScaleModes);
  if (key == "quotient") {  // int8's, fp8.scaled's and nvfp4's together; set_param checks the family's
    std::vector<std::string> out = names(kQuotients);
    out.emplace_back(name_of(kFp8Quotients, Fp8Quotient::multiply));
    return out;
  }
  if (key == "block_arith") return names(kBlockArith);
  if (key == "zero_block") return names(kZeroBlocks);
  if (key == "four_over_six") return names(kFourOverSix);
  if (key == "int_rounding") return names(kIntRounding);
  if (key == "scale_store") return names(kScaleStore);
  if (key == "divisor") return names(kPoolDivisors);
  if (key == "out") return names(kPoolOut);
  if (key == "scale_kind") return names(kScaleKinds);
  if (key == "scale_arith") return names(kScaleArith);
  if (key == "quotient_arith") return names(kQuotientArith);
  if (key == "scale_pow2") return names(kScalePow2);
  if (key == "stored") return names(kStored);
  if (key == "zero_group") return names(kZeroGroups);
  if (key == "nonfinite_input") return names(kNonFiniteInput);
  if (key == "tensor_scale") return names(kTensorScales);
  return {};
}

std::vector<std::string> param_choices(Family f, const std::string& key) {
  if (f == Family::fp8_scaled && key == "element") return {"e4m3", "e5m2"};
  if ((f == Family::fp8_scaled || f == Family::nvfp4) && key == "signed_zero") return {"false", "true", "underflow"};
  const bool int8 = f == Family::int8_block || f == Family::int8_token || f == Family::int8_group;
  if (f == Family::nvfp4 && key == "scale_arith") return {"fp32", "input", "reciprocal"};
  if (int8 && key == "scale_arith") return {"fp32", "input"};
  if (int8 && key == "zero_group") return {"zero", "eps", "nan"};
  if (key == "quotient") {
    std::vector<std::string> out;
    if (f == Family::nvfp4)
      for (const auto& e : kNvfp4Quotients) out.emplace_back(e.name);
    else if (f == Family::fp8_scaled)
      for (const auto& e : kFp8Quotients) out.emplace_back(e.name);
    else
      for (const auto& e : kQuotients) out.emplace_back(e.name);
    return out;
  }
  return param_choices(key);
}

void validate(const Contract& c) {
  auto bad = [&](const std::string& why) { fail(ErrorKind::bad_argument, "invalid contract: " + why); };
  switch (c.family) {
    case Family::mx: {
      const ElemTraits& t = elem_traits(c.element);
      if (c.block != 16 && c.block != 32) bad("block must be 16 or 32, got " + std::to_string(c.block));
      if (c.overflow == Overflow::nan && !t.has_nan) bad(std::string("overflow=nan: ") + t.name + " has no NaN");
      if (c.overflow == Overflow::inf && !t.has_inf) bad(std::string("overflow=inf: ") + t.name + " has no inf");
      if (c.log2_fp32 && c.scale_rule != ScaleRule::floor && c.scale_rule != ScaleRule::rceil)
        bad("log2_fp32 applies to scale_rule=floor and rceil only");
      if (c.ratio == RatioOp::reciprocal && c.scale_rule != ScaleRule::rceil && c.scale_rule != ScaleRule::rceil_bits)
        bad("ratio=reciprocal applies to scale_rule=rceil and rceil_bits only");
      if (c.round_mbits != -1 && (c.round_mbits < 0 || c.round_mbits > 22))
        bad("round_mbits must be -1 (the element's mantissa bits) or 0 to 22, got " + std::to_string(c.round_mbits));
      if (c.round_mbits != -1 && c.scale_rule != ScaleRule::even)
        bad("round_mbits applies to scale_rule=even only (the bits amax is rounded to)");
      if ((c.layout == ScaleLayout::padded || c.layout == ScaleLayout::swizzled) && c.tail == TailRule::partial)
        bad("the padded and swizzled layouts need tail=reject (whole groups)");
      if (c.scale_wrap && c.scale_rule != ScaleRule::floor) bad("scale_wrap applies to scale_rule=floor only");
      if (c.packing == Packing::halves && c.element != ElemFormat::e2m1)
        bad(std::string("packing=halves pairs E2M1 codes in a byte: it needs element=e2m1, got ") + t.name);
      if (c.ftz && c.nonfinite != NonFiniteRule::xla)
        bad("ftz is XLA:CPU's arithmetic, modelled with its NaN rules: it needs nonfinite=xla");
      if (c.ftz && c.signed_zero != SignedZero::keep && c.signed_zero != SignedZero::drop)
        bad("ftz flushes tiny quotients to zeros of their sign: it takes signed_zero=true or false");
      if (c.nonfinite == NonFiniteRule::xla &&
          (c.quotient_arith != QuotientArith::fp32 || c.finite_products || c.scale_wrap))
        bad("nonfinite=xla multiplies by the byte's fp32 reciprocal: it needs quotient_arith=fp32, "
            "finite_products=false and scale_wrap=false");
      if (c.nonfinite == NonFiniteRule::triton &&
          (c.quotient_arith != QuotientArith::fp32 || c.finite_products || c.scale_wrap))
        bad("nonfinite=triton multiplies its non-finite groups' elements by 0 in fp32: it needs quotient_arith=fp32, "
            "finite_products=false and scale_wrap=false");
      if (c.nonfinite == NonFiniteRule::quark &&
          (c.quotient_arith != QuotientArith::fp32 || c.finite_products || c.scale_wrap))
        bad("nonfinite=quark divides its non-finite groups' elements in fp32: it needs quotient_arith=fp32, "
            "finite_products=false and scale_wrap=false");
      if (c.packing == Packing::halves && c.tail == TailRule::partial)
        bad("packing=halves pairs element j with j + block/2 of each group: it needs tail=reject (whole groups)");
      break;
    }
    case Family::int8_block:
    case Family::int8_token:
    case Family::int8_group:
      if (c.range != 127 && c.range != 128) bad("range must be 127 or 128, got " + std::to_string(c.range));
      if (!(c.scale_min >= 0.0f) || !std::isfinite(c.scale_min)) bad("scale_min must be finite and >= 0");
      if (c.quotient == Quotient::reciprocal && c.scale_mode != ScaleMode::before)
        bad("quotient=reciprocal multiplies by qmax/max(amax, scale_min): it needs scale_mode=before");
      if (c.family == Family::int8_block && c.token_block < 1) bad("token_block must be >= 1");
      if (c.family == Family::int8_group && c.group < 1) bad("group must be >= 1");
      if (c.family == Family::int8_token && c.budget < 1) bad("budget must be >= 1 byte");
      if (c.qmax != 127.0f && c.qmax != 127.5f) bad("qmax must be 127 or 127.5, got " + fmt_float(c.qmax));
      if (c.scale_arith != ScaleArith::fp32 && c.scale_arith != ScaleArith::input)
        bad(std::string("int8 takes scale_arith=fp32 or input, got ") + name_of(kScaleArith, c.scale_arith));
      if (c.zero_group != ZeroGroup::zero && c.zero_group != ZeroGroup::eps && c.zero_group != ZeroGroup::nan)
        bad(std::string("int8 takes zero_group=zero, eps or nan, got ") + name_of(kZeroGroups, c.zero_group));
      if (c.scale_arith == ScaleArith::input && c.scale_store != ScaleStore::f32)
        bad("scale_arith=input stores the scale in the input's dtype, whose values fp32 holds: it needs scale_store=f32");
      if ((c.quotient_arith == QuotientArith::input || c.zero_group != ZeroGroup::zero) && c.quotient != Quotient::divide)
        bad("quotient_arith=input and zero_group=eps / nan are torch's x / scale: they need quotient=divide");
      break;
    case Family::hif4:
      break;
    case Family::pool:
      if (c.pool < 1) bad("pool must be >= 1, got " + std::to_string(c.pool));
      break;
    case Family::fp8_scaled:
      if (c.element != ElemFormat::e4m3 && c.element != ElemFormat::e5m2)
        bad(std::string("fp8.scaled takes element=e4m3 or e5m2, got ") + elem_traits(c.element).name);
      if (c.scale_arith == ScaleArith::reciprocal && c.scale_kind != ScaleKind::descale)
        bad("scale_arith=reciprocal (amax * fp32(1 / max)) computes a descale: it needs scale_kind=descale");
      if (c.fp8_quotient == Fp8Quotient::multiply && c.scale_kind != ScaleKind::multiplier)
        bad("quotient=multiply multiplies by the multiplier: it needs scale_kind=multiplier");
      if (c.fp8_quotient != Fp8Quotient::multiply && c.scale_kind != ScaleKind::descale)
        bad(std::string("quotient=") + name_of(kFp8Quotients, c.fp8_quotient) + " uses a descale: it needs scale_kind=descale");
      if (!(c.amax_floor >= 0.0) || !(c.amax_floor <= std::numeric_limits<float>::max()))
        bad("amax_floor must be >= 0 and within fp32's range");  // fp32 scale arithmetic rounds it to fp32
      if (c.zero_group == ZeroGroup::floor && c.amax_floor == 0.0)
        bad("zero_group=floor takes an all-zero group through the amax floor: it needs amax_floor > 0");
      if (c.scale_arith == ScaleArith::fp32_satfinite && c.scale_kind != ScaleKind::multiplier)
        bad("scale_arith=fp32_satfinite bounds an overflowing max / amax: it needs scale_kind=multiplier");
      if (c.scale_arith == ScaleArith::reciprocal_multiplier && c.scale_kind != ScaleKind::multiplier)
        bad("scale_arith=reciprocal_multiplier computes max * fp32(1 / amax): it needs scale_kind=multiplier");
      if (c.zero_group == ZeroGroup::amax_one && c.amax_floor == 0.0)
        bad("zero_group=amax_one replaces an amax <= amax_floor by 1: it needs amax_floor > 0");
      if (c.zero_group == ZeroGroup::amax_one && c.scale_arith == ScaleArith::fp64)
        bad("zero_group=amax_one is modelled for fp32 scale arithmetic only");
      if (c.signed_zero == SignedZero::negative)
        bad("fp8.scaled takes signed_zero=true, false or underflow, got negative");
      if (c.overflow == Overflow::nan && c.element != ElemFormat::e4m3)
        bad("overflow=nan: e5m2 overflows to inf (overflow=inf), as every IEEE-like format with an inf");
      if (c.overflow == Overflow::inf && c.element != ElemFormat::e5m2)
        bad(std::string("overflow=inf: ") + elem_traits(c.element).name + " has no inf");
      break;
    case Family::nvfp4: {
      if (c.tensor_scale == TensorScale::te && c.nonfinite_input == NonFiniteInput::propagate)
        bad("tensor_scale=te models TransformerEngine from its source only: its non-finite inputs are not "
            "modelled, it needs nonfinite_input=reject");
      const bool torchao_steps = c.block_arith == BlockArith::split && c.block_min == 0x1p-6f &&
                                 c.zero_block == ZeroBlock::clamp && c.nvfp4_quotient == Nvfp4Quotient::reciprocal &&
                                 c.signed_zero == SignedZero::keep;
      if (c.tensor_scale == TensorScale::te && !torchao_steps)
        bad("tensor_scale=te has TransformerEngine's own block steps: block_arith, block_min, zero_block, "
            "quotient and signed_zero keep their defaults");
      const bool prescaled = c.nvfp4_quotient == Nvfp4Quotient::prescaled;
      if (c.nonfinite_input == NonFiniteInput::propagate && !torchao_steps && !prescaled)
        bad("nonfinite_input=propagate carries torchao's NaN bits, measured with its steps only: block_arith=split, "
            "block_min=0.015625, zero_block=clamp, quotient=reciprocal, signed_zero=true (or XLA's, quotient=prescaled)");
      if (prescaled && (c.tensor_scale != TensorScale::none && c.tensor_scale != TensorScale::amax))
        bad("quotient=prescaled divides by the tensor scale t = amax / 2688 first: it needs tensor_scale=none or amax");
      if (prescaled && (c.block_arith != BlockArith::split || c.zero_block != ZeroBlock::clamp))
        bad("quotient=prescaled has XLA's block steps (amax(x / t) * fp32(1 / 6), clamped): block_arith=split and "
            "zero_block=clamp");
      if (c.ftz && !prescaled) bad("ftz is XLA:CPU's arithmetic, modelled with its steps: it needs quotient=prescaled");
      if (c.scale_arith == ScaleArith::reciprocal && !(prescaled && c.tensor_scale == TensorScale::amax))
        bad("nvfp4 scale_arith=reciprocal is XLA's amax * fp32(1 / 2688): it needs quotient=prescaled and tensor_scale=amax");
      if (c.block_arith == BlockArith::fused && c.tensor_scale != TensorScale::amax)
        bad("block_arith=fused divides by fp32(6 * t): it needs tensor_scale=amax");
      if (c.tensor_scale == TensorScale::multiplier && c.nvfp4_quotient != Nvfp4Quotient::divide)
        bad("tensor_scale=multiplier is modelled with quotient=divide (x / fp32(s / gs)) only");
      if (!(c.block_min >= 0.0f) || !(c.block_min <= 448.0f))
        bad("block_min must be in [0, 448] (the E4M3 range the block scale is clamped into)");
      if (c.signed_zero == SignedZero::negative) bad("nvfp4 takes signed_zero=true, false or underflow, got negative");
      if (c.scale_arith != ScaleArith::fp32 && c.scale_arith != ScaleArith::input &&
          c.scale_arith != ScaleArith::reciprocal)
        bad(std::string("nvfp4 takes scale_arith=fp32, input or reciprocal, got ") + name_of(kScaleArith, c.scale_arith));
      if (c.scale_arith == ScaleArith::input && c.tensor_scale != TensorScale::multiplier)
        bad("nvfp4 scale_arith=input is compressed-tensors' global scale arithmetic: it needs tensor_scale=multiplier");
      if (c.block_rows != 1 && c.block_rows != 16)
        bad("block_rows must be 1 (1x16 blocks) or 16 (16x16 tiles), got " + std::to_string(c.block_rows));
      if (c.block_rows != 1 && prescaled) bad("block_rows=16 is TransformerEngine's: quotient=prescaled (XLA's) has 1x16 blocks");
      if (c.global_e4m3_max != 448 && c.global_e4m3_max != 256)
        bad("global_e4m3_max must be 448 or 256, got " + std::to_string(c.global_e4m3_max));
      if ((c.four_over_six != FourOverSix::off || c.global_e4m3_max != 448) && c.tensor_scale != TensorScale::te)
        bad("four_over_six and global_e4m3_max are TransformerEngine's: they need tensor_scale=te");
      if (c.four_over_six != FourOverSix::off && c.block_rows != 1)
        bad("four_over_six is modelled for 1x16 blocks (block_rows=1) only");
      break;
    }
  }
}

ScaleEncoding scale_encoding(const Contract& c) { return family_traits(c.family).scale_encoding(c); }

DType scale_dtype(ScaleEncoding e) {
  switch (e) {
    case ScaleEncoding::e8m0:
    case ScaleEncoding::e4m3: return DType::u8;
    case ScaleEncoding::fp32: return DType::f32;
    case ScaleEncoding::f16: return DType::f16;
    case ScaleEncoding::none: break;
  }
  fail(ErrorKind::bad_argument, "a contract without scales has no scale dtype");
}

Contract make_contract(const std::string& preset, const std::vector<std::string>& overrides) {
  Contract c = make_preset(preset);
  for (const auto& kv : overrides) set_param(c, kv);
  validate(c);
  return c;
}

}  // namespace qexact
