#include "conformance/diagnose_search.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "conformance/contract_variant.hpp"
#include "conformance/scale_grid.hpp"
#include "contracts/family_table.hpp"
#include "qexact/error.hpp"

namespace qexact::conformance {
namespace {

const RunOptions kReferenceRun{Engine::reference, 1};

// Parameters by how much a change of them tells (a pair of changes is named by the more telling
// one) and the signature each names.
constexpr std::pair<const char*, const char*> kSignatures[] = {
    {"granularity", "granularity"},     {"stored", "stored_scale"},       {"scale_kind", "stored_scale"},
    {"tensor_scale", "tensor_scale"},   {"scale_pow2", "scale_pow2"},     {"scale_arith", "scale_rule"},
    {"zero_group", "zero_group"},       {"amax_floor", "zero_group"},     {"quotient", "reciprocal_divisor"},
    {"quotient_arith", "quotient_arith"}, {"round_mbits", "scale_rule"},  {"nonfinite_input", "nonfinite_rule"},
    {"element", "element"},             {"signed_zero", "signed_zero"}};

std::size_t telling_rank(const std::string& key) {
  for (std::size_t i = 0; i < std::size(kSignatures); ++i)
    if (key == kSignatures[i].first) return i;
  return std::size(kSignatures);
}

std::string signature_of(const ParamChanges& ch) {
  std::size_t best = std::size(kSignatures);
  for (const auto& kv : ch) best = std::min(best, telling_rank(kv.first));
  return best < std::size(kSignatures) ? kSignatures[best].second : "parameter";
}

std::string value_of(const Contract& c, const std::string& key) {
  for (const auto& [k, v] : params(c))
    if (k == key) return v;
  return "";
}

bool identical(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && (a.nbytes() == 0 || (a.dtype() == b.dtype() && a.shape() == b.shape() &&
                                                          std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0));
}

bool reproduces(const ContractOutput& o, const DeviceOutput& d) {
  return identical(o.payload, d.payload) && identical(o.scale, d.scale) && identical(o.tensor_scale, d.tensor_scale);
}

// Every grain the shape allows: tensor, row, group:2^k and group:C, tile:2^a x 2^b,
// head_block:2^k for (B, S, N, D).
std::vector<std::string> grains_for(const Shape& x) {
  std::vector<std::string> out{"tensor", "row"};
  if (x.empty()) return out;
  const std::int64_t cols = x.back();
  const std::int64_t rows = cols > 0 ? shape_numel(x) / cols : 0;
  for (std::int64_t n = 1; n <= cols; n *= 2) out.push_back("group:" + std::to_string(n));
  if (cols > 0 && !std::has_single_bit(static_cast<std::uint64_t>(cols))) out.push_back("group:" + std::to_string(cols));
  for (std::int64_t m = 1; m <= std::max<std::int64_t>(rows, 1); m *= 2)
    for (std::int64_t n = 1; n <= cols; n *= 2) out.push_back("tile:" + std::to_string(m) + "x" + std::to_string(n));
  if (x.size() == 4)
    for (std::int64_t t = 1; t <= x[1]; t *= 2) out.push_back("head_block:" + std::to_string(t));
  return out;
}

// The values tried for one parameter: its choices, or the grains of the shape.
std::vector<std::string> candidates(Family f, const std::string& key, const Shape& x) {
  if (key == "granularity") return grains_for(x);
  if (key == "amax_floor") return {"0", "1e-12", "0.001953125"};  // none, torchao's EPS, vLLM's 1/512
  return param_choices(f, key);
}

class Search {
 public:
  Search(const Contract& c, const TensorView& x, const DeviceOutput& dev) : c_(c), x_(x), dev_(dev) {}

  // A change of the granularity that gives the device's scale shape, the closest first.
  std::optional<std::pair<Contract, ContractOutput>> granularity() const {
    std::optional<std::pair<Contract, ContractOutput>> best;
    std::int64_t best_scale = -1, best_payload = -1;
    for (const std::string& g : grains_for(x_.shape)) {
      const std::optional<Contract> v = contract_variant(c_, {{"granularity", g}});
      if (!v || !shape_fits(*v)) continue;
      std::optional<ContractOutput> o = run(*v);
      if (!o || o->scale.dtype() != dev_.scale.dtype()) continue;
      const std::int64_t sm = matching_bytes(o->scale, dev_.scale), pm = matching_bytes(o->payload, dev_.payload);
      if (sm > best_scale || (sm == best_scale && pm > best_payload)) {
        best_scale = sm;
        best_payload = pm;
        best.emplace(*v, std::move(*o));
      }
    }
    return best;
  }

