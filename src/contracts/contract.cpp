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

#include "contracts/family_table.hpp"
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
    {ScaleRule::floor, "floor"}, {ScaleRule::rceil, "rceil"}, {ScaleRule::ceil, "ceil"}, {ScaleRule::even, "even"}};
constexpr EnumName<Byte0Rule> kByte0[] = {
    {Byte0Rule::flush, "flush"},
    {Byte0Rule::quantize, "quantize"},
    {Byte0Rule::min_normal, "min_normal"},
    {Byte0Rule::unscaled, "unscaled"}};
constexpr EnumName<NonFiniteRule> kNonFinite[] = {{NonFiniteRule::zero, "zero"},
                                                  {NonFiniteRule::nan, "nan"},
                                                  {NonFiniteRule::nan_signed, "nan_signed"},
                                                  {NonFiniteRule::te, "te"},
                                                  {NonFiniteRule::te_saturate, "te_saturate"},
                                                  {NonFiniteRule::torchao, "torchao"},
                                                  {NonFiniteRule::torchao_rceil, "torchao_rceil"},
                                                  {NonFiniteRule::torchao_rceil_compiled, "torchao_rceil_compiled"}};
// "true" and "false" keep their boolean spellings (and parse_bool's 1/yes, 0/no below).
constexpr EnumName<SignedZero> kSignedZero[] = {
    {SignedZero::drop, "false"}, {SignedZero::keep, "true"}, {SignedZero::underflow, "underflow"}};
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
    {ScaleArith::fp32_satfinite, "fp32_satfinite"}};
constexpr EnumName<ScalePow2> kScalePow2[] = {
    {ScalePow2::none, "none"}, {ScalePow2::down, "down"}, {ScalePow2::up, "up"}, {ScalePow2::down_log2f, "down_log2f"}};
constexpr EnumName<StoredScale> kStored[] = {{StoredScale::computed, "computed"}, {StoredScale::inverse, "inverse"}};
constexpr EnumName<ZeroGroup> kZeroGroups[] = {
    {ZeroGroup::zero, "zero"}, {ZeroGroup::floor, "floor"}, {ZeroGroup::one, "one"}};
constexpr EnumName<NonFiniteInput> kNonFiniteInput[] = {{NonFiniteInput::reject, "reject"},
                                                        {NonFiniteInput::propagate, "propagate"}};
constexpr EnumName<TensorScale> kTensorScales[] = {
    {TensorScale::none, "none"}, {TensorScale::amax, "amax"}, {TensorScale::te, "te"}};
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
  std::string choices;
  for (const auto& e : table) {
    if (s == e.name) return e.value;
    choices += (choices.empty() ? "" : ", ") + std::string(e.name);
  }
  fail(ErrorKind::bad_argument, "parameter " + key + ": unknown value '" + s + "' (" + choices + ")");
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
      QX_ENUM_PARAM("ratio", ratio, kRatio, F::mx),
      {"rounding", {F::mx}, [](const Contract& c) { return std::string(rounding_name(c.rounding)); },
       [](Contract& c, const std::string& s) { c.rounding = parse_rounding(s); }},
      {"overflow", {F::mx}, [](const Contract& c) { return std::string(overflow_name(c.overflow)); },
       [](Contract& c, const std::string& s) { c.overflow = parse_overflow(s); }},
      QX_ENUM_PARAM("nonfinite", nonfinite, kNonFinite, F::mx),
      QX_ENUM_PARAM("byte0", byte0, kByte0, F::mx),
      {"signed_zero", {F::mx}, [](const Contract& c) { return std::string(name_of(kSignedZero, c.signed_zero)); },
       [](Contract& c, const std::string& s) {
         if (s == "1" || s == "yes" || s == "0" || s == "no")  // parse_bool's other spellings
           c.signed_zero = parse_bool("signed_zero", s) ? SignedZero::keep : SignedZero::drop;
         else
           c.signed_zero = parse_enum(kSignedZero, "signed_zero", s);
       }},
      QX_ENUM_PARAM("prequant_round", prequant, kPrequant, F::mx),
      QX_ENUM_PARAM("layout", layout, kLayouts, F::mx),
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
      QX_ENUM_PARAM("scale_arith", scale_arith, kScaleArith, F::fp8_scaled),
      QX_ENUM_PARAM("scale_pow2", scale_pow2, kScalePow2, F::fp8_scaled),
      QX_ENUM_PARAM("stored", stored, kStored, F::fp8_scaled),
      {"amax_floor", {F::fp8_scaled}, [](const Contract& c) { return fmt_double(c.amax_floor); },
       [](Contract& c, const std::string& s) { c.amax_floor = parse_double("amax_floor", s); }},
      QX_ENUM_PARAM("zero_group", zero_group, kZeroGroups, F::fp8_scaled),
      QX_ENUM_PARAM("nonfinite_input", nonfinite_input, kNonFiniteInput, F::fp8_scaled, F::nvfp4),
      QX_ENUM_PARAM("tensor_scale", tensor_scale, kTensorScales, F::nvfp4),
  };
  return defs;
}

