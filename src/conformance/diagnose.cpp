#include "conformance/diagnose.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "conformance/contract_variant.hpp"
#include "conformance/diagnose_search.hpp"
#include "conformance/lab_family.hpp"
#include "conformance/scale_grid.hpp"
#include "contracts/family_table.hpp"
#include "qexact/error.hpp"
#include "qexact/formats/bf16.hpp"
#include "qexact/formats/fp16.hpp"
#include "qexact/formats/int8.hpp"
#include "reference/int8_steps.hpp"
#include "reference/mx_ref.hpp"
#include "reference/with_scales_ref.hpp"

namespace qexact::conformance {
namespace {

const RunOptions kRef{Engine::reference, 1};

Diagnosis make(const std::string& signature, std::vector<std::pair<std::string, std::int64_t>> evidence,
               const std::string& explanation, bool confirmed) {
  return Diagnosis{signature, std::move(evidence), explanation, confirmed};
}

// ---- stages 2-3: scales, then payload against the device's own scales ---------------------

enum class ElemClass { nonfinite, flush, saturation, tie, off_tie };

class Stager {
 public:
  Stager(const Contract& c, const TensorView& x, const ContractOutput& ref, const DeviceOutput& dev)
      : c_(c), x_(x), ref_(ref), dev_(dev), grid_(c, x.shape) {
    values_ = to_f32_vector(x);
    if (c.family == Family::mx && c.prequant == Prequant::bf16)
      for (float& v : values_) v = round_bf16(v);
    rs_ = grid_.scale_bits(ref.scale);
    ds_ = grid_.scale_bits(dev.scale);
    e_ = grid_.codes(ref.payload);
    a_ = grid_.codes(dev.payload);
    nonfinite_.assign(rs_.size(), false);
    amax_.assign(rs_.size(), 0.0f);
    for (std::int64_t e = 0; e < grid_.elements(); ++e) {
      const auto g = static_cast<std::size_t>(grid_.group_of(e));
      const float v = values_[static_cast<std::size_t>(e)];
      if (!std::isfinite(v)) nonfinite_[g] = true;
      else amax_[g] = std::max(amax_[g], std::fabs(v));
    }
    q_ = grid_.codes(ref::quantize_with_scales(c, x, dev.scale.view()).payload);
  }

  std::vector<Diagnosis> run() {
    std::vector<Diagnosis> out;
    std::vector<std::size_t> scale_diff;
    for (std::size_t g = 0; g < rs_.size(); ++g)
      if (rs_[g] != ds_[g]) scale_diff.push_back(g);
    std::vector<std::int64_t> errors, following;  // payload errors; diffs that follow the device's scale
    for (std::int64_t e = 0; e < grid_.elements(); ++e) {
      const auto i = static_cast<std::size_t>(e);
      if (a_[i] != q_[i]) errors.push_back(e);
      else if (a_[i] != e_[i]) following.push_back(e);
    }

    if (scale_diff.empty() && !errors.empty() && skips_bf16_rounding()) {
      out.push_back(make("amax_fp32_not_bf16", {{"payload_errors", static_cast<std::int64_t>(errors.size())}},
                         "the " + std::to_string(errors.size()) +
                             " payload differences (every scale matches) are what quantizing the fp32 values "
                             "gives: the device skips the bf16 rounding of its inputs, for amax and payload alike "
                             "(re-running the contract with prequant_round=none reproduces every byte)",
                         true));
      return out;
    }

    // Tail rule (§8.6): every difference in the partial last block.
    bool all_tail = grid_.has_tail() && (!scale_diff.empty() || !errors.empty());
    for (std::size_t g : scale_diff) all_tail = all_tail && grid_.is_tail_group(static_cast<std::int64_t>(g));
    for (std::int64_t e : errors) all_tail = all_tail && grid_.is_tail_group(grid_.group_of(e));

    // A re-run that reproduces every device byte explains the payload too.
    if (!scale_diff.empty() && scale_diagnoses(scale_diff, following, out)) return out;
    if (!errors.empty()) payload_diagnoses(errors, out);
    if (all_tail) {
      std::vector<Diagnosis> confirmed;
      for (Diagnosis& d : out)
        if (d.confirmed) confirmed.push_back(std::move(d));
      confirmed.push_back(make("tail_rule",
                               {{"scale_groups_differing", static_cast<std::int64_t>(scale_diff.size())},
                                {"payload_errors", static_cast<std::int64_t>(errors.size())},
                                {"tail_groups", tail_groups()}},
                               "every difference is in the partial last block of its row: the device treats the "
                               "tail (a last block shorter than the block size) by another rule",
                               false));
      return confirmed;
    }
    return out;
  }

