// "Did you mean" in the errors for unknown names (src/did_you_mean.hpp): the nearest known
// name for a typo, nothing for a word that is no near miss.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "conformance/infer.hpp"
#include "did_you_mean.hpp"
#include "int8_test_util.hpp"
#include "qexact/contract.hpp"
#include "qexact/error.hpp"
#include "qexact/tensor.hpp"

namespace qexact {
namespace {

std::string error_of(const std::function<void()>& f) { return int8_test::error_of(f, ErrorKind::bad_argument); }

TEST(DidYouMean, EditDistanceCountsEachTypoOnce) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("block", "block"), 0u);
  EXPECT_EQ(edit_distance("blok", "block"), 1u);     // a deletion
  EXPECT_EQ(edit_distance("blocks", "block"), 1u);   // an insertion
  EXPECT_EQ(edit_distance("bleck", "block"), 1u);    // a substitution
  EXPECT_EQ(edit_distance("bolck", "block"), 1u);    // two neighbours swapped
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
}

TEST(DidYouMean, OnlyANearMissIsSuggested) {
  const std::vector<std::string> names{"rne", "trunc", "half_away"};
  EXPECT_EQ(nearest_name("rnee", names), "rne");
  EXPECT_EQ(nearest_name("half-away", names), "half_away");
  EXPECT_EQ(nearest_name("rne", names), "");       // not a typo
  EXPECT_EQ(nearest_name("floor", names), "");     // another word altogether
  EXPECT_EQ(did_you_mean("trnuc", names), ": did you mean 'trunc'?");
  EXPECT_EQ(did_you_mean("ceil", names), "");
}

TEST(DidYouMean, ErrorsForUnknownNamesSuggestTheNearest) {
  EXPECT_EQ(error_of([] { make_preset("mxfp8.torchao.flor"); }),
            "unknown preset 'mxfp8.torchao.flor': did you mean 'mxfp8.torchao.floor'? (see `qexact presets`)");
  EXPECT_EQ(error_of([] { make_preset("nope"); }), "unknown preset 'nope' (see `qexact presets`)");
  EXPECT_NE(error_of([] { make_contract("mxfp8.ascend", {"blok=16"}); })
                .find("unknown parameter 'blok': did you mean 'block'? (this contract takes: "),
            std::string::npos);
  EXPECT_NE(error_of([] { make_contract("mxfp8.ascend", {"rounding=rnee"}); })
                .find("unknown rounding 'rnee': did you mean 'rne'? ("),
            std::string::npos);
  EXPECT_NE(error_of([] { make_contract("mxfp8.ascend", {"overflow=saturat"}); })
                .find("unknown overflow rule 'saturat': did you mean 'saturate'? ("),
            std::string::npos);
  EXPECT_NE(error_of([] { make_contract("mxfp8.ascend", {"layout=rowmjaor"}); })
                .find("unknown value 'rowmjaor': did you mean 'rowmajor'? ("),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_dtype("bfloat61"); }).find("unknown dtype 'bfloat61': did you mean 'bfloat16'? ("),
            std::string::npos);
  EXPECT_NE(error_of([] { conformance::parse_family("int8.tokn"); })
                .find("unknown family 'int8.tokn': did you mean 'int8.token'? ("),
            std::string::npos);
}

}  // namespace
}  // namespace qexact