bool applies(const ParamDef& d, Family f) {
  for (Family g : d.families)
    if (g == f) return true;
  return false;
}

struct PresetDef {
  const char* name;
  const char* description;
  const char* verified;  // "peer", "seed" or "source" (preset_verified)
  std::function<void(Contract&)> setup;
};

Contract mx_base(ElemFormat e) {
  Contract c;
  c.family = Family::mx;
  c.element = e;
  return c;
}

void ocp(Contract& c) {
  c.scale_rule = ScaleRule::floor;
  c.rounding = Rounding::rne;
  c.overflow = Overflow::saturate;
  c.nonfinite = NonFiniteRule::nan;
  c.byte0 = Byte0Rule::quantize;
  c.layout = ScaleLayout::rowmajor;
  c.tail = TailRule::partial;
}

// torchao to_mx RCEIL, eager or compiled: they differ in NaN groups only.
void torchao_rceil(Contract& c) {
  c = mx_base(ElemFormat::e4m3);
  c.scale_rule = ScaleRule::rceil;
  c.ratio = RatioOp::reciprocal;
  c.byte0 = Byte0Rule::unscaled;  // byte 0 multiplies by 1.0
  c.layout = ScaleLayout::rowmajor;
  c.tail = TailRule::reject;
}

Contract fp8_base(ScaleGrain g) {
  Contract c;
  c.family = Family::fp8_scaled;
  c.element = ElemFormat::e4m3;
  c.granularity = g;
  return c;
}

// The seed's Ascend FP8: descale = fp32(amax / 448) stored, x / stored descale, zero -> 0, finite only.
void fp8_ascend(Contract& c) {
  c.scale_kind = ScaleKind::descale;
  c.scale_arith = ScaleArith::fp32;
  c.fp8_quotient = Fp8Quotient::divide;
  c.zero_group = ZeroGroup::zero;
  c.nonfinite_input = NonFiniteInput::reject;
}

// torchao float8 dynamic scaling (float8_utils.amax_to_scale, to_fp8_saturated).
void fp8_torchao(Contract& c) {
  c.scale_kind = ScaleKind::multiplier;
  c.scale_arith = ScaleArith::fp64;
  c.amax_floor = 1e-12;  // EPS in float8_utils, a Python float
  c.zero_group = ZeroGroup::floor;
  c.fp8_quotient = Fp8Quotient::multiply;
  c.nonfinite_input = NonFiniteInput::propagate;
}

// Source-read FP8 stacks that divide by a stored fp32 descale (vLLM, DeepSeek-V3): x / s with an
// amax floor, finite inputs only (their NaN handling is not modelled).
void fp8_descale_floor(Contract& c, double amax_floor) {
  fp8_ascend(c);
  c.amax_floor = amax_floor;
  c.zero_group = ZeroGroup::floor;
}