 private:
  std::int64_t tail_groups() const {
    std::int64_t n = 0;
    for (std::int64_t g = 0; g < grid_.groups(); ++g) n += grid_.is_tail_group(g) ? 1 : 0;
    return n;
  }

  // An MX contract that rounds its inputs to bf16 first, re-run without that rounding,
  // reproduces every device byte. Without a scale difference to show it, the payload's
  // differences look like ties broken another way: the bf16 values' ties are not the fp32's.
  bool skips_bf16_rounding() const {
    if (c_.family != Family::mx || c_.prequant != Prequant::bf16) return false;
    const std::optional<Contract> v = contract_variant(c_, {{"prequant_round", "none"}});
    if (!v) return false;
    try {
      const ContractOutput o = run_contract(*v, x_, kRef);
      return same_contents(o.payload, dev_.payload) && same_contents(o.scale, dev_.scale);
    } catch (const Error&) {
      return false;  // the contract_variant refuses the input the device quantized: not this device
    }
  }

  // Scale grid of c's contract_variant v on this input (reference engine), or nullopt when v rejects it.
  std::optional<std::vector<std::uint32_t>> variant_scales(const Contract& v) const {
    try {
      const ContractOutput o = run_contract(v, x_, kRef);
      return ScaleGrid(v, x_.shape).scale_bits(o.scale);
    } catch (const Error&) {
      return std::nullopt;
    }
  }

