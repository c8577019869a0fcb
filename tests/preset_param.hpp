// Tests parameterized by preset name. A check that loops over every preset inside one test is
// one ctest test that runs for minutes under ASan, and ctest's jobs wait on it; one test per
// preset spreads the same work over the jobs and names the preset that fails.
#pragma once
#include <gtest/gtest.h>

#include <cctype>
#include <string>

#include "qexact/contract.hpp"

namespace qexact::test {

// gtest names allow letters, digits and '_': "fp8.deepseek.1x128" becomes "fp8_deepseek_1x128".
inline std::string test_name_of_preset(std::string name) {
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

inline std::string preset_test_name(const ::testing::TestParamInfo<std::string>& info) {
  return test_name_of_preset(info.param);
}

}  // namespace qexact::test

#define QEXACT_INSTANTIATE_FOR_EVERY_PRESET(Suite)                                           \
  INSTANTIATE_TEST_SUITE_P(Presets, Suite, ::testing::ValuesIn(::qexact::preset_names()), \
                           ::qexact::test::preset_test_name)
