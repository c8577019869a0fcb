#include "contracts/contract_json.hpp"

#include <vector>

#include "qexact/error.hpp"

namespace qexact {
namespace {

[[noreturn]] void malformed(const std::string& source, const std::string& what) {
  fail(ErrorKind::bad_file, source + ": " + what);
}

}  // namespace

nlohmann::ordered_json contract_params_json(const Contract& c) {
  nlohmann::ordered_json p = nlohmann::ordered_json::object();
  for (const auto& [key, value] : params(c)) p[key] = value;
  return p;
}

void contract_to_json(nlohmann::ordered_json& j, const Contract& c) {
  j["preset"] = c.preset;
  j["params"] = contract_params_json(c);
}

Contract contract_from_json(const nlohmann::ordered_json& j, const std::string& source, const std::string& where) {
  if (!j.is_object()) malformed(source, where + " is not an object");
  const auto preset = j.find("preset");
  if (preset == j.end()) malformed(source, "missing \"preset\" in " + where);
  if (!preset->is_string()) malformed(source, "\"preset\" in " + where + " is not a string");
  const auto params = j.find("params");
  if (params == j.end()) malformed(source, "missing \"params\" in " + where);
  if (!params->is_object()) malformed(source, "\"params\" in " + where + " is not an object");
  std::vector<std::string> overrides;
  for (const auto& [key, value] : params->items()) {
    if (!value.is_string()) malformed(source, "parameter \"" + key + "\" in " + where + " is not a string");
    overrides.push_back(key + "=" + value.get<std::string>());
  }
  return make_contract(preset->get<std::string>(), overrides);
}

}  // namespace qexact