  // Returns true when a re-run reproduced every device byte.
  bool scale_diagnoses(const std::vector<std::size_t>& diff, const std::vector<std::int64_t>& following,
                       std::vector<Diagnosis>& out) const {
    const ScaleEncoding enc = scale_encoding(c_);
    std::map<std::int64_t, std::int64_t> hist;
    bool nonfinite_only = true;
    for (std::size_t g : diff) {
      ++hist[ordered_scale(ds_[g], enc) - ordered_scale(rs_[g], enc)];
      nonfinite_only = nonfinite_only && nonfinite_[g];
    }
    const auto n = static_cast<std::int64_t>(diff.size());
    const bool all_minus_one = hist.size() == 1 && hist.begin()->first == -1;
    std::string deltas;
    for (const auto& [d, count] : hist) deltas += (deltas.empty() ? "" : ", ") + std::to_string(d) + ": " + std::to_string(count);
    const bool ieee = enc == ScaleEncoding::fp32 || enc == ScaleEncoding::f16;
    const std::string unit = ieee ? std::string("ulps") : scale_delta_unit(enc);

    struct Suspect {
      std::string signature;
      ParamChanges changes;
    };
    std::vector<Suspect> suspects;
    if (c_.family == Family::mx) {
      if (c_.prequant == Prequant::bf16) suspects.push_back({"amax_fp32_not_bf16", {{"prequant_round", "none"}}});
      for (const std::string& rule : param_choices("scale_rule")) {
        if (param_of(c_, "scale_rule") == rule) continue;
        ParamChanges ch{{"scale_rule", rule}};
        if (rule != "floor") ch.push_back({"log2_fp32", "false"});
        for (const char* ratio : {"divide", "reciprocal"}) {
          ParamChanges with = ch;
          if (rule.rfind("rceil", 0) == 0) with.push_back({"ratio", ratio});
          else if (std::string(ratio) == "reciprocal") continue;
          else with.push_back({"ratio", "divide"});
          suspects.push_back({"scale_rule", with});
        }
      }
      if (c_.scale_rule == ScaleRule::floor) suspects.push_back({"scale_rule", {{"log2_fp32", c_.log2_fp32 ? "false" : "true"}}});
      if (c_.scale_rule == ScaleRule::rceil || c_.scale_rule == ScaleRule::rceil_bits)
        suspects.push_back({"reciprocal_divisor", {{"ratio", c_.ratio == RatioOp::divide ? "reciprocal" : "divide"}}});
      for (const std::string& rule : param_choices("nonfinite"))
        if (param_of(c_, "nonfinite") != rule) suspects.push_back({"nonfinite_rule", {{"nonfinite", rule}}});
    } else {
      suspects.push_back({"scale_rule", {{"scale_mode", c_.scale_mode == ScaleMode::before ? "after" : "before"}}});
      suspects.push_back({"scale_rule", {{"scale_store", c_.scale_store == ScaleStore::f32 ? "f16" : "f32"}}});
    }
    for (const Suspect& s : suspects) {
      const std::optional<Contract> v = contract_variant(c_, s.changes);
      if (!v) continue;
      const auto scales = variant_scales(*v);
      if (!scales || *scales != ds_) continue;
      std::string why;
      if (s.signature == "amax_fp32_not_bf16")
        why = all_minus_one ? "all " + std::to_string(n) +
                                  " differing scale bytes are exactly one binade low: amax was computed on fp32 values, "
                                  "not on their bf16 rounding"
                            : "the " + std::to_string(n) + " differing scales are those of amax computed on fp32 "
                                  "values, not on their bf16 rounding";
      else if (s.signature == "reciprocal_divisor")
        why = "the " + std::to_string(n) + " differing scales come from the ratio amax/max formed with ratio=" +
              param_of(*v, "ratio") + ", not " + param_of(c_, "ratio");
      else if (s.signature == "nonfinite_rule")
        why = "the " + std::to_string(n) + " differing scales are in groups holding NaN or inf and follow nonfinite=" +
              param_of(*v, "nonfinite") + ", not " + param_of(c_, "nonfinite");
      else
        why = "the " + std::to_string(n) + " differing scales (deltas in " + unit + ": " + deltas +
              ") are what the scale rule " + changes_words(s.changes) + " gives, not the contract's";
      why += " (re-running the contract with " + changes_words(s.changes) + " reproduces every scale";
      const ContractOutput o = run_contract(*v, x_, kRef);
      const bool everything = same_contents(o.payload, dev_.payload) && same_contents(o.scale, dev_.scale);
      why += everything ? " and payload byte)" : ")";
      out.push_back(make(s.signature,
                         {{"scale_groups_differing", n},
                          {"scale_groups_explained", n},
                          {"payload_elements_following_scale", static_cast<std::int64_t>(following.size())}},
                         why, true));
      return everything;
    }
    if (c_.family == Family::mx && c_.prequant == Prequant::bf16 && all_minus_one) {
      out.push_back(make("amax_fp32_not_bf16", {{"scale_groups_differing", n}, {"scale_delta_minus_one", n}},
                         "all " + std::to_string(n) +
                             " differing scale bytes are exactly one binade low: amax was computed on fp32 values, "
                             "not on their bf16 rounding",
                         false));
      return false;
    }
    if (nonfinite_only)
      out.push_back(make("nonfinite_rule", {{"scale_groups_differing", n}},
                         "all " + std::to_string(n) +
                             " differing scales are in groups holding NaN or inf: the device applies another "
                             "non-finite rule",
                         false));
    return false;
  }

  // x / scale for element e with the device's scale, as the contract forms it.
  float quotient(std::int64_t e) const {
    const auto g = static_cast<std::size_t>(grid_.group_of(e));
    const float x = values_[static_cast<std::size_t>(e)];
    if (c_.family == Family::mx) return x / ref::mx_divisor(c_, static_cast<std::uint8_t>(ds_[g]));
    const float s = ref_.scale.dtype() == DType::f32 ? std::bit_cast<float>(ds_[g])
                                                      : f16_to_f32(static_cast<std::uint16_t>(ds_[g]));
    return ref::int8::quotient_value(ref::int8::quotient_for_given(c_, amax_[g], s, x_.dtype), x);
  }