const std::vector<PresetDef>& preset_defs() {
  static const std::vector<PresetDef> defs = {
      {"mxfp8.ascend", "Ascend MXFP8: bf16 in, E8M0 = clamp(expf(amax)-8, 0, 254), E4M3 RNE saturating, byte 0 flushes", "seed",
       [](Contract& c) {
         c = mx_base(ElemFormat::e4m3);
         c.scale_rule = ScaleRule::floor;
         c.nonfinite = NonFiniteRule::zero;
         c.byte0 = Byte0Rule::flush;
         c.prequant = Prequant::bf16;
         c.layout = ScaleLayout::pairs;
         c.tail = TailRule::partial;
       }},
      {"mxfp8.torchao.floor", "torchao 0.18.0 to_mx FLOOR, eager and torch.compile'd (CPU): byte from the exponent field of amax, x / max(2^(byte-127), 2^-126) RNE clamped to +/-448", "peer",
       [](Contract& c) {
         c = mx_base(ElemFormat::e4m3);
         c.scale_rule = ScaleRule::floor;
         c.nonfinite = NonFiniteRule::torchao;
         c.byte0 = Byte0Rule::min_normal;  // the fp32 scale is clamped to 2^-126
         c.layout = ScaleLayout::rowmajor;
         c.tail = TailRule::reject;
       }},
      {"mxfp8.torchao.rceil", "torchao 0.18.0 to_mx RCEIL, eager (CPU): fp32 amax * (1/448) rounded up to a power of two, byte 0 multiplies by 1.0", "peer",
       [](Contract& c) {
         c = mx_base(ElemFormat::e4m3);
         torchao_rceil(c);
         c.nonfinite = NonFiniteRule::torchao_rceil;
       }},
      {"mxfp8.torchao.rceil.compiled",
       "torchao 0.18.0 to_mx RCEIL under torch.compile (CPU, torch 2.15): as mxfp8.torchao.rceil, a NaN group is 0xFF throughout",
       "peer",
       [](Contract& c) {
         torchao_rceil(c);
         c.nonfinite = NonFiniteRule::torchao_rceil_compiled;
       }},
      {"mxfp8.te", "TransformerEngine MXFP8: cvt.rp.satfinite.ue8m0 of amax * (1/448), cvt.rn.satfinite E4M3", "source",
       [](Contract& c) {
         c = mx_base(ElemFormat::e4m3);
         c.scale_rule = ScaleRule::rceil;
         c.ratio = RatioOp::reciprocal;
         c.nonfinite = NonFiniteRule::te;
         c.byte0 = Byte0Rule::unscaled;
         c.layout = ScaleLayout::padded;
         c.tail = TailRule::reject;
       }},
      {"mx.ocp", "OCP MX v1.0 with E4M3 elements: floor scale, RNE saturating, NaN group on non-finite", "source",
       [](Contract& c) { c = mx_base(ElemFormat::e4m3); ocp(c); }},
      {"mx.ocp.e4m3", "OCP MX v1.0, MXFP8 E4M3", "source", [](Contract& c) { c = mx_base(ElemFormat::e4m3); ocp(c); }},
      {"mx.ocp.e5m2", "OCP MX v1.0, MXFP8 E5M2", "source", [](Contract& c) { c = mx_base(ElemFormat::e5m2); ocp(c); }},
      {"mx.ocp.e2m3", "OCP MX v1.0, MXFP6 E2M3 (one code per byte)", "source",
       [](Contract& c) { c = mx_base(ElemFormat::e2m3); ocp(c); }},
      {"mx.ocp.e3m2", "OCP MX v1.0, MXFP6 E3M2 (one code per byte)", "source",
       [](Contract& c) { c = mx_base(ElemFormat::e3m2); ocp(c); }},
      {"mx.ocp.e2m1", "OCP MX v1.0, MXFP4 E2M1 (two codes per byte, element 2k low nibble)", "source",
       [](Contract& c) { c = mx_base(ElemFormat::e2m1); ocp(c); }},
      {"mx.microxcaling", "microsoft/microxcaling _quantize_mx (PyTorch path): floor(log2f(amax)) in fp32, sign(x) * floor(|v| + 0.5) in fp32", "source",
       [](Contract& c) {
         c = mx_base(ElemFormat::e4m3);
         ocp(c);
         c.log2_fp32 = true;
         c.rounding = Rounding::half_away_fp32;
         c.signed_zero = SignedZero::underflow;  // sign(x) * floor(|v| + 0.5): torch.sign(-0.0) is +0
       }},
      {"int8.block.ascend", "int8 per (b, head, 64 tokens): scale = amax/127 stored fp32, RNE(x / stored scale)", "seed",
       [](Contract& c) {
         c = Contract{};
         c.family = Family::int8_block;
         c.token_block = 64;
         c.scale_mode = ScaleMode::before;
         c.quotient = Quotient::divide;
         c.int_rounding = IntRounding::rne;
         c.range = 127;
       }},
      {"int8.block.sage.cuda", "SageAttention CUDA QuantInt8Kernel: max(amax, 1e-7)/127, x * (127/amax'), RNE, [-128, 127]", "source",
       [](Contract& c) {
         c = Contract{};
         c.family = Family::int8_block;
         c.token_block = 64;
         c.scale_mode = ScaleMode::before;
         c.scale_min = 1e-7f;
         c.quotient = Quotient::reciprocal;
         c.int_rounding = IntRounding::rne;
         c.range = 128;
       }},
      {"int8.block.sage.triton", "SageAttention Triton quant_per_block: amax/127, x/scale + 0.5*sign truncated", "source",
       [](Contract& c) {
         c = Contract{};
         c.family = Family::int8_block;
         c.token_block = 64;
         c.scale_mode = ScaleMode::before;
         c.quotient = Quotient::divide;
         c.int_rounding = IntRounding::half_away_fp32;
         c.range = 128;
       }},
      {"int8.token.blaze", "per-token int8 over the complete row: ClampAfterDiv, caller's scale_min, RNE", "seed",
       [](Contract& c) {
         c = Contract{};
         c.family = Family::int8_token;
         c.scale_mode = ScaleMode::after;
         c.scale_min = 0.0f;
         c.quotient = Quotient::divide;
         c.int_rounding = IntRounding::rne;
         c.range = 127;
       }},
      {"int8.token.vllm", "vLLM dynamic per-token int8: absmax/127, x * (127/absmax), RNE, [-128, 127]", "source",
       [](Contract& c) {
         c = Contract{};
         c.family = Family::int8_token;
         c.scale_mode = ScaleMode::before;
         c.quotient = Quotient::reciprocal;
         c.int_rounding = IntRounding::rne;
         c.range = 128;
       }},
      {"q8_0.ggml", "ggml Q8_0 reference (quantize_row_q8_0_ref, = gguf-py 0.19.0 gguf.quants): blocks of 32, d = amax/127 stored fp16, roundf(x * (1/d))", "peer",
       [](Contract& c) {
         c = Contract{};
         c.family = Family::int8_group;
         c.group = 32;
         c.scale_mode = ScaleMode::before;
         c.quotient = Quotient::inv_scale;
         c.int_rounding = IntRounding::half_away;
         c.range = 127;
         c.scale_store = ScaleStore::f16;
       }},
      {"fp8.ascend.block", "Ascend FP8 (seed): per (b, head, 64 tokens) of (B, S, N, D), descale = fp32(amax / 448) stored, E4M3 RNE(x / stored descale)", "seed",
       [](Contract& c) {
         c = fp8_base({Granularity::head_block, 64, 1});
         fp8_ascend(c);
       }},
      {"fp8.ascend.token", "Ascend FP8 (seed), one scale per row: descale = fp32(amax / 448) stored, E4M3 RNE(x / stored descale)", "seed",
       [](Contract& c) {
         c = fp8_base({Granularity::row, 1, 1});
         fp8_ascend(c);
       }},
      {"fp8.torchao.tensorwise", "torchao 0.18.0 float8 tensorwise dynamic scaling (CPU, measured): multiplier = fp32(max / max(amax, 1e-12)) in fp64, "
       "saturated cast of x * multiplier, NaN/inf as torch propagates them; round_scales_to_power_of_2 is scale_pow2=down_log2f",
       "peer",
       [](Contract& c) {
         c = fp8_base({Granularity::tensor, 1, 1});
         fp8_torchao(c);
       }},
      {"fp8.torchao.rowwise", "torchao 0.18.0 float8 rowwise (axiswise, dim -1) dynamic scaling (CPU, measured): one multiplier per row, as "
       "tensorwise",
       "peer",
       [](Contract& c) {
         c = fp8_base({Granularity::row, 1, 1});
         fp8_torchao(c);
       }},
      {"fp8.te.current",
       "TransformerEngine Float8CurrentScaling (source-read, [unverified]): multiplier = fp32(448 / amax) (FLT_MAX if that "
       "overflows, 1 for amax 0), cvt of x * multiplier RNE saturating, scale.npy = scale_inv = fp32(1 / multiplier)",
       "source",
       [](Contract& c) {
         c = fp8_base({Granularity::tensor, 1, 1});
         c.scale_kind = ScaleKind::multiplier;
         c.scale_arith = ScaleArith::fp32_satfinite;  // compute_scale_from_amax's value_for_inf
         c.fp8_quotient = Fp8Quotient::multiply;
         c.stored = StoredScale::inverse;              // the tensor keeps scale_inv
         c.zero_group = ZeroGroup::one;  // amax == 0 (amax_epsilon 0 by default): scale 1
       }},
      {"fp8.vllm.token",
       "vLLM dynamic_per_token_scaled_fp8_quant (source-read, [unverified]): descale = max(amax / 448, 1 / (448 * 512)) "
       "per row, x / descale clamped to +/-448, E4M3 RNE",
       "source",
       [](Contract& c) {
         c = fp8_base({Granularity::row, 1, 1});
         // max(fp32(amax / 448), fp32(1 / (448 * 512))) == fp32(max(amax, 1 / 512) / 448): the fp32
         // division is monotone and 1 / 512 is exact.
         fp8_descale_floor(c, 1.0 / 512.0);
       }},
      {"fp8.deepseek.1x128",
       "DeepSeek-V3 inference/kernel.py act_quant (source-read, [unverified]): per 1x128 group, descale = "
       "max(amax, 1e-4) / 448, x / descale cast to E4M3 (Triton's fp32 division may round differently)",
       "source",
       [](Contract& c) {
         c = fp8_base({Granularity::group, 1, 128});
         fp8_descale_floor(c, 1e-4);
       }},
      {"fp8.deepseek.128x128",
       "DeepSeek-V3 128x128 weight blocks (kernel.py weight_quant, source-read, [unverified]): as fp8.deepseek.1x128 "
       "per 128x128 tile of the [R, C] view",
       "source",
       [](Contract& c) {
         c = fp8_base({Granularity::tile, 128, 128});
         fp8_descale_floor(c, 1e-4);
       }},
      {"nvfp4.torchao", "torchao 0.18.0 nvfp4_quantize: E2M1 in blocks of 16, E4M3 block scale e4m3(clamp(amax / 6, 2^-6, 448)), x * (1 / scale) clamped to +/-6", "peer",
       [](Contract& c) {
         c = Contract{};
         c.family = Family::nvfp4;
         c.tensor_scale = TensorScale::none;
         c.nonfinite_input = NonFiniteInput::propagate;
       }},
      {"nvfp4.te", "TransformerEngine NVFP4 1x16 (source-read): S_enc = 2688 / tensor amax, block scale e4m3(amax * (S_enc * fp32(1/6))) saturated, x * (1 / (s * (1 / S_enc))); tensor_scale.npy holds the amax", "source",
       [](Contract& c) {
         c = Contract{};
         c.family = Family::nvfp4;
         c.tensor_scale = TensorScale::te;
         c.nonfinite_input = NonFiniteInput::reject;
       }},
      {"hif4", "HiFloat4: 64-element blocks, E6M2 + two micro-exponent levels, S1P2 elements (fake-quant, pack)", "seed",
       [](Contract& c) {
         c = Contract{};
         c.family = Family::hif4;
       }},
      {"pool.mean", "pooled block mean over the sequence axis of (B, S, F...): exact, each cell / its true length", "seed",
       [](Contract& c) {
         c = Contract{};
         c.family = Family::pool;
         c.pool = 64;
         c.divisor = PoolDivisor::true_length;
         c.pool_out = DType::f32;
       }},
  };
  return defs;
}

