// The one list of system paths: each entry and what lies below it counts, lexically and by
// whole components; nothing else does.
#include "sandbox/spec/system_paths.h"

#include <gtest/gtest.h>

#include <string>

namespace evalbox::sandbox {
namespace {

TEST(SystemPaths, EveryEntryAndWhatLiesBelowItCounts) {
  for (std::string_view p : system_paths) {
    EXPECT_TRUE(below_system_path(std::string(p))) << p;
    EXPECT_TRUE(below_system_path(std::string(p) + "/x/y")) << p;
  }
  EXPECT_TRUE(below_system_path("/lib32/ld-linux.so.2"));
  EXPECT_TRUE(below_system_path("/libx32"));
}

TEST(SystemPaths, OtherPathsDoNot) {
  EXPECT_FALSE(below_system_path("/"));
  EXPECT_FALSE(below_system_path("/usrlocal"));
  EXPECT_FALSE(below_system_path("/lib3"));
  EXPECT_FALSE(below_system_path("/opt/agent/bin"));
  EXPECT_FALSE(below_system_path("/usr/../opt"));
  EXPECT_FALSE(below_system_path("/etc/ssl"));
}

}  // namespace
}  // namespace evalbox::sandbox