  bool is_tie(float v) const {
    if (c_.family != Family::mx) return v - std::floor(v) == 0.5f;
    const std::vector<float>& table = elem_value_table(c_.element);
    const double a = std::fabs(static_cast<double>(v));
    for (std::size_t i = 0; i + 1 < table.size(); ++i)
      if (a == (static_cast<double>(table[i]) + table[i + 1]) / 2.0) return true;
    return false;
  }

  bool saturates(float v) const {
    if (c_.family == Family::mx) return std::isfinite(v) && std::fabs(v) > elem_traits(c_.element).max;
    const float r = int8_round(v, c_.int_rounding);
    return r > 127.0f || r < (c_.range == 128 ? -128.0f : -127.0f);
  }

  ElemClass classify(std::int64_t e) const {
    const auto g = static_cast<std::size_t>(grid_.group_of(e));
    if (nonfinite_[g]) return ElemClass::nonfinite;
    if (c_.family == Family::mx && (ds_[g] == 0 || rs_[g] == 0)) return ElemClass::flush;
    const float v = quotient(e);
    if (saturates(v)) return ElemClass::saturation;
    return is_tie(v) ? ElemClass::tie : ElemClass::off_tie;
  }

  // Sign bit and magnitude of a payload code.
  std::pair<bool, int> sign_magnitude(std::uint8_t code) const {
    if (c_.family == Family::mx) {
      const int bits = elem_traits(c_.element).bits;
      return {((code >> (bits - 1)) & 1) != 0, code & ((1 << (bits - 1)) - 1)};
    }
    const auto v = static_cast<std::int8_t>(code);
    return {v < 0, std::abs(static_cast<int>(v))};
  }

  bool one_toward_zero(std::int64_t e) const {
    const auto i = static_cast<std::size_t>(e);
    const auto [ds, dm] = sign_magnitude(a_[i]);
    const auto [qs, qm] = sign_magnitude(q_[i]);
    return dm == qm - 1 && (ds == qs || dm == 0);
  }

  bool one_code_apart(std::int64_t e) const {
    const auto i = static_cast<std::size_t>(e);
    if (c_.family != Family::mx)
      return std::abs(static_cast<int>(static_cast<std::int8_t>(a_[i])) - static_cast<std::int8_t>(q_[i])) == 1;
    const auto [ds, dm] = sign_magnitude(a_[i]);
    const auto [qs, qm] = sign_magnitude(q_[i]);
    return ds == qs && std::abs(dm - qm) == 1;
  }

  // The device's payload codes explained by contract_variant v quantizing with the device's own scales,
  // on the elements `where` selects: all of them (and none broken elsewhere) -> true.
  bool explains(const Contract& v, const std::function<bool(std::int64_t)>& where) const {
    std::vector<std::uint8_t> codes;
    try {
      codes = grid_.codes(ref::quantize_with_scales(v, x_, dev_.scale.view()).payload);
    } catch (const Error&) {
      return false;
    }
    for (std::int64_t e = 0; e < grid_.elements(); ++e) {
      const auto i = static_cast<std::size_t>(e);
      if (where(e) && codes[i] != a_[i]) return false;
    }
    return true;
  }

