// Named mounts and bundles under attack: a read-only mount and a bundle refuse writes; a
// symlink planted in a mount's source leads nowhere on the host; an ephemeral-write mount's
// writes never reach its source and are gone with the run; writing past its cap is refused
// (ENOSPC) and recorded as disk_limit_hit; a mount source in a protected root is refused before
// anything is prepared. Each test runs in a real prepared session and checks no residue after.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>

#include "base/digest.h"
#include "base/fs.h"
#include "sandbox/launch/launcher.h"
#include "tests/support/isolation.h"
#include "tests/support/prep_env.h"

namespace evalbox::sandbox {
namespace {

namespace fs = std::filesystem;
using evalbox::testing::prep_env;

const fs::path tools_dir = fs::path(EVALBOX_BINARY_DIR) / "tests" / "escape";
const std::string hostile = "/evalbox/tools/evalbox-hostile";

class MountsEscape : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto& h = evalbox::testing::host();
    EVALBOX_REQUIRE_FEATURE(h.user_namespaces && h.mount_namespaces && h.pid_namespaces &&
                                h.net_namespaces && h.seccomp_filter,
                            "user, mount, pid, net namespaces and seccomp");
    EVALBOX_REQUIRE_FEATURE(!h.cgroup_v1_controllers.empty() || !h.cgroup_v2_controllers.empty(),
                            "a writable cgroup hierarchy (memory, pids)");
    protected_dir_ = env_.root / "protected";
    ASSERT_TRUE(make_dirs(protected_dir_, 0755));
    ASSERT_TRUE(write_file(protected_dir_ / "secret.txt", "protected secret\n", 0644));
    corpus_ = env_.root / "corpus";
    ASSERT_TRUE(make_dirs(corpus_ / "sub", 0755));
    ASSERT_TRUE(write_file(corpus_ / "a.txt", "corpus a\n", 0644));
    ASSERT_EQ(::symlink((protected_dir_ / "secret.txt").c_str(), (corpus_ / "leak").c_str()), 0);
    scratch_ = env_.root / "scratch-template";
    ASSERT_TRUE(make_dirs(scratch_, 0755));
    ASSERT_TRUE(write_file(scratch_ / "seed.txt", "seed\n", 0644));
    lib_ = env_.root / "reflib";
    ASSERT_TRUE(make_dirs(lib_, 0755));
    ASSERT_TRUE(write_file(lib_ / "lib.txt", "reference\n", 0644));
    prep_.emplace(env_.options());
    auto digest = bundle_digest(lib_);
    ASSERT_TRUE(digest) << digest.error().message;
    auto stored = prep_->resolve_bundle(lib_, *digest);
    ASSERT_TRUE(stored) << stored.error().message;
    stored_lib_ = *stored;
    lib_hex_ = digest->substr(7);
    source_digest_ = fingerprint();
    open_session("mounts");
  }

  void open_session(const std::string& tag) {
    auto req = env_.request(tag);
    req.protected_roots = {protected_dir_};
    req.mounts = {{corpus_, "/data", mount_access::read_only, 0, {}},
                  {scratch_, "/scratch", mount_access::ephemeral_write, 8ull << 20, {}}};
    req.bundles = {{stored_lib_, lib_hex_, "/opt/reflib"}};
    req.limits.wall_ms = 20000;
    req.limits.memory_bytes = 256ull << 20;
    req.limits.pids = 128;
    req.limits.output_bytes = 1 << 20;
    auto s = prep_->prepare(req);
    ASSERT_TRUE(s) << s.error().message;
    session_.emplace(std::move(*s));
    run_dir_ = session_->run_dir();
  }

  void close_session() {
    ASSERT_TRUE(session_->close());
    EXPECT_FALSE(fs::exists(run_dir_)) << run_dir_;
    EXPECT_FALSE(evalbox::testing::mounted_below(run_dir_));
    session_.reset();
  }

  void TearDown() override {
    if (session_) close_session();
    // No launch wrote into a source.
    EXPECT_EQ(fingerprint(), source_digest_);
  }

  std::string fingerprint() const {
    return tree_digest(corpus_).value_or("?") + tree_digest(scratch_).value_or("?") +
           tree_digest(lib_).value_or("?");
  }

  run_record run(std::vector<std::string> argv) {
    launch_options o;
    o.label = "mounts";
    o.argv = std::move(argv);
    o.extra_mounts.push_back({tools_dir, "/evalbox/tools", false, false});
    o.stdout_path = out_.path() / "stdout";
    auto r = launch_in(*session_, o);
    EXPECT_TRUE(r) << r.error().message;
    if (!r) return {};
    EXPECT_EQ(r->error, "") << output();
    return *r;
  }
  std::string output() const { return read_file(out_.path() / "stdout").value_or(""); }

