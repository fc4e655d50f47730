// Test support: skipping when the host lacks an isolation feature, except under
// EVALBOX_REQUIRE_ISOLATION=1 (CI), where a skip would hide a broken sandbox and fails.
#pragma once

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "sandbox/sys/probe.h"

namespace evalbox::testing {

bool isolation_required();
// Probed once per test process (in a scratch state directory).
const sys::host_features& host();
// Whether this process's mount table holds a mount at or below `dir` (what a sandbox that
// ended must not leave).
bool mounted_below(const std::filesystem::path& dir);

}  // namespace evalbox::testing

// Skips the test with `why` when `cond` is false, or fails it when isolation is required.
#define EVALBOX_REQUIRE_FEATURE(cond, why)                                     \
  do {                                                                         \
    if (!(cond)) {                                                             \
      if (::evalbox::testing::isolation_required()) {                          \
        FAIL() << "EVALBOX_REQUIRE_ISOLATION=1 but the host lacks: " << (why); \
      } else {                                                                 \
        GTEST_SKIP() << (why);                                                 \
      }                                                                        \
    }                                                                          \
  } while (0)