  // Change sets that reproduce every device byte: single changes first; when none does, a
  // change the contract refuses alone, completed by one change of another parameter.
  std::vector<ParamChanges> reproducing(const Contract& base) const {
    std::vector<ParamChanges> found, refused;
    const auto ps = params(base);
    for (const auto& [key, current] : ps)
      for (const std::string& value : candidates(base.family, key, x_.shape)) {
        if (value == current) continue;
        const ParamChanges ch{{key, value}};
        const std::optional<Contract> v = contract_variant(base, ch);
        if (!v) {
          refused.push_back(ch);
          continue;
        }
        if (try_reproduces(*v)) found.push_back(ch);
      }
    if (!found.empty()) return found;
    for (const ParamChanges& first : refused)
      for (const auto& [key, current] : ps) {
        if (key == first[0].first) continue;
        for (const std::string& value : candidates(base.family, key, x_.shape)) {
          if (value == current) continue;
          ParamChanges ch = first;
          ch.emplace_back(key, value);
          const std::optional<Contract> v = contract_variant(base, ch);
          if (v && try_reproduces(*v)) found.push_back(ch);
        }
      }
    return found;
  }

  std::optional<ContractOutput> run(const Contract& v) const {
    try {
      return run_contract(v, x_, kReferenceRun);
    } catch (const Error&) {
      return std::nullopt;
    }
  }

 private:
  bool shape_fits(const Contract& v) const {
    try {
      return scale_shape(v, x_.shape) == dev_.scale.shape();
    } catch (const Error&) {
      return false;
    }
  }

  bool try_reproduces(const Contract& v) const {
    if (!shape_fits(v)) return false;
    const std::optional<ContractOutput> o = run(v);
    return o && reproduces(*o, dev_);
  }