  void payload_diagnoses(const std::vector<std::int64_t>& errors, std::vector<Diagnosis>& out) const {
    std::vector<std::int64_t> by[5];
    std::vector<bool> is_error(static_cast<std::size_t>(grid_.elements()), false);
    std::vector<ElemClass> cls(static_cast<std::size_t>(grid_.elements()), ElemClass::off_tie);
    for (std::int64_t e : errors) {
      is_error[static_cast<std::size_t>(e)] = true;
      const ElemClass k = classify(e);
      cls[static_cast<std::size_t>(e)] = k;
      by[static_cast<int>(k)].push_back(e);
    }
    const auto count = [&](ElemClass k) { return static_cast<std::int64_t>(by[static_cast<int>(k)].size()); };
    auto in_group_class = [&](ElemClass k) {
      return [this, k](std::int64_t e) {
        const auto g = static_cast<std::size_t>(grid_.group_of(e));
        return k == ElemClass::nonfinite ? bool(nonfinite_[g]) : !nonfinite_[g] && (ds_[g] == 0 || rs_[g] == 0);
      };
    };

    // Groups holding NaN or inf, and byte-0 groups: their own rules.
    struct GroupRule {
      ElemClass k;
      const char* signature;
      const char* param;
      std::vector<std::string> values;
      const char* words;
    };
    const std::vector<GroupRule> group_rules{
        {ElemClass::nonfinite, "nonfinite_rule", "nonfinite", param_choices("nonfinite"), "groups holding NaN or inf"},
        {ElemClass::flush, "flush_rule", "byte0", param_choices("byte0"), "groups whose scale byte is 0"}};
    for (const GroupRule& r : group_rules) {
      const std::int64_t n = count(r.k);
      if (n == 0) continue;
      bool done = false;
      // Several rules can give the same payload once the device's scales are used; the one that
      // also gives the device's scales is the explanation, so it is tried first.
      for (const bool want_scales : {true, false}) {
        if (done || c_.family != Family::mx) break;
        for (const std::string& value : r.values) {
          if (param_of(c_, r.param) == value) continue;
          const std::optional<Contract> v = contract_variant(c_, {{r.param, value}});
          if (!v) continue;
          if (want_scales) {
            const auto scales = variant_scales(*v);
            if (!scales || *scales != ds_) continue;
          }
          if (!explains(*v, in_group_class(r.k))) continue;
          out.push_back(make(r.signature, {{"payload_errors_in_group_class", n}},
                             "all " + std::to_string(n) + " payload differences in " + r.words + " are what " +
                                 r.param + "=" + value + " gives, not " + param_of(c_, r.param) +
                                 " (re-running the contract with it reproduces them)",
                             true));
          done = true;
          break;
        }
      }
      if (!done && n == static_cast<std::int64_t>(errors.size()))
        out.push_back(make(r.signature, {{"payload_errors_in_group_class", n}},
                           "all " + std::to_string(n) + " payload differences are in " + r.words +
                               ": the device applies another rule to them",
                           false));
    }

    // Saturation: wrapped mod 256 (int8), NaN instead of +/-max (MX overflow=nan).
    if (const std::int64_t n = count(ElemClass::saturation); n > 0) {
      std::int64_t wrapped = 0;
      for (std::int64_t e : by[static_cast<int>(ElemClass::saturation)]) {
        if (c_.family == Family::mx) continue;
        const float r = int8_round(quotient(e), c_.int_rounding);
        if (!std::isfinite(r) || std::fabs(r) > 1e15f) continue;
        const auto w = static_cast<std::int8_t>(static_cast<std::uint8_t>(static_cast<std::int64_t>(r) & 0xFF));
        wrapped += static_cast<std::int8_t>(a_[static_cast<std::size_t>(e)]) == w ? 1 : 0;
      }
      const std::optional<Contract> nan = c_.family == Family::mx ? contract_variant(c_, {{"overflow", "nan"}}) : std::nullopt;
      auto saturating = [&](std::int64_t e) { return is_error[static_cast<std::size_t>(e)] && cls[static_cast<std::size_t>(e)] == ElemClass::saturation; };
      if (c_.family != Family::mx && wrapped == n)
        out.push_back(make("wraparound", {{"saturation", n}, {"wrapped_mod_256", wrapped}},
                           "all " + std::to_string(n) +
                               " elements the contract saturates to the int8 range hold the rounded integer wrapped "
                               "mod 256 on the device: an 8-bit conversion without saturation",
                           false));
      else if (nan && c_.overflow != Overflow::nan && explains(*nan, saturating))
        out.push_back(make("wraparound", {{"saturation", n}},
                           "all " + std::to_string(n) +
                               " elements past the element format's max became NaN on the device instead of "
                               "saturating to +/-max (re-running with overflow=nan reproduces them)",
                           true));
    }

    // Ties and off-tie elements: rounding, quotient.
    const std::int64_t ties = count(ElemClass::tie), off = count(ElemClass::off_tie);
    if (ties + off == 0) return;
    auto rounding_class = [&](std::int64_t e) {
      const auto i = static_cast<std::size_t>(e);
      return !is_error[i] || cls[i] == ElemClass::tie || cls[i] == ElemClass::off_tie;
    };
    struct Suspect {
      const char* signature;
      ParamChanges changes;
    };
    std::vector<Suspect> suspects;
    if (c_.family == Family::mx) {
      for (const char* r : {"rne", "half_away", "half_away_fp32", "even_fp32"})
        if (param_of(c_, "rounding") != r) suspects.push_back({"rounding_mode", {{"rounding", r}}});
    } else {
      for (const char* r : {"rne", "half_away", "half_away_fp32"})
        if (param_of(c_, "int_rounding") != r) suspects.push_back({"rounding_mode", {{"int_rounding", r}}});
      for (const char* q : {"divide", "reciprocal", "inv_scale"})
        if (param_of(c_, "quotient") != q) suspects.push_back({"reciprocal_divisor", {{"quotient", q}}});
    }
    const std::int64_t n = ties + off;
    const std::vector<std::pair<std::string, std::int64_t>> ev{{"payload_errors", n}, {"exact_ties", ties}, {"off_tie", off}};
    for (const Suspect& s : suspects) {
      const std::optional<Contract> v = contract_variant(c_, s.changes);
      if (!v || !explains(*v, rounding_class)) continue;
      const std::string was = param_of(c_, s.changes[0].first);
      std::string why = std::string(s.signature) == "rounding_mode"
                            ? "the " + std::to_string(n) + " payload differences (" + std::to_string(ties) +
                                  " at exact ties, " + std::to_string(off) + " off ties) are what " +
                                  changes_words(s.changes) + " gives: the device rounds " + s.changes[0].second +
                                  ", not " + was
                            : "the " + std::to_string(n) + " payload differences (" + std::to_string(off) +
                                  " off ties) are what " + changes_words(s.changes) +
                                  " gives: the device multiplies by a reciprocal (or divides) where the contract " +
                                  (was == "divide" ? "divides by the stored scale" : "uses quotient=" + was);
      out.push_back(make(s.signature, ev, why + " (re-running the contract with it reproduces them)", true));
      return;
    }
    bool toward_zero = true, one_step = true;
    for (std::int64_t e : by[static_cast<int>(ElemClass::tie)]) {
      toward_zero = toward_zero && one_toward_zero(e);
      one_step = one_step && one_code_apart(e);
    }
    for (std::int64_t e : by[static_cast<int>(ElemClass::off_tie)]) {
      toward_zero = toward_zero && one_toward_zero(e);
      one_step = one_step && one_code_apart(e);
    }
    if (toward_zero && off > 0)
      out.push_back(make("rounding_mode", ev,
                         "every one of the " + std::to_string(n) +
                             " payload differences is one code toward zero, off ties too: the device truncates "
                             "toward zero instead of rounding to nearest",
                         false));
    else if (off == 0)
      out.push_back(make("rounding_mode", ev,
                         "all " + std::to_string(n) +
                             " payload differences are at exact ties of x / scale: the device breaks ties by another "
                             "rule",
                         false));
    else if (ties == 0 && one_step && off * 100 < grid_.elements())
      out.push_back(make("reciprocal_divisor", ev,
                         "the " + std::to_string(off) + " payload differences (of " +
                             std::to_string(grid_.elements()) +
                             " elements) are sparse, off ties and one code apart with equal scales: the device "
                             "multiplies by a reciprocal instead of dividing",
                         false));
  }

