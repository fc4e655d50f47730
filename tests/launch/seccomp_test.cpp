// The seccomp policy as data: every entry has a reason, mount/namespace calls are not denied,
// and compilation is deterministic (the digest in the run record identifies the policy).
#include "sandbox/seccomp/seccomp.h"

#include <gtest/gtest.h>

#include <string_view>

namespace evalbox::sandbox::seccomp {
namespace {

TEST(seccomp_policy, every_denied_call_has_a_reason) {
  for (const auto& d : denied_calls()) {
    EXPECT_GT(std::string_view(d.reason).size(), 10u) << d.name;
  }
}

TEST(seccomp_policy, leaves_nested_sandbox_calls_allowed) {
  for (const auto& d : denied_calls()) {
    for (std::string_view allowed :
         {"mount", "umount2", "unshare", "pivot_root", "setns", "clone", "clone3", "ptrace"}) {
      EXPECT_NE(std::string_view(d.name), allowed);
    }
  }
}

TEST(seccomp_policy, compiles_to_the_same_digest_twice) {
  auto a = compile();
  auto b = compile();
  ASSERT_TRUE(a) << a.error().message;
  ASSERT_TRUE(b);
  EXPECT_EQ(a->digest, b->digest);
  EXPECT_EQ(a->digest.size(), 64u);
  EXPECT_GT(a->program.size(), denied_calls().size());
}

}  // namespace
}  // namespace evalbox::sandbox::seccomp