  prep_env env_;
  temp_dir out_{"evalbox-mounts-out"};
  fs::path protected_dir_, corpus_, scratch_, lib_, stored_lib_;
  std::string lib_hex_, source_digest_;
  std::optional<preparer> prep_;
  std::optional<prepared_session> session_;
  fs::path run_dir_;
};

TEST_F(MountsEscape, AReadOnlyMountIsReadButNeverWritten) {
  auto r = run({"/bin/sh", "-c", "cat /data/a.txt"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(output(), "corpus a\n");
  for (const char* path : {"/data/new.txt", "/data/a.txt", "/data/sub/new.txt"}) {
    r = run({hostile, "write", path});
    EXPECT_EQ(r.exit_code, 1) << path << ": " << output();
    EXPECT_TRUE(output().starts_with("refused")) << path << ": " << output();
  }
  r = run({"/bin/sh", "-c", "rm -f /data/a.txt; chmod 777 /data/sub; mv /data/sub /data/x; true"});
  EXPECT_EQ(read_file(corpus_ / "a.txt").value_or(""), "corpus a\n");
  EXPECT_TRUE(fs::is_directory(corpus_ / "sub"));
}

TEST_F(MountsEscape, ABundleIsTheVerifiedTreeReadOnly) {
  auto r = run({"/bin/sh", "-c", "cat /opt/reflib/lib.txt"});
  EXPECT_EQ(output(), "reference\n");
  r = run({hostile, "write", "/opt/reflib/lib.txt"});
  EXPECT_EQ(r.exit_code, 1) << output();
  EXPECT_TRUE(output().starts_with("refused")) << output();
  EXPECT_EQ(tree_digest(stored_lib_).value_or(""), lib_hex_);
}

TEST_F(MountsEscape, ASymlinkInAMountsSourceLeadsNowhereOnTheHost) {
  const std::string path = "/data/leak";
  auto r = run({hostile, "read", path});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(output(), "refused " + path + ": ENOENT\n");
  r = run({hostile, "read", (protected_dir_ / "secret.txt").string()});
  EXPECT_EQ(r.exit_code, 1);
}

TEST_F(MountsEscape, EphemeralWritesStayInTheRunAndNeverReachTheSource) {
  auto r = run({"/bin/sh", "-c",
                "echo mine > /scratch/new.txt && echo changed > /scratch/seed.txt && "
                "mkdir /scratch/d && cat /scratch/seed.txt"});
  EXPECT_EQ(r.exit_code, 0) << output();
  EXPECT_EQ(output(), "changed\n");
  // The next launch of the same run sees them; the source never does.
  r = run({"/bin/sh", "-c", "cat /scratch/new.txt /scratch/seed.txt"});
  EXPECT_EQ(output(), "mine\nchanged\n");
  EXPECT_EQ(read_file(scratch_ / "seed.txt").value_or(""), "seed\n");
  EXPECT_FALSE(fs::exists(scratch_ / "new.txt"));
  // The next run starts from the source again.
  close_session();
  open_session("mounts-next");
  r = run(
      {"/bin/sh", "-c", "cat /scratch/seed.txt; test -e /scratch/new.txt && echo leaked; true"});
  EXPECT_EQ(output(), "seed\n");
}

TEST_F(MountsEscape, WritingPastTheCapIsRefusedAndRecorded) {
  if (::geteuid() != 0) GTEST_SKIP() << "the cap is a tmpfs of its own, made as root";
  auto r = run({"/bin/sh", "-c",
                "i=0; while [ $i -lt 32 ]; do head -c 1048576 /dev/zero > /scratch/fill$i "
                "2>/dev/null || { echo full at $i; break; }; i=$((i+1)); done"});
  EXPECT_EQ(r.outcome, outcome_kind::exited);
  EXPECT_TRUE(r.disk_limit_hit);
  int at = -1;
  ASSERT_EQ(std::sscanf(output().c_str(), "full at %d", &at), 1) << output();
  EXPECT_LE(at, 8) << "the cap is 8 MiB";
  // The run's own disk (64 MiB) was not what filled up: the workspace still takes a file.
  r = run({"/bin/sh", "-c", "head -c 1048576 /dev/zero > /workspace/one && echo ok"});
  EXPECT_EQ(output(), "ok\n");
}

TEST_F(MountsEscape, AMountSourceInAProtectedRootIsRefusedBeforeAnythingIsPrepared) {
  const std::string before = env_.state_fingerprint();
  for (const fs::path& source : {protected_dir_, env_.root, env_.state}) {
    auto req = env_.request("refused");
    req.protected_roots = {protected_dir_};
    req.mounts = {{source, "/data", mount_access::read_only, 0, {}}};
    auto s = prep_->prepare(req);
    ASSERT_FALSE(s) << source;
    EXPECT_EQ(s.error().kind, error_kind::permission) << s.error().message;
  }
  EXPECT_EQ(env_.state_fingerprint(), before);
}

}  // namespace
}  // namespace evalbox::sandbox
