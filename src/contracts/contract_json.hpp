// A contract as JSON, in one place: the members "preset" (its name) and "params" (every
// parameter as a string, in params(c)'s order) that meta.json, a case directory's
// manifest.json and the CLI's --json reports carry, and the reader that rebuilds the
// contract from them. Every file that holds a contract spells it alike, and a parameter
// added to the contract reaches all of them.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "qexact/contract.hpp"

namespace qexact {

// {"key": "value", ...}: every parameter of c.
nlohmann::ordered_json contract_params_json(const Contract& c);

// Sets j["preset"] and j["params"] (appended in that order when j lacks them).
void contract_to_json(nlohmann::ordered_json& j, const Contract& c);

// The contract of j's "preset" and "params" members: make_contract(preset, every "key=value").
// A missing or mistyped member is ErrorKind::bad_file, "<source>: ...", naming the member and
// `where` (e.g. "the manifest"); an unknown preset, parameter or value is make_contract's error.
Contract contract_from_json(const nlohmann::ordered_json& j, const std::string& source, const std::string& where);

}  // namespace qexact