  const Contract& c_;
  const TensorView& x_;
  const ContractOutput& ref_;
  const DeviceOutput& dev_;
  ScaleGrid grid_;
  std::vector<float> values_, amax_;
  std::vector<bool> nonfinite_;
  std::vector<std::uint32_t> rs_, ds_;
  std::vector<std::uint8_t> e_, a_, q_;
};

std::vector<Diagnosis> diagnose_pool(const Contract& c, const TensorView& x, const ContractOutput& ref,
                                     const DeviceOutput& dev) {
  const ScaleGrid grid(c, x.shape);
  const std::size_t size = dtype_size(ref.output.dtype());
  std::int64_t differing = 0, in_tail = 0;
  for (std::int64_t e = 0; e < grid.elements(); ++e) {
    const auto off = static_cast<std::size_t>(e) * size;
    if (std::memcmp(static_cast<const std::uint8_t*>(ref.output.raw()) + off,
                    static_cast<const std::uint8_t*>(dev.output.raw()) + off, size) == 0)
      continue;
    ++differing;
    in_tail += grid.is_tail_group(grid.group_of(e)) ? 1 : 0;
  }
  const std::string other = c.divisor == PoolDivisor::true_length ? "uniform" : "true_length";
  const std::optional<Contract> v = contract_variant(c, {{"divisor", other}});
  const bool confirmed = v && same_contents(run_contract(*v, x, kRef).output, dev.output);
  if (!confirmed && (in_tail != differing || !grid.has_tail())) return {};
  const std::int64_t len = x.shape[1];
  std::string why = "only the tail cells differ (" + std::to_string(differing) + " values)";
  if (confirmed)
    why += other == "uniform" ? " and the device equals the uniform divisor's result: the tail cell was divided by P = " +
                                    std::to_string(c.pool) + ", not by its true length S % P = " +
                                    std::to_string(len % c.pool)
                              : " and the device equals the true-length divisor's result";
  else
    why += ": the device treats the partial last cell by another rule";
  return {make("tail_rule", {{"values_differing", differing}, {"in_tail_cells", in_tail}}, why, confirmed)};
}

// A device that reports the contract's scales but quantized finer domains, each with its own
// scale (an int8.token device that scales every 64 columns of a row): its payload is another
// granularity's, every byte of it, found by re-running each alternative of the family. The
// coarsest such granularity is named, the one with the fewest scales.
std::optional<Diagnosis> payload_of_another_granularity(const Contract& c, const TensorView& x, const DeviceOutput& dev) {
  const std::vector<ScaleAlternative> alts = lab_family(c.family).scale_alternatives(c, x.shape);
  const ScaleAlternative* best = nullptr;
  std::int64_t best_scales = 0;
  for (const ScaleAlternative& a : alts) {
    if (a.signature != "granularity") continue;
    std::optional<ContractOutput> o;
    try {
      o = run_contract(a.c, x, kRef);
    } catch (const Error&) {
      continue;  // a shape this granularity refuses
    }
    if (!same_contents(o->payload, dev.payload)) continue;
    if (!best || o->scale.numel() < best_scales) {
      best = &a;
      best_scales = o->scale.numel();
    }
  }
  if (!best) return std::nullopt;
  const auto payload_bytes = static_cast<std::int64_t>(dev.payload.nbytes());
  return make("granularity",
              {{"payload_bytes", payload_bytes},
               {"payload_bytes_matching_alternative", payload_bytes},
               {"scales_reported", dev.scale.numel()},
               {"scales_of_alternative", best_scales}},
              "the device reports " + lab_family(c.family).granularity_words(c) + " (scale shape " +
                  shape_str(dev.scale.shape()) + ") but its payload is, in all " + std::to_string(payload_bytes) +
                  " bytes, the payload of " + best->what + ": it quantized each of those " +
                  std::to_string(best_scales) + " domains with its own scale; fix the granularity before comparing rounding",
              true);
}

std::vector<Diagnosis> diagnose_impl(const Contract& c, const TensorView& x, const ContractOutput& ref,
                                     const DeviceOutput& dev, bool layout_checked) {
  if (c.family == Family::pool) return diagnose_pool(c, x, ref, dev);
  if (c.family == Family::hif4) return {};  // no parameters to vary: the counts say it all
  if (diagnosed_by_search(c)) return diagnose_by_search(c, x, ref, dev);

  const bool same_shape = dev.scale.shape() == ref.scale.shape();
  if (!layout_checked && (!same_shape || !same_contents(dev.scale, ref.scale))) {
    // Stage 1 (§8.5): another granularity or layout with the device's scale shape.
    const std::int64_t own = same_shape ? matching_bytes(ref.scale, dev.scale) : -1;
    const ScaleAlternative* best = nullptr;
    ContractOutput best_out;
    std::int64_t best_scale = -1, best_payload = -1;
    const std::vector<ScaleAlternative> alts = lab_family(c.family).scale_alternatives(c, x.shape);
    for (const ScaleAlternative& a : alts) {
      try {
        if (scale_shape(a.c, x.shape) != dev.scale.shape()) continue;
      } catch (const Error&) {
        continue;
      }
      ContractOutput o = run_contract(a.c, x, kRef);
      if (o.scale.dtype() != dev.scale.dtype()) continue;
      const std::int64_t sm = matching_bytes(o.scale, dev.scale);
      const std::int64_t pm = matching_bytes(o.payload, dev.payload);
      if (sm > best_scale || (sm == best_scale && pm > best_payload)) {
        best = &a;
        best_out = std::move(o);
        best_scale = sm;
        best_payload = pm;
      }
    }
    if (same_shape && (!best || best_scale <= own || best_scale != static_cast<std::int64_t>(dev.scale.nbytes())))
      best = nullptr;  // the same shape: only a layout that places every byte counts
    if (!best && !same_shape)
      fail(ErrorKind::bad_input, "the device's scale has shape " + shape_str(dev.scale.shape()) +
                                     ", the contract gives " + shape_str(ref.scale.shape()) +
                                     ", and no other block, group or scale layout of the contract gives that shape");
    if (best) {
      const auto scale_bytes = static_cast<std::int64_t>(dev.scale.nbytes());
      const auto payload_bytes = static_cast<std::int64_t>(dev.payload.nbytes());
      const bool all = best_scale == scale_bytes && best_payload == payload_bytes;
      std::vector<std::pair<std::string, std::int64_t>> ev{{"scale_bytes", scale_bytes},
                                                           {"scale_bytes_matching_alternative", best_scale},
                                                           {"payload_bytes", payload_bytes},
                                                           {"payload_bytes_matching_alternative", best_payload}};
      if (best->signature == "granularity") {
        const std::string why =
            "the device's scale tensor has shape " + shape_str(dev.scale.shape()) + ", the contract's " +
            shape_str(ref.scale.shape()) + ": it is the shape of " + best->what + ", not " +
            lab_family(c.family).granularity_words(c) +
            " (" + std::to_string(best_scale) + " of " + std::to_string(scale_bytes) + " scale bytes and " +
            std::to_string(best_payload) + " of " + std::to_string(payload_bytes) +
            " payload bytes match that granularity); fix the granularity before comparing rounding";
        return {make("granularity", ev, why, all)};
      }
      std::vector<Diagnosis> out{make(
          "scale_layout", ev,
          "the device's scale bytes are the contract's scale values in the " + param_of(best->c, "layout") +
              " layout (shape " + shape_str(dev.scale.shape()) + "), not " + param_of(c, "layout") + " (shape " +
              shape_str(ref.scale.shape()) + "): read that way, " + std::to_string(best_scale) + " of " +
              std::to_string(scale_bytes) + " scale bytes match",
          best_scale == scale_bytes)};
      // The rest is judged against the same values in the device's layout.
      if (!all)
        for (Diagnosis& d : diagnose_impl(best->c, x, best_out, dev, true)) out.push_back(std::move(d));
      return out;
    }
  }
  if (same_shape && !same_contents(dev.payload, ref.payload))
    if (std::optional<Diagnosis> d = payload_of_another_granularity(c, x, dev)) return {*d};
  return Stager(c, x, ref, dev).run();
}

}  // namespace

std::vector<Diagnosis> diagnose(const Contract& c, const TensorView& x, const ContractOutput& reference,
                                const DeviceOutput& device) {
  return diagnose_impl(c, x, reference, device, false);
}

}  // namespace qexact::conformance
