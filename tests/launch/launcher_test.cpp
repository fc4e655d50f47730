// The launcher over real prepared sessions: the program runs in /workspace as uid 0 of its
// namespace, sees its home, and the record tells the truth.
#include "sandbox/launch/launcher.h"

#include <gtest/gtest.h>

#include "sandbox/base/fs.h"
#include "tests/sandbox/prep_env.h"
#include "tests/support/isolation.h"

namespace evalbox::sandbox {
namespace {

using evalbox::testing::prep_env;

class launcher_test : public ::testing::Test {
 protected:
  void SetUp() override {
    EVALBOX_REQUIRE_FEATURE(evalbox::testing::host().user_namespaces, "user namespaces");
  }
  prep_env env_;
};

TEST_F(launcher_test, runs_in_workspace_and_captures_output) {
  preparer prep(env_.options());
  auto req = env_.request("launch");
  auto session = prep.prepare(req);
  ASSERT_TRUE(session) << session.error().message;
  temp_dir out("evalbox-launch-out");
  launch_options o;
  o.argv = {"/bin/sh", "-c", "pwd; cat README.md; id -u; echo made > new.txt; exit 7"};
  o.stdout_path = out.path() / "stdout";
  auto rec = launch(*session, o);
  ASSERT_TRUE(rec) << rec.error().message;
  EXPECT_EQ(rec->error, "");
  EXPECT_EQ(rec->outcome, outcome_kind::exited);
  EXPECT_EQ(rec->exit_code, 7);
  EXPECT_EQ(read_file(out.path() / "stdout").value_or(""), "/workspace\nhello\n0\n");
  EXPECT_EQ(read_file(session->workspace_dir() / "new.txt").value_or(""), "made\n");
  EXPECT_EQ(rec->binding_digest, session->binding_digest());
}

}  // namespace
}  // namespace evalbox::sandbox
