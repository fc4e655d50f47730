// The launcher over real prepared sessions: the program runs in /workspace as uid 0 of its
// namespace, sees its home, and the record tells the truth.
#include "sandbox/launch/launcher.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

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

TEST(helper_path, prefers_the_environment_then_the_build_tree) {
  ::setenv("EVALBOX_HELPER", "/opt/evalbox/evalbox-sandbox", 1);
  EXPECT_EQ(helper_path(), "/opt/evalbox/evalbox-sandbox");
  ::unsetenv("EVALBOX_HELPER");
  // The test binary has no helper beside it: the compiled-in build path.
  EXPECT_EQ(helper_path(),
            std::filesystem::path(EVALBOX_BINARY_DIR) / "sandbox/helper/evalbox-sandbox");
}

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

TEST_F(launcher_test, feeds_stdin_data_and_keeps_stderr_apart) {
  preparer prep(env_.options());
  auto session = prep.prepare(env_.request("stdin"));
  ASSERT_TRUE(session) << session.error().message;
  temp_dir out("evalbox-launch-out");
  launch_options o;
  o.argv = {"/bin/sh", "-c", "tr a-z A-Z; echo oops >&2"};
  o.stdin_data = "shout\n";
  o.stdout_path = out.path() / "stdout";
  o.stderr_path = out.path() / "stderr";
  auto rec = launch(*session, o);
  ASSERT_TRUE(rec) << rec.error().message;
  EXPECT_EQ(read_file(out.path() / "stdout").value_or(""), "SHOUT\n");
  EXPECT_EQ(read_file(out.path() / "stderr").value_or(""), "oops\n");
}

TEST_F(launcher_test, without_secrets_the_lease_is_not_mounted) {
  preparer prep(env_.options());
  auto req = env_.request("nosecret");
  req.secrets = {{"codex", env_.creds / "auth.json", ".codex/auth.json"}};
  auto session = prep.prepare(req);
  ASSERT_TRUE(session) << session.error().message;
  temp_dir out("evalbox-launch-out");
  launch_options o;
  o.argv = {"/bin/sh", "-c", "cat /home/agent/.codex/auth.json | wc -c"};
  o.stdout_path = out.path() / "stdout";
  auto with = launch(*session, o);
  ASSERT_TRUE(with);
  EXPECT_NE(read_file(out.path() / "stdout").value_or(""), "0\n");
  o.with_secrets = false;
  auto without = launch(*session, o);
  ASSERT_TRUE(without);
  EXPECT_EQ(without->error, "");
  EXPECT_EQ(read_file(out.path() / "stdout").value_or(""), "0\n");
}

TEST_F(launcher_test, a_cancel_token_stops_the_run_as_cancelled) {
  preparer prep(env_.options());
  auto session = prep.prepare(env_.request("cancel"));
  ASSERT_TRUE(session) << session.error().message;
  launch_options o;
  o.argv = {"/bin/sleep", "30"};
  cancel_token cancel;
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    cancel.requested = true;
  });
  const auto t0 = std::chrono::steady_clock::now();
  auto rec = launch(*session, o, &cancel);
  stopper.join();
  ASSERT_TRUE(rec) << rec.error().message;
  EXPECT_EQ(rec->outcome, outcome_kind::cancelled);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

TEST_F(launcher_test, launches_from_many_threads_at_once) {
  preparer prep(env_.options());
  std::vector<prepared_session> sessions;
  for (int i = 0; i < 4; ++i) {
    auto s = prep.prepare(env_.request("par" + std::to_string(i)));
    ASSERT_TRUE(s) << s.error().message;
    sessions.push_back(std::move(*s));
  }
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      launch_options o;
      o.argv = {"/bin/sh", "-c", "exit " + std::to_string(i)};
      auto r = launch(sessions[static_cast<size_t>(i)], o);
      if (r && r->ok() && r->exit_code == i) ++ok;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok, 4);
}

}  // namespace
}  // namespace evalbox::sandbox
