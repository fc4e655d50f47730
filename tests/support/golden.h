// Golden-file comparison shared by every test that checks an output format against a file in
// the tree. EVALBOX_UPDATE_GOLDEN=1 rewrites the expected file instead of comparing (then
// review the diff by hand: golden files must be right, not merely stable). Under CI=true an
// update is refused and fails the test: a rewrite there would make every golden test pass.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "base/fs.h"

namespace evalbox::testing {

// True when EVALBOX_UPDATE_GOLDEN=1 asks for golden files to be rewritten; fails the calling
// test (and is false) when that is asked under CI=true.
inline bool golden_update_requested() {
  const char* update = std::getenv("EVALBOX_UPDATE_GOLDEN");
  if (update == nullptr || std::string(update) != "1") return false;
  const char* ci = std::getenv("CI");
  if (ci != nullptr && std::string(ci) == "true") {
    ADD_FAILURE() << "EVALBOX_UPDATE_GOLDEN=1 under CI=true: golden files are compared in CI, "
                     "never rewritten";
    return false;
  }
  return true;
}

inline void expect_golden(const std::string& actual, const std::filesystem::path& expected) {
  if (golden_update_requested()) {
    ASSERT_TRUE(write_file(expected, actual)) << expected;
    return;
  }
  auto want = read_file(expected);
  ASSERT_TRUE(want) << expected << ": " << want.error().message
                    << " (run with EVALBOX_UPDATE_GOLDEN=1 to create it)";
  EXPECT_EQ(actual, *want) << "differs from " << expected
                           << " (EVALBOX_UPDATE_GOLDEN=1 rewrites it; review the diff)";
}

}  // namespace evalbox::testing
