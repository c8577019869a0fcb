#include "conformance/contract_variant.hpp"

#include "qexact/error.hpp"

namespace qexact::conformance {

std::string param_of(const Contract& c, const std::string& key) {
  for (const auto& [k, v] : params(c))
    if (k == key) return v;
  return "?";
}

std::string changes_words(const ParamChanges& ch) {
  std::string s;
  for (const auto& [k, v] : ch) s += (s.empty() ? "" : ", ") + k + "=" + v;
  return s;
}

std::optional<Contract> contract_variant(const Contract& c, const ParamChanges& ch) {
  Contract v = c;
  try {
    for (const auto& [k, val] : ch) set_param(v, k, val);
    validate(v);
  } catch (const Error&) {
    return std::nullopt;
  }
  return v;
}

std::int64_t matching_bytes(const Tensor& a, const Tensor& b) {
  if (a.nbytes() != b.nbytes()) return 0;
  const auto* pa = static_cast<const std::uint8_t*>(a.raw());
  const auto* pb = static_cast<const std::uint8_t*>(b.raw());
  std::int64_t n = 0;
  for (std::size_t i = 0; i < a.nbytes(); ++i) n += pa[i] == pb[i] ? 1 : 0;
  return n;
}

}  // namespace qexact::conformance
