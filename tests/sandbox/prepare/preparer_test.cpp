// Preparation end to end on this host: each workspace strategy (content, modes, symlinks,
// ownership, quota), the managed home, mounts for the launcher, digests, snapshots and a
// teardown that leaves nothing behind. These mount, so they need root (the CI machines are).
#include "sandbox/prepare/preparer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <thread>

#include <gtest/gtest.h>

#include <sstream>

#include "base/digest.h"
#include "base/fs.h"
#include "base/json.h"
#include "sandbox/mount/mount.h"
#include "sandbox/sys/probe.h"
#include "sandbox/workspace/tree.h"
#include "tests/support/isolation.h"
#include "tests/support/prep_env.h"

namespace evalbox::sandbox {
namespace {

using testing::prep_env;
namespace fs = std::filesystem;

#define REQUIRE_ROOT_MOUNTS()                                                   \
  EVALBOX_REQUIRE_FEATURE(::geteuid() == 0 && testing::host().mount_namespaces, \
                          "preparation with a quota-enforcing tmpfs needs root")

bool no_mounts_under(const fs::path& dir) {
  auto m = mount::mounts_under(dir);
  return m && m->empty();
}

uid_t owner_of(const fs::path& p) {
  struct stat st {};
  ::lstat(p.c_str(), &st);
  return st.st_uid;
}

mode_t mode_of(const fs::path& p) {
  struct stat st {};
  ::lstat(p.c_str(), &st);
  return st.st_mode & 07777;
}

// Writes `bytes` zeros to `path`; returns the errno that stopped it, 0 when all were written.
int fill(const fs::path& path, size_t bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  std::string chunk(1 << 20, '\0');
  int err = 0;
  for (size_t done = 0; done < bytes;) {
    ssize_t n = ::write(fd, chunk.data(), std::min(chunk.size(), bytes - done));
    if (n < 0) {
      err = errno;
      break;
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return err;
}

class Prepare : public ::testing::TestWithParam<workspace_strategy> {
 protected:
  prep_env env;
};

TEST_P(Prepare, MaterializesContentModesAndSymlinks) {
  REQUIRE_ROOT_MOUNTS();
  preparer p(env.options());
  auto r = env.request();
  r.workspace.strategy = GetParam();
  auto s = p.prepare(r);
  ASSERT_TRUE(s) << s.error().message;
  const auto& ws = s->workspace_dir();
  EXPECT_EQ(*read_file(ws / "README.md"), "hello\n");
  EXPECT_EQ(mode_of(ws / "src" / "run.sh"), 0755u);
  EXPECT_EQ(mode_of(ws / "src" / "secret.txt"), 0600u);
  EXPECT_TRUE(fs::is_symlink(ws / "outside-link"));
  EXPECT_EQ(fs::read_symlink(ws / "outside-link"), "/etc/passwd");
  EXPECT_TRUE(fs::is_directory(ws / ".git"));
  // The sandbox's uid 0 is the sandbox id on the host: it must own what it may write.
  EXPECT_EQ(owner_of(ws / "README.md"), s->sandbox_uid());
  EXPECT_EQ(owner_of(ws), s->sandbox_uid());
}

TEST_P(Prepare, EnforcesDiskQuotaWithEnospc) {
  REQUIRE_ROOT_MOUNTS();
  preparer p(env.options());
  auto r = env.request();
  r.workspace.strategy = GetParam();
  r.limits.disk_bytes = 8ull << 20;
  auto s = p.prepare(r);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_TRUE(s->disk_quota_enforced());
  EXPECT_EQ(fill(s->workspace_dir() / "big", 16ull << 20), ENOSPC);
  EXPECT_EQ(fill(s->home_dir() / "big", 16ull << 20), ENOSPC);
}

TEST_P(Prepare, NeverModifiesTheSource) {
  REQUIRE_ROOT_MOUNTS();
  auto before = tree_digest(env.source);
  ASSERT_TRUE(before);
  {
    preparer p(env.options());
    auto r = env.request();
    r.workspace.strategy = GetParam();
    auto s = p.prepare(r);
    ASSERT_TRUE(s) << s.error().message;
    ASSERT_TRUE(write_file(s->workspace_dir() / "README.md", "changed\n"));
    ASSERT_TRUE(write_file(s->workspace_dir() / "new.txt", "new\n"));
    fs::remove(s->workspace_dir() / "src" / "run.sh");
  }
  EXPECT_EQ(tree_digest(env.source).value(), *before);
}

TEST_P(Prepare, CloseLeavesNoMountNoFile) {
  REQUIRE_ROOT_MOUNTS();
  preparer p(env.options());
  auto r = env.request();
  r.workspace.strategy = GetParam();
  auto s = p.prepare(r);
  ASSERT_TRUE(s) << s.error().message;
  fs::path run = s->run_dir();
  ASSERT_TRUE(s->snapshot_workspace());
  EXPECT_FALSE(no_mounts_under(run));
  ASSERT_TRUE(s->close());
  EXPECT_TRUE(no_mounts_under(run));
  EXPECT_FALSE(fs::exists(run));
  EXPECT_TRUE(s->close()) << "close() must be idempotent";
}

TEST_P(Prepare, DestructorTearsDown) {
  REQUIRE_ROOT_MOUNTS();
  preparer p(env.options());
  auto r = env.request();
  r.workspace.strategy = GetParam();
  fs::path run;
  {
    auto s = p.prepare(r);
    ASSERT_TRUE(s) << s.error().message;
    run = s->run_dir();
    ASSERT_TRUE(fs::exists(run));
  }
  EXPECT_TRUE(no_mounts_under(run));
  EXPECT_FALSE(fs::exists(run));
}

TEST_P(Prepare, SnapshotIsFrozenAndChangedPathsListsTheDifference) {
  REQUIRE_ROOT_MOUNTS();
  preparer p(env.options());
  auto r = env.request();
  r.workspace.strategy = GetParam();
  auto s = p.prepare(r);
  ASSERT_TRUE(s) << s.error().message;
  const auto& ws = s->workspace_dir();
  ASSERT_TRUE(write_file(ws / "setup.txt", "from setup\n"));
  auto snap = s->snapshot_workspace();
  ASSERT_TRUE(snap) << snap.error().message;
  ASSERT_TRUE(write_file(ws / "README.md", "edited\n"));
  ASSERT_TRUE(write_file(ws / "src" / "added.txt", "added\n"));
  ASSERT_TRUE(fs::remove(ws / "src" / "secret.txt"));
  ASSERT_TRUE(fs::remove(ws / "setup.txt"));
  // Rewriting a file with its own content is no change.
  ASSERT_TRUE(write_file(ws / "src" / "run.sh", "#!/bin/sh\necho hi\n", 0755));

  EXPECT_EQ(*read_file(snap->view / "README.md"), "hello\n");
  EXPECT_EQ(*read_file(snap->view / "setup.txt"), "from setup\n");
  EXPECT_FALSE(write_file(snap->view / "x", "y")) << "a snapshot view is read-only";

  auto changed = s->changed_paths(*snap);
  ASSERT_TRUE(changed) << changed.error().message;
  std::vector<std::string> want = {"README.md", "setup.txt", "src/added.txt", "src/secret.txt"};
  EXPECT_EQ(*changed, want);

  // A second snapshot sees only what came after it.
  auto snap2 = s->snapshot_workspace();
  ASSERT_TRUE(snap2) << snap2.error().message;
  EXPECT_EQ(snap2->index, 1);
  ASSERT_TRUE(write_file(ws / "late.txt", "late\n"));
  EXPECT_EQ(s->changed_paths(*snap2).value(), std::vector<std::string>{"late.txt"});
  EXPECT_EQ(*read_file(ws / "README.md"), "edited\n");
}

// The mount id of the mount at `path` (its line in /proc/self/mountinfo), -1 if none.
long mount_id_at(const fs::path& path) {
  std::istringstream in(read_file("/proc/self/mountinfo").value_or(""));
  long found = -1;
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    long id = 0, parent = 0;
    std::string dev, root, point;
    if (f >> id >> parent >> dev >> root >> point && point == path.string()) found = id;
  }
  return found;
}

// The first snapshot of a workspace nothing was written into since it was made (the usual run:
// no setup) needs no freezing: the workspace stays mounted as it is, and the snapshot shows
// the source and still tells every change made after it.
class PrepareOverlay : public ::testing::Test {
 protected:
  prep_env env;
};

TEST_F(PrepareOverlay, ASnapshotOfAnUntouchedWorkspaceLeavesItMountedAndSeesEveryChange) {
  REQUIRE_ROOT_MOUNTS();
  preparer p(env.options());
  auto r = env.request();
  r.workspace.strategy = workspace_strategy::overlay;
  auto s = p.prepare(r);
  ASSERT_TRUE(s) << s.error().message;
  const auto& ws = s->workspace_dir();
  const long before = mount_id_at(ws);
  ASSERT_NE(before, -1);
  auto snap = s->snapshot_workspace();
  ASSERT_TRUE(snap) << snap.error().message;
  EXPECT_EQ(mount_id_at(ws), before) << "the workspace was remounted";
  EXPECT_EQ(*read_file(snap->view / "README.md"), "hello\n");
  EXPECT_FALSE(write_file(snap->view / "x", "y")) << "a snapshot view is read-only";
  ASSERT_TRUE(write_file(ws / "README.md", "edited\n"));
  ASSERT_TRUE(write_file(ws / "src" / "added.txt", "added\n"));
  ASSERT_TRUE(fs::remove(ws / "src" / "secret.txt"));
  EXPECT_EQ(*read_file(snap->view / "README.md"), "hello\n");
  std::vector<std::string> want = {"README.md", "src/added.txt", "src/secret.txt"};
  EXPECT_EQ(s->changed_paths(*snap).value(), want);
  // The next snapshot freezes what was written, and sees only what comes after it.
  auto snap2 = s->snapshot_workspace();
  ASSERT_TRUE(snap2) << snap2.error().message;
  EXPECT_NE(mount_id_at(ws), before);
  EXPECT_EQ(*read_file(snap2->view / "README.md"), "edited\n");
  ASSERT_TRUE(write_file(ws / "late.txt", "late\n"));
  EXPECT_EQ(s->changed_paths(*snap2).value(), std::vector<std::string>{"late.txt"});
  EXPECT_EQ(s->changed_paths(*snap).value(),
            (std::vector<std::string>{"README.md", "late.txt", "src/added.txt", "src/secret.txt"}));
  ASSERT_TRUE(s->close());
  EXPECT_TRUE(no_mounts_under(s->run_dir()));
}

// A setup that changed only the workspace's root (no entry: its mode) did write into it: the
// snapshot freezes it and shows the root as the setup left it.
TEST_F(PrepareOverlay, ASetupThatOnlyChangedTheRootIsFrozenIntoTheSnapshot) {
  REQUIRE_ROOT_MOUNTS();
  preparer p(env.options());
  auto r = env.request();
  r.workspace.strategy = workspace_strategy::overlay;
  auto s = p.prepare(r);
  ASSERT_TRUE(s) << s.error().message;
  const auto& ws = s->workspace_dir();
  struct stat st {};
  ASSERT_EQ(::stat(ws.c_str(), &st), 0);
  const mode_t changed = (st.st_mode & 07777) == 0700 ? 0750 : 0700;
  ASSERT_EQ(::chmod(ws.c_str(), changed), 0);
  auto snap = s->snapshot_workspace();
  ASSERT_TRUE(snap) << snap.error().message;
  ASSERT_EQ(::stat(snap->view.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, changed);
}

TEST_P(Prepare, OpaqueDirectoryCountsHiddenFilesAsDeleted) {
  REQUIRE_ROOT_MOUNTS();
  preparer p(env.options());
  auto r = env.request();
  r.workspace.strategy = GetParam();
  auto s = p.prepare(r);
  ASSERT_TRUE(s) << s.error().message;
  auto snap = s->snapshot_workspace();
  ASSERT_TRUE(snap);
  const auto& ws = s->workspace_dir();
  ASSERT_TRUE(remove_tree(ws / "src"));
  ASSERT_TRUE(make_dirs(ws / "src", 0755));  // recreated: opaque in an overlay
  ASSERT_TRUE(write_file(ws / "src" / "only.txt", "x"));
  std::vector<std::string> want = {"src/only.txt", "src/run.sh", "src/secret.txt"};
  EXPECT_EQ(s->changed_paths(*snap).value(), want);
}

INSTANTIATE_TEST_SUITE_P(Strategies, Prepare,
                         ::testing::Values(workspace_strategy::overlay, workspace_strategy::copy),
                         [](const auto& p) {
                           return p.param == workspace_strategy::overlay ? "overlay" : "copy";
                         });

TEST(PrepareAuto, PicksOverlayOnThisHost) {
  REQUIRE_ROOT_MOUNTS();
  EVALBOX_REQUIRE_FEATURE(testing::host().overlayfs && testing::host().idmapped_mounts,
                          "overlayfs with idmapped mounts");
  prep_env env;
  preparer p(env.options());
  auto s = p.prepare(env.request());
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->strategy(), workspace_strategy::overlay);
  EXPECT_EQ(s->filesystem_identity()["workspace"]["strategy"], "overlay");
  EXPECT_EQ(s->filesystem_identity()["workspace"]["enforced"], true);
  EXPECT_EQ(s->filesystem_identity()["workspace"]["quota_bytes"], 64ull << 20);
}

// auto falls back to a copy when the workspace's filesystem refuses an idmapped mount — here
// a workspace that is itself an overlayfs mount (this kernel cannot idmap overlayfs) — and
// the run sees the same files; nothing of the attempt is left.
TEST(PrepareAuto, CopiesWhenTheWorkspaceCannotBeIdmapped) {
  REQUIRE_ROOT_MOUNTS();
  prep_env env;
  const fs::path ovl = env.root / "ovl";
  for (const char* d : {"upper", "work", "merged"}) ASSERT_TRUE(make_dirs(ovl / d, 0755));
  ASSERT_TRUE(mount::mount_overlay(ovl / "merged", {env.source}, ovl / "upper", ovl / "work"));
  preparer p(env.options());
  auto r = env.request();
  r.workspace.source = ovl / "merged";
  auto s = p.prepare(r);
  ASSERT_TRUE(s) << s.error().message;
  if (s->strategy() == workspace_strategy::overlay)
    GTEST_SKIP() << "this kernel idmaps overlayfs: nothing to fall back from";
  EXPECT_EQ(s->strategy(), workspace_strategy::copy);
  EXPECT_EQ(s->filesystem_identity()["workspace"]["strategy"], "copy");
  EXPECT_EQ(read_file(s->workspace_dir() / "README.md").value_or(""), "hello\n");
  EXPECT_EQ(owner_of(s->workspace_dir() / "README.md"), p.options().sandbox_uid);
  const fs::path run = s->run_dir();
  ASSERT_TRUE(s->close());
  EXPECT_TRUE(no_mounts_under(run));
  EXPECT_FALSE(fs::exists(run));
  ASSERT_TRUE(mount::unmount(ovl / "merged"));
}

TEST(PrepareReflink, ExplicitReflinkWorksOrSaysTheFilesystemCannot) {
  REQUIRE_ROOT_MOUNTS();
  prep_env env;
  ASSERT_TRUE(make_dirs(env.state / "runs", 0700));
  bool supported = sys::reflink_supported(env.state / "runs");
  preparer p(env.options());
  auto r = env.request();
  r.workspace.strategy = workspace_strategy::reflink;
  auto s = p.prepare(r);
  if (supported) {
    ASSERT_TRUE(s) << s.error().message;
    EXPECT_EQ(*read_file(s->workspace_dir() / "README.md"), "hello\n");
    EXPECT_FALSE(s->disk_quota_enforced());
  } else {
    ASSERT_FALSE(s);
    EXPECT_EQ(s.error().kind, error_kind::unsupported);
    EXPECT_NE(s.error().message.find("FICLONE"), std::string::npos) << s.error().message;
    auto runs = fs::directory_iterator(env.state / "runs");
    EXPECT_EQ(runs, fs::directory_iterator()) << "nothing may be left after the refusal";
  }
}

TEST(PrepareHome, LaysOutHomeWithPlaceholdersForLeases) {
  REQUIRE_ROOT_MOUNTS();
  prep_env env;
  preparer p(env.options());
  auto r = env.request();
  r.home.files.push_back({"bin/tool.sh", "#!/bin/sh\n", 0755});
  r.secrets = {{"codex", env.creds / "auth.json", ".codex/auth.json"}};
  auto s = p.prepare(r);
  ASSERT_TRUE(s) << s.error().message;
  const auto& home = s->home_dir();
  EXPECT_EQ(mode_of(home), 0700u);
  EXPECT_EQ(mode_of(home / ".config"), 0700u);
  EXPECT_EQ(mode_of(home / ".config" / "agent"), 0700u);
  EXPECT_EQ(*read_file(home / ".config/agent/settings.json"), "{}\n");
  EXPECT_EQ(mode_of(home / ".config/agent/settings.json"), 0644u);
  EXPECT_EQ(mode_of(home / "bin/tool.sh"), 0755u);
  EXPECT_EQ(owner_of(home / "bin/tool.sh"), s->sandbox_uid());
  // The placeholder the lease is bound over: empty, 0600, the sandbox's.
  EXPECT_EQ(*read_file(home / ".codex/auth.json"), "");
  EXPECT_EQ(mode_of(home / ".codex/auth.json"), 0600u);
  EXPECT_EQ(owner_of(home / ".codex/auth.json"), s->sandbox_uid());

  auto it = std::find_if(s->mounts().begin(), s->mounts().end(), [](const bind_mount& m) {
    return m.target == "/home/agent/.codex/auth.json";
  });
  ASSERT_NE(it, s->mounts().end());
  EXPECT_TRUE(it->writable);
  EXPECT_TRUE(it->is_file);
  EXPECT_TRUE(is_within(it->source, env.state / "credential-leases"));
}

TEST(PrepareHome, AHostOnlyLeaseIsHeldButNeverInsideTheSandbox) {
  REQUIRE_ROOT_MOUNTS();
  prep_env env;
  preparer p(env.options());
  auto r = env.request();
  r.secrets = {{"login", env.creds / "auth.json", {}}};
  r.secrets[0].host_only = true;
  auto s = p.prepare(r);
  ASSERT_TRUE(s) << s.error().message;
  // Held (a second run cannot lease it), readable on the host, with no mount and no placeholder.
  auto lease = s->lease_path("login");
  ASSERT_TRUE(lease);
  EXPECT_TRUE(is_within(*lease, env.state / "credential-leases"));
  EXPECT_EQ(*read_file(*lease), *read_file(env.creds / "auth.json"));
  for (const auto& m : s->mounts()) EXPECT_NE(m.source, *lease) << m.target;
  EXPECT_FALSE(s->lease_path("other"));
  auto r2 = env.request("second");
  r2.secrets = r.secrets;
  auto busy = p.prepare(r2);
  ASSERT_FALSE(busy);
  EXPECT_EQ(busy.error().kind, error_kind::busy) << busy.error().message;
  // A host-only secret names no target inside.
  auto r3 = env.request("third");
  r3.secrets = {{"login", env.creds / "auth.json", ".codex/auth.json"}};
  r3.secrets[0].host_only = true;
  auto bad = p.prepare(r3);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind, error_kind::invalid_argument) << bad.error().message;
}

TEST(PrepareMounts, BundlesAndArgv0DirectoryAreReadOnlyBinds) {
  REQUIRE_ROOT_MOUNTS();
  prep_env env;
  ASSERT_TRUE(make_dirs(env.root / "agent" / "bin", 0755));
  ASSERT_TRUE(write_file(env.root / "agent" / "bin" / "agent", "#!/bin/sh\n", 0755));
  ASSERT_TRUE(make_dirs(env.root / "bundle", 0755));
  ASSERT_TRUE(write_file(env.root / "bundle" / "x", "x"));
  preparer p(env.options());
  auto r = env.request();
  r.argv = {(env.root / "agent" / "bin" / "agent").string()};
  r.bundles = {{env.root / "bundle", *tree_digest(env.root / "bundle"), "/evalbox/bundle"}};
  auto s = p.prepare(r);
  ASSERT_TRUE(s) << s.error().message;
  auto find = [&](const fs::path& target) {
    return std::find_if(s->mounts().begin(), s->mounts().end(),
                        [&](const bind_mount& m) { return m.target == target; });
  };
  auto b = find("/evalbox/bundle");
  ASSERT_NE(b, s->mounts().end());
  EXPECT_FALSE(b->writable);
  EXPECT_FALSE(b->is_file);
  auto a = find(env.root / "agent" / "bin");
  ASSERT_NE(a, s->mounts().end());
  EXPECT_FALSE(a->writable);
  EXPECT_EQ(a->source, env.root / "agent" / "bin");
  EXPECT_EQ(find("/bin"), s->mounts().end()) << "system directories are always mounted";
}

TEST(PrepareDigest, EqualRequestsBindEqualAndChangesDiffer) {
  REQUIRE_ROOT_MOUNTS();
  prep_env env;
  preparer p(env.options());
  std::string d1, d2, d3;
  {
    auto s = p.prepare(env.request("a"));
    ASSERT_TRUE(s) << s.error().message;
    d1 = s->binding_digest();
  }
  {
    auto s = p.prepare(env.request("b"));  // another run id: same profile
    ASSERT_TRUE(s) << s.error().message;
    d2 = s->binding_digest();
  }
  {
    auto r = env.request("c");
    r.limits.memory_bytes = 1ull << 30;
    auto s = p.prepare(r);
    ASSERT_TRUE(s) << s.error().message;
    d3 = s->binding_digest();
  }
  EXPECT_TRUE(is_sha256_hex(d1));
  EXPECT_EQ(d1, d2);
  EXPECT_NE(d1, d3);
}

TEST(PrepareRunLock, SecondPrepareOfALiveRunIdIsBusy) {
  REQUIRE_ROOT_MOUNTS();
  prep_env env;
  preparer p(env.options());
  auto first = p.prepare(env.request("same"));
  ASSERT_TRUE(first) << first.error().message;
  auto second = p.prepare(env.request("same"));
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().kind, error_kind::busy);
  EXPECT_NE(second.error().message.find("already in use"), std::string::npos);
  EXPECT_TRUE(fs::exists(first->workspace_dir() / "README.md")) << "the live run is untouched";
}

TEST(PrepareLaunchDir, IsAnEmptyDirectoryInTheRun) {
  REQUIRE_ROOT_MOUNTS();
  prep_env env;
  preparer p(env.options());
  auto s = p.prepare(env.request());
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_TRUE(fs::is_directory(s->launch_dir()));
  EXPECT_TRUE(fs::is_empty(s->launch_dir()));
  EXPECT_TRUE(is_within(s->launch_dir(), s->run_dir()));
}

TEST(PrepareThreads, ConcurrentPreparesFromOnePreparerAllSucceed) {
  REQUIRE_ROOT_MOUNTS();
  prep_env env;
  preparer p(env.options());
  constexpr int thread_count = 4;
  std::vector<std::string> errors(thread_count);
  std::vector<std::thread> threads;
  for (int i = 0; i < thread_count; ++i) {
    threads.emplace_back([&, i] {
      for (int round = 0; round < 3; ++round) {
        auto s = p.prepare(env.request(fmt::format("t{}-{}", i, round)));
        if (!s) {
          errors[static_cast<size_t>(i)] = s.error().message;
          return;
        }
        if (!read_file(s->workspace_dir() / "README.md")) {
          errors[static_cast<size_t>(i)] = "workspace not readable";
          return;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) EXPECT_EQ(e, "");
  EXPECT_TRUE(fs::is_empty(env.state / "runs"));
}

// A mount the session did not make (here another run's launch directory, bound into this
// one's: the same tmpfs, so a device-number check would not see it) is found by the
// teardown's fallback and unmounted, never descended into: the run leaves nothing and the
// other run keeps its files.
TEST(PrepareTeardown, AStrayMountInTheRunIsUnmountedNotDeletedThrough) {
  REQUIRE_ROOT_MOUNTS();
  prep_env env;
  preparer p(env.options());
  auto s = p.prepare(env.request("a"));
  auto other = p.prepare(env.request("b"));
  ASSERT_TRUE(s) << s.error().message;
  ASSERT_TRUE(other) << other.error().message;
  const fs::path run = s->run_dir();
  ASSERT_TRUE(write_file(other->launch_dir() / "precious.txt", "do not delete\n", 0644));
  const fs::path stray = s->launch_dir() / "stray";
  ASSERT_TRUE(make_dirs(stray, 0755));
  ASSERT_TRUE(mount::bind(other->launch_dir(), stray, false)) << "bind";
  ASSERT_TRUE(s->close());
  EXPECT_TRUE(no_mounts_under(run));
  EXPECT_FALSE(fs::exists(run));
  EXPECT_EQ(read_file(other->launch_dir() / "precious.txt").value_or(""), "do not delete\n");
}

TEST(RemoveTree, StopsAtABindMountOfTheSameFilesystem) {
  REQUIRE_ROOT_MOUNTS();
  prep_env env;
  const fs::path tree = env.root / "tree";
  const fs::path keep = env.root / "keep";
  ASSERT_TRUE(make_dirs(tree / "a" / "mnt", 0755));
  ASSERT_TRUE(make_dirs(keep, 0755));
  ASSERT_TRUE(write_file(keep / "precious.txt", "x", 0644));
  ASSERT_TRUE(mount::bind(keep, tree / "a" / "mnt", false));
  auto r = remove_tree(tree);
  ASSERT_FALSE(r) << "removed through a mount point";
  EXPECT_EQ(r.error().kind, error_kind::busy);
  EXPECT_TRUE(fs::exists(keep / "precious.txt"));
  ASSERT_TRUE(mount::unmount(tree / "a" / "mnt"));
  EXPECT_TRUE(remove_tree(tree));
}

// As root <state>/runs is a tmpfs while a preparer uses it; the last one to go unmounts it
// when no run is left, so a state root keeps no mount after its last user.
TEST(PrepareRunsTmpfs, LastPreparerUnmountsItOnlyWhenNoRunIsLeft) {
  REQUIRE_ROOT_MOUNTS();
  prep_env env;
  const fs::path runs = env.state / "runs";
  auto mounted = [&] {
    auto m = mount::mounts_under(env.state);
    return m && std::find(m->begin(), m->end(), runs) != m->end();
  };
  {
    preparer a(env.options());
    auto sa = a.prepare(env.request("a"));
    ASSERT_TRUE(sa) << sa.error().message;
    EXPECT_TRUE(mounted());
    std::optional<prepared_session> sb;
    {
      preparer b(env.options());
      auto s = b.prepare(env.request("b"));
      ASSERT_TRUE(s) << s.error().message;
      sb.emplace(std::move(*s));
    }
    EXPECT_TRUE(mounted()) << "b went while a still uses the state root";
    EXPECT_TRUE(fs::exists(sb->workspace_dir() / "README.md"));
    ASSERT_TRUE(sb->close());
    ASSERT_TRUE(sa->close());
  }
  EXPECT_FALSE(mounted()) << "the last user left the runs tmpfs mounted";
  EXPECT_TRUE(no_mounts_under(env.state));
  // And the next user mounts it again.
  preparer c(env.options());
  auto sc = c.prepare(env.request("c"));
  ASSERT_TRUE(sc) << sc.error().message;
  EXPECT_TRUE(mounted());
}

}  // namespace
}  // namespace evalbox::sandbox
