// A contract with some of its parameters changed, as the lab's diagnoses try them: a change
// that reproduces a device's bytes names what the device does differently.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "qexact/contract.hpp"
#include "qexact/tensor.hpp"

namespace qexact::conformance {

using ParamChanges = std::vector<std::pair<std::string, std::string>>;

// The value of parameter `key` of c as params() spells it; "?" when c has no such parameter.
std::string param_of(const Contract& c, const std::string& key);
// "key=value, key=value"
std::string changes_words(const ParamChanges& ch);
// c with ch applied; nullopt when that is not a contract qexact implements.
std::optional<Contract> contract_variant(const Contract& c, const ParamChanges& ch);
// How many bytes a and b hold equal at the same offset (0 when their sizes differ).
std::int64_t matching_bytes(const Tensor& a, const Tensor& b);

}  // namespace qexact::conformance
