// A contract's parameters by key, for the formats' checks of what they can store.
#pragma once
#include <map>
#include <string>

#include "checkpoint/storage.hpp"
#include "qexact/contract.hpp"

namespace qexact::model {

inline std::map<std::string, std::string> param_map(const Contract& c) {
  std::map<std::string, std::string> m;
  for (const auto& [k, v] : params(c)) m[k] = v;
  return m;
}

inline std::string param_or(const std::map<std::string, std::string>& m, const std::string& key) {
  const auto it = m.find(key);
  return it == m.end() ? std::string() : it->second;
}

// The error of a format that cannot store a contract (bad_argument): why not, and what it takes.
[[noreturn]] void refuse_contract(const char* format, const Contract& c, const std::string& why, const char* takes);

// Why an nvfp4 contract's tensor scale is not the one a format's loader reads ("" when it is):
// `expected` is tensor_scale's value, `stored` the tensor's name and meaning in that format.
std::string tensor_scale_mismatch(const std::map<std::string, std::string>& p, const std::string& expected,
                                  const std::string& stored);

// Why an MX contract is not the loaders' packed layout ("" when it is): groups of 32 along the
// input axis, element 2k in the low nibble.
std::string mx_layout_mismatch(const std::map<std::string, std::string>& p);

// An output stored with its bytes as they are.
inline checkpoint::detail::StoredOutput plain(std::string name, std::string dtype, Shape shape) {
  return {std::move(name), std::move(dtype), std::move(shape), std::nullopt};
}

// A tensor's stored name: `<module>.<suffix>` for weight `<module>.weight`.
std::string stored_name(const std::string& weight_name, const std::string& suffix);

// The Linear weights `<m>.weight` [N, K] of a folder that stores each as `<m>.<payload>` beside a
// `<m>.<scale>`: K is the payload's last axis, times 2 where the payload is packed U8 E2M1 pairs.
std::vector<checkpoint::detail::Source> weights_beside(const Folder& q, const std::string& payload, const std::string& scale,
                                                       const std::string& dtype);

}  // namespace qexact::model
