// The contract <-> JSON pair (contracts/contract_json.hpp) that meta.json, manifest.json and
// the --json reports share: every preset round-trips to the same parameters, the members are
// spelled as the existing files spell them, and a malformed document is named.
#include <gtest/gtest.h>

#include <string>

#include "contracts/contract_json.hpp"
#include "qexact/contract.hpp"
#include "qexact/error.hpp"

namespace qexact {
namespace {

using Json = nlohmann::ordered_json;

TEST(ContractJson, EveryPresetRoundTrips) {
  for (const std::string& name : preset_names()) {
    const Contract c = make_preset(name);
    Json j;
    j["format"] = "before";  // members already there stay first
    contract_to_json(j, c);
    ASSERT_EQ(j.size(), 3u);
    EXPECT_EQ(j.begin().key(), "format");
    EXPECT_EQ(j["preset"], name);
    ASSERT_TRUE(j["params"].is_object());
    EXPECT_EQ(j["params"].size(), params(c).size()) << name;
    const Contract back = contract_from_json(Json::parse(j.dump()), "test.json", "the document");
    EXPECT_EQ(back.preset, name);
    EXPECT_EQ(params(back), params(c)) << name;
  }
}

TEST(ContractJson, OverriddenParametersSurvive) {
  const Contract c = make_contract("mxfp8.ascend", {"rounding=half_away", "layout=rowmajor"});
  Json j;
  contract_to_json(j, c);
  EXPECT_EQ(j["params"]["rounding"], "half_away");
  EXPECT_EQ(params(contract_from_json(j, "m.json", "the manifest")), params(c));
  EXPECT_EQ(contract_params_json(c), j["params"]);
}

TEST(ContractJson, AFileWrittenBeforeStillReads) {
  // A meta.json's contract members as `qexact quantize` wrote them (a subset of parameters:
  // the rest take the preset's values).
  const Json j = Json::parse(R"({"qexact_version": "0.1.0", "preset": "int8.token.blaze",
                                 "params": {"scale_mode": "before", "scale_min": "1e-06"}, "path": "single_pass"})");
  const Contract c = contract_from_json(j, "meta.json", "the document");
  EXPECT_EQ(params(c), params(make_contract("int8.token.blaze", {"scale_mode=before", "scale_min=1e-06"})));
}

TEST(ContractJson, MalformedDocumentsAreNamed) {
  auto bad = [](const std::string& text, const std::string& needle) {
    try {
      (void)contract_from_json(Json::parse(text), "x.json", "the manifest");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::bad_file) << text;
      EXPECT_EQ(std::string(e.what()), "x.json: " + needle) << text;
    }
  };
  bad("[]", "the manifest is not an object");
  bad(R"({"params": {}})", "missing \"preset\" in the manifest");
  bad(R"({"preset": 3, "params": {}})", "\"preset\" in the manifest is not a string");
  bad(R"({"preset": "mx.ocp"})", "missing \"params\" in the manifest");
  bad(R"({"preset": "mx.ocp", "params": []})", "\"params\" in the manifest is not an object");
  bad(R"({"preset": "mx.ocp", "params": {"block": 32}})", "parameter \"block\" in the manifest is not a string");
  try {
    (void)contract_from_json(Json::parse(R"({"preset": "mx.ocp", "params": {"blok": "32"}})"), "x.json", "it");
    ADD_FAILURE() << "an unknown parameter was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("blok"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace qexact