  const Contract& c_;
  const TensorView& x_;
  const DeviceOutput& dev_;
};

// Sign and magnitude of an element code (fp8: bit 7; E2M1 nibble: bit 3).
std::pair<bool, int> sign_magnitude(const Contract& c, std::uint8_t code) {
  const int bits = c.family == Family::nvfp4 ? 4 : 8;
  return {((code >> (bits - 1)) & 1) != 0, code & ((1 << (bits - 1)) - 1)};
}

bool is_pow2_bits(std::uint32_t bits) {
  const float f = std::bit_cast<float>(bits);
  int e = 0;
  return f > 0.0f && std::isfinite(f) && std::frexp(f, &e) == 0.5f;
}

// When no change reproduces the device: what the pattern of the differences says.
std::vector<Diagnosis> patterns(const Contract& c, const TensorView& x, const ContractOutput& ref,
                                const DeviceOutput& dev) {
  std::vector<Diagnosis> out;
  if (ref.tensor_scale.nbytes() != dev.tensor_scale.nbytes()) {
    const bool missing = dev.tensor_scale.nbytes() == 0;
    out.push_back(Diagnosis{
        "tensor_scale",
        {{"tensor_scale_bytes_expected", static_cast<std::int64_t>(ref.tensor_scale.nbytes())},
         {"tensor_scale_bytes_written", static_cast<std::int64_t>(dev.tensor_scale.nbytes())}},
        missing ? "the device wrote no tensor scale, the contract (tensor_scale=" + value_of(c, "tensor_scale") +
                      ") has one: the device quantizes single level"
                : "the device wrote a tensor scale the contract (tensor_scale=" + value_of(c, "tensor_scale") +
                      ") does not have: the device quantizes two level",
        false});
  }
  if (dev.scale.shape() != ref.scale.shape() || dev.payload.shape() != ref.payload.shape()) return out;
  const ScaleGrid grid(c, x.shape);
  const std::vector<std::uint32_t> rs = grid.scale_bits(ref.scale), ds = grid.scale_bits(dev.scale);
  const ScaleEncoding enc = scale_encoding(c);
  const bool ieee = enc == ScaleEncoding::fp32 || enc == ScaleEncoding::f16;
  std::map<std::int64_t, std::int64_t> hist;
  std::int64_t differing = 0, pow2 = 0, inverse = 0;
  for (std::size_t g = 0; g < rs.size(); ++g) {
    if (rs[g] == ds[g]) continue;
    ++differing;
    ++hist[ordered_scale(ds[g], enc) - ordered_scale(rs[g], enc)];
    if (ieee) {
      pow2 += is_pow2_bits(ds[g]) ? 1 : 0;
      const double product =
          static_cast<double>(std::bit_cast<float>(ds[g])) * static_cast<double>(std::bit_cast<float>(rs[g]));
      inverse += std::fabs(product - 1.0) < 1e-6 ? 1 : 0;
    }
  }
  std::string deltas;
  for (const auto& [d, n] : hist) deltas += (deltas.empty() ? "" : ", ") + std::string(d > 0 ? "+" : "") + std::to_string(d) + ": " + std::to_string(n);
  const std::string unit = scale_delta_unit(enc);
  if (differing > 0) {
    const std::vector<std::pair<std::string, std::int64_t>> ev{{"scales_differing", differing}};
    const std::string counted = std::to_string(differing) + " differing scales (deltas in " + unit + ": " + deltas + ")";
    const bool one_step = std::all_of(hist.begin(), hist.end(), [](const auto& h) { return h.first == 1 || h.first == -1; });
    if (ieee && inverse == differing)
      out.push_back(Diagnosis{"stored_scale", ev,
                              "the " + counted + " are the reciprocals of the contract's: the device stores 1/s where the "
                              "contract stores s (a multiplier for a descale, or stored=inverse)",
                              false});
    else if (ieee && pow2 == differing)
      out.push_back(Diagnosis{"scale_pow2", ev,
                              "the " + counted + " are all powers of two: the device rounds its scales to a power of two "
                              "(scale_pow2=" + value_of(c, "scale_pow2") + " in the contract)",
                              false});
    else if (enc == ScaleEncoding::e4m3 && one_step)
      out.push_back(Diagnosis{"scale_rule", ev,
                              "the " + counted + " are one E4M3 code off: the device rounds the block scale "
                              "fp32(amax / 6) to E4M3 another way (the contract: round to nearest even, clamped to "
                              "[2^-6, 448])",
                              false});
    else if (ieee && std::all_of(hist.begin(), hist.end(), [](const auto& h) { return std::abs(h.first) <= 2; }))
      out.push_back(Diagnosis{"scale_rule", ev,
                              "the " + counted + " are within 2 ulps: the device computes the scale with another "
                              "arithmetic (scale_arith=" + value_of(c, "scale_arith") + " in the contract: fp32 division, "
                              "reciprocal multiply or fp64)",
                              false});
    return out;
  }
  // Equal scales: sparse one-code steps off ties are a recomputed divisor.
  const std::vector<std::uint8_t> e = grid.codes(ref.payload), a = grid.codes(dev.payload);
  std::int64_t wrong = 0, one_code = 0;
  for (std::size_t i = 0; i < e.size(); ++i) {
    if (e[i] == a[i]) continue;
    ++wrong;
    const auto [es, em] = sign_magnitude(c, e[i]);
    const auto [as, am] = sign_magnitude(c, a[i]);
    one_code += es == as && std::abs(em - am) == 1 ? 1 : 0;
  }
  if (wrong > 0 && one_code == wrong && wrong * 100 < grid.elements())
    out.push_back(Diagnosis{"reciprocal_divisor",
                            {{"payload_errors", wrong}, {"elements", grid.elements()}},
                            "the " + std::to_string(wrong) + " payload differences (of " + std::to_string(grid.elements()) +
                                " elements) are sparse and one code apart with every scale equal: the device "
                                "multiplies by a reciprocal it recomputed instead of using the contract's quotient (" +
                                "quotient=" + value_of(c, "quotient") + ")",
                            false});
  return out;
}

}  // namespace

bool diagnosed_by_search(const Contract& c) { return c.family == Family::fp8_scaled || c.family == Family::nvfp4; }

std::vector<Diagnosis> diagnose_by_search(const Contract& c, const TensorView& x, const ContractOutput& reference,
                                          const DeviceOutput& device) {
  const Search search(c, x, device);
  std::vector<Diagnosis> out;
  Contract base = c;
  ContractOutput base_out = reference;
  if (device.scale.shape() != reference.scale.shape()) {
    // Granularity first (§8.5): nothing else can be judged against scales of another grid.
    auto best = search.granularity();
    if (!best)
      fail(ErrorKind::bad_input, "the device's scale has shape " + shape_str(device.scale.shape()) +
                                     ", the contract gives " + shape_str(reference.scale.shape()) +
                                     ", and no granularity of the contract gives that shape");
    base = best->first;
    base_out = std::move(best->second);
    const bool all = reproduces(base_out, device);
    const auto scale_bytes = static_cast<std::int64_t>(device.scale.nbytes());
    const auto payload_bytes = static_cast<std::int64_t>(device.payload.nbytes());
    const std::int64_t sm = matching_bytes(base_out.scale, device.scale), pm = matching_bytes(base_out.payload, device.payload);
    out.push_back(Diagnosis{
        "granularity",
        {{"scale_bytes", scale_bytes},
         {"scale_bytes_matching_alternative", sm},
         {"payload_bytes", payload_bytes},
         {"payload_bytes_matching_alternative", pm}},
        "the device's scale tensor has shape " + shape_str(device.scale.shape()) + ", the contract's " +
            shape_str(reference.scale.shape()) + ": it is the shape of granularity=" + value_of(base, "granularity") +
            ", not " + value_of(c, "granularity") + " (" + std::to_string(sm) + " of " + std::to_string(scale_bytes) +
            " scale bytes and " + std::to_string(pm) + " of " + std::to_string(payload_bytes) +
            " payload bytes match it); fix the granularity before comparing rounding",
        all});
    if (all) return out;
  }
  for (const ParamChanges& ch : search.reproducing(base)) {
    std::string was;
    for (const auto& kv : ch) was += (was.empty() ? "" : ", ") + kv.first + "=" + value_of(base, kv.first);
    out.push_back(Diagnosis{signature_of(ch),
                            {{"changes", static_cast<std::int64_t>(ch.size())}},
                            "re-running the contract with " + changes_words(ch) + " (not " + was +
                                ") reproduces every payload, scale and tensor-scale byte of the device",
                            true});
  }
  if (out.empty() || !out.back().confirmed)
    for (Diagnosis& d : patterns(base, x, base_out, device)) out.push_back(std::move(d));
  return out;
}

}  // namespace qexact::conformance
