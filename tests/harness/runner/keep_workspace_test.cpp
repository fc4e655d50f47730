// Which runs keep their final workspace, and the bounded copy (harness/runner/keep_workspace.h).
#include "harness/runner/keep_workspace.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "base/fs.h"

namespace evalbox::harness {
namespace {
namespace fs = std::filesystem;

TEST(KeepPolicy, ParsesTheThreeWordsAndNothingElse) {
  EXPECT_EQ(parse_keep_policy("none").value(), keep_policy::none);
  EXPECT_EQ(parse_keep_policy("failed").value(), keep_policy::failed);
  EXPECT_EQ(parse_keep_policy("all").value(), keep_policy::all);
  for (const char* bad : {"", "Failed", "some", "failed,all"}) {
    auto p = parse_keep_policy(bad);
    ASSERT_FALSE(p) << bad;
    EXPECT_EQ(p.error().kind, error_kind::invalid_argument);
    EXPECT_NE(p.error().message.find("failed, all or none"), std::string::npos);
  }
  EXPECT_EQ(to_string(keep_policy::failed), "failed");
}

TEST(KeepPolicy, FailedKeepsEveryRunThatDidNotPass) {
  attempt_state passed;
  passed.verdict = run_verdict::passed;
  attempt_state failed;
  failed.verdict = run_verdict::failed;
  attempt_state error;
  error.fail(run_error_kind::setup, "setup failed");
  attempt_state ungraded;  // not_assessed
  attempt_state cancelled;
  cancelled.cancelled = true;
  EXPECT_FALSE(should_keep(keep_policy::failed, passed));
  EXPECT_TRUE(should_keep(keep_policy::failed, failed));
  EXPECT_TRUE(should_keep(keep_policy::failed, error));
  EXPECT_TRUE(should_keep(keep_policy::failed, ungraded));
  EXPECT_FALSE(should_keep(keep_policy::failed, cancelled));
  EXPECT_TRUE(should_keep(keep_policy::all, passed));
  EXPECT_FALSE(should_keep(keep_policy::all, cancelled));
  EXPECT_FALSE(should_keep(keep_policy::none, failed));
}

class KeepTree : public ::testing::Test {
 protected:
  temp_dir tmp_{"keep-tree-test"};
  fs::path from() const { return tmp_.path() / "from"; }
  fs::path to() const { return tmp_.path() / "to"; }
  void SetUp() override {
    ASSERT_TRUE(make_dirs(from() / "src"));
    ASSERT_TRUE(write_file(from() / "src" / "a.py", "print(1)\n"));
    ASSERT_TRUE(write_file(from() / "out.txt", std::string(1000, 'x')));
    ASSERT_TRUE(write_file(tmp_.path() / "outside", "host file"));
    // Agent-written links: one pointing out of the workspace, one at a directory outside.
    fs::create_symlink(tmp_.path() / "outside", from() / "escape");
    fs::create_symlink(tmp_.path(), from() / "escape-dir");
    ASSERT_EQ(::mkfifo((from() / "fifo").c_str(), 0600), 0);
  }
};

TEST_F(KeepTree, CopiesFilesAndKeepsLinksAsLinksNeverFollowed) {
  auto k = keep_tree(from(), to(), 1u << 20);
  ASSERT_TRUE(k) << k.error().message;
  EXPECT_TRUE(k->kept);
  EXPECT_TRUE(k->skipped.empty());
  EXPECT_EQ(k->bytes, 1009u);
  EXPECT_EQ(read_file(to() / "src" / "a.py").value(), "print(1)\n");
  EXPECT_EQ(fs::file_size(to() / "out.txt"), 1000u);
  ASSERT_TRUE(fs::is_symlink(to() / "escape"));
  EXPECT_EQ(fs::read_symlink(to() / "escape"), tmp_.path() / "outside");
  ASSERT_TRUE(fs::is_symlink(to() / "escape-dir"));
  EXPECT_EQ(k->entries, 6u);  // src, src/a.py, out.txt, both links, the FIFO: nothing behind a link
  EXPECT_FALSE(fs::exists(fs::symlink_status(to() / "fifo")));  // not a file: left out
  // The source is only read.
  EXPECT_EQ(read_file(from() / "src" / "a.py").value(), "print(1)\n");
}

// An agent may leave a setuid or setgid program in its workspace; kept by evalbox (root in
// CI), it must not become a setuid program of evalbox's user on the host.
TEST_F(KeepTree, KeptFilesLoseSetuidAndSetgidAndBelongToEvalboxsUser) {
  ASSERT_TRUE(write_file(from() / "suid", "#!/bin/sh\n"));
  ASSERT_EQ(::chmod((from() / "suid").c_str(), 06755), 0);
  if (::geteuid() == 0) {
    ASSERT_EQ(::chown((from() / "suid").c_str(), 60000, 60000), 0);
    ASSERT_EQ(::chmod((from() / "suid").c_str(), 06755), 0);  // chown cleared the bits
  }
  auto k = keep_tree(from(), to(), 1u << 20);
  ASSERT_TRUE(k) << k.error().message;
  struct stat st {};
  ASSERT_EQ(::stat((to() / "suid").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07000, 0u);
  EXPECT_EQ(st.st_mode & 0777, 0755u);
  EXPECT_EQ(st.st_uid, ::getuid());
  EXPECT_EQ(st.st_gid, ::getgid());
}

TEST_F(KeepTree, AboveTheBoundNothingIsKeptAndTheReasonSaysHowMuch) {
  auto k = keep_tree(from(), to(), 1008);
  ASSERT_TRUE(k) << k.error().message;
  EXPECT_FALSE(k->kept);
  EXPECT_GT(k->bytes, 1008u);
  EXPECT_NE(k->skipped.find("more than 1008B"), std::string::npos) << k->skipped;
  EXPECT_FALSE(fs::exists(to()));  // no partial tree
}

TEST_F(KeepTree, CountsTheKeptWorkspacesOfAResultsDirectory) {
  const fs::path results = tmp_.path() / "results";
  ASSERT_TRUE(keep_tree(from(), results / "runs" / "r1" / kept_workspace_dir, 1u << 20));
  ASSERT_TRUE(make_dirs(results / "runs" / "r2"));  // a run that kept nothing
  const auto t = count_kept(results);
  EXPECT_EQ(t.runs, 1);
  EXPECT_EQ(t.bytes, 1009u);
  EXPECT_EQ(count_kept(tmp_.path() / "nothing-here").runs, 0);
}

// `evalbox runs shell` finds a run's kept workspace, or says why there is none.
TEST(FindKeptRun, ReadsTheRecordAndRefusesWhatHasNoKeptWorkspace) {
  temp_dir results;
  const fs::path run = results.path() / "runs" / "r1";
  ASSERT_TRUE(make_dirs(run / "workspace"));
  ASSERT_TRUE(write_file(run / "run.json",
                         R"({"fixture": {"digest": "d1"},
                            "kept_workspace": {"path": "workspace", "fixture_dir": "/fx/a"}})"));
  auto kept = find_kept_run(results.path(), "r1");
  ASSERT_TRUE(kept) << kept.error().message;
  EXPECT_EQ(kept->workspace, run / "workspace");
  EXPECT_EQ(kept->fixture_dir, "/fx/a");
  EXPECT_EQ(kept->fixture_digest, "d1");

  for (const char* id : {"", "..", "r1/../r1", "nosuch"}) {
    auto no = find_kept_run(results.path(), id);
    ASSERT_FALSE(no) << id;
    EXPECT_EQ(no.error().kind, error_kind::invalid_argument) << id;
  }
  ASSERT_TRUE(make_dirs(results.path() / "runs" / "r2"));
  ASSERT_TRUE(write_file(results.path() / "runs" / "r2" / "run.json",
                         R"({"kept_workspace": {"skipped": "2 GiB, above the 1 GiB bound"}})"));
  auto skipped = find_kept_run(results.path(), "r2");
  ASSERT_FALSE(skipped);
  EXPECT_NE(skipped.error().message.find("kept no workspace (2 GiB, above the 1 GiB bound)"),
            std::string::npos)
      << skipped.error().message;
  ASSERT_TRUE(fs::remove_all(run / "workspace"));
  auto gone = find_kept_run(results.path(), "r1");
  ASSERT_FALSE(gone);
  EXPECT_NE(gone.error().message.find("is gone"), std::string::npos) << gone.error().message;
}

}  // namespace
}  // namespace evalbox::harness
