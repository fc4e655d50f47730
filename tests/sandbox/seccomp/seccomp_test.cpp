// The seccomp policy as data: every entry has a reason, mount/namespace calls are not denied,
// compilation is deterministic (the digest in the run record identifies the policy) and the
// program built into the helper is the policy's.
#include "sandbox/seccomp/seccomp.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string_view>

#include "base/fs.h"

namespace evalbox::sandbox::seccomp {
namespace {

TEST(SeccompPolicy, EveryDeniedCallHasAReason) {
  for (const auto& d : denied_calls()) {
    EXPECT_GT(std::string_view(d.reason).size(), 10u) << d.name;
  }
}

TEST(SeccompPolicy, EveryDeniedPersonalityFlagHasAReasonAndIsDocumented) {
  const auto doc =
      read_file(std::filesystem::path(EVALBOX_SOURCE_DIR) / "docs/sandbox.md").value_or("");
  ASSERT_FALSE(doc.empty());
  ASSERT_EQ(denied_personality_flags().size(), 3u);
  for (const auto& p : denied_personality_flags()) {
    EXPECT_GT(std::string_view(p.reason).size(), 10u) << p.name;
    EXPECT_NE(doc.find(fmt::format("`{}`", p.name)), std::string::npos)
        << "docs/sandbox.md does not name " << p.name;
  }
}

TEST(SeccompPolicy, LeavesNestedSandboxCallsAllowed) {
  for (const auto& d : denied_calls()) {
    for (std::string_view allowed :
         {"mount", "umount2", "unshare", "pivot_root", "setns", "clone", "clone3", "ptrace"}) {
      EXPECT_NE(std::string_view(d.name), allowed);
    }
  }
}

TEST(SeccompPolicy, CompilesToTheSameDigestTwice) {
  auto a = compile();
  auto b = compile();
  ASSERT_TRUE(a) << a.error().message;
  ASSERT_TRUE(b);
  EXPECT_EQ(a->digest, b->digest);
  EXPECT_EQ(a->digest.size(), 64u);
  EXPECT_GT(a->program.size(), denied_calls().size());
}

// The helper installs the program generated at build time: it must be exactly what the policy
// compiles to now (a stale or hand-edited filter would differ in bytes and digest).
TEST(SeccompPolicy, BuiltinProgramIsWhatThePolicyCompilesTo) {
  auto fresh = compile();
  ASSERT_TRUE(fresh) << fresh.error().message;
  const filter& b = builtin();
  EXPECT_EQ(b.digest, fresh->digest);
  ASSERT_EQ(b.program.size(), fresh->program.size());
  for (size_t i = 0; i < b.program.size(); ++i) {
    EXPECT_EQ(b.program[i].code, fresh->program[i].code) << i;
    EXPECT_EQ(b.program[i].jt, fresh->program[i].jt) << i;
    EXPECT_EQ(b.program[i].jf, fresh->program[i].jf) << i;
    EXPECT_EQ(b.program[i].k, fresh->program[i].k) << i;
  }
}

}  // namespace
}  // namespace evalbox::sandbox::seccomp
