// Small helpers shared by the runtime unit tests.
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace khorovod::testing {

// EXPECT_TRUE(HasSubstr(s, "x")) prints both strings on failure.
inline ::testing::AssertionResult HasSubstr(const std::string& haystack,
                                            const std::string& needle) {
  if (haystack.find(needle) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "'" << haystack << "' does not contain '" << needle << "'";
}

}  // namespace khorovod::testing