const PresetDef* find_preset(const std::string& name) {
  for (const auto& d : preset_defs())
    if (name == d.name) return &d;
  return nullptr;
}

}  // namespace

const char* family_name(Family f) { return family_traits(f).name; }

std::vector<std::string> preset_names() {
  std::vector<std::string> out;
  for (const auto& d : preset_defs()) out.emplace_back(d.name);
  return out;
}

std::string preset_description(const std::string& name) {
  const PresetDef* d = find_preset(name);
  if (!d) fail(ErrorKind::bad_argument, "unknown preset '" + name + "' (see `qexact presets`)");
  return d->description;
}

std::string preset_verified(const std::string& name) {
  const PresetDef* d = find_preset(name);
  if (!d) fail(ErrorKind::bad_argument, "unknown preset '" + name + "' (see `qexact presets`)");
  return d->verified;
}

Contract make_preset(const std::string& name) {
  const PresetDef* d = find_preset(name);
  if (!d) fail(ErrorKind::bad_argument, "unknown preset '" + name + "' (see `qexact presets`)");
  Contract c;
  d->setup(c);
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
  for (const auto& d : param_defs())
    if (applies(d, c.family)) known += (known.empty() ? "" : ", ") + std::string(d.name);
  fail(ErrorKind::bad_argument, "unknown parameter '" + key + "' (this contract takes: " + known + ")");
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
    for (Rounding r : {Rounding::rne, Rounding::half_away, Rounding::half_away_fp32, Rounding::even_fp32, Rounding::trunc})
      out.emplace_back(rounding_name(r));
    return out;
  }
  if (key == "overflow") return {"saturate", "nan", "inf"};
  if (key == "log2_fp32") return {"false", "true"};
  if (key == "signed_zero") return names(kSignedZero);
  if (key == "scale_rule") return names(kScaleRules);
  if (key == "ratio") return names(kRatio);
  if (key == "nonfinite") return names(kNonFinite);
  if (key == "byte0") return names(kByte0);
  if (key == "prequant_round") return names(kPrequant);
  if (key == "layout") return names(kLayouts);
  if (key == "tail") return names(kTails);
  if (key == "scale_mode") return names(kScaleModes);
  if (key == "quotient") {  // int8's and fp8.scaled's together; set_param checks the family's
    std::vector<std::string> out = names(kQuotients);
    out.emplace_back(name_of(kFp8Quotients, Fp8Quotient::multiply));
    return out;
  }
  if (key == "int_rounding") return names(kIntRounding);
  if (key == "scale_store") return names(kScaleStore);
  if (key == "divisor") return names(kPoolDivisors);
  if (key == "out") return names(kPoolOut);
  if (key == "scale_kind") return names(kScaleKinds);
  if (key == "scale_arith") return names(kScaleArith);
  if (key == "scale_pow2") return names(kScalePow2);
  if (key == "stored") return names(kStored);
  if (key == "zero_group") return names(kZeroGroups);
  if (key == "nonfinite_input") return names(kNonFiniteInput);
  if (key == "tensor_scale") return names(kTensorScales);
  return {};
}

std::vector<std::string> param_choices(Family f, const std::string& key) {
  if (f == Family::fp8_scaled && key == "element") return {"e4m3", "e5m2"};
  if (key == "quotient") {
    std::vector<std::string> out;
    if (f == Family::fp8_scaled)
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
      if (c.log2_fp32 && c.scale_rule != ScaleRule::floor) bad("log2_fp32 applies to scale_rule=floor only");
      if (c.ratio == RatioOp::reciprocal && c.scale_rule != ScaleRule::rceil)
        bad("ratio=reciprocal applies to scale_rule=rceil only");
      if ((c.layout == ScaleLayout::padded || c.layout == ScaleLayout::swizzled) && c.tail == TailRule::partial)
        bad("the padded and swizzled layouts need tail=reject (whole groups)");
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
      break;
    case Family::nvfp4:
      if (c.tensor_scale == TensorScale::te && c.nonfinite_input == NonFiniteInput::propagate)
        bad("tensor_scale=te models TransformerEngine from its source only: its non-finite inputs are not "
            "modelled, it needs nonfinite_input=reject");
      break;
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
