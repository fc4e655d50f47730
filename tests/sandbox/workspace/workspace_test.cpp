// The workspace module on its own (workspace/workspace.h): strategy names and choice, the run
// disk without a quota, and the copy strategy's materialization, snapshots and change lists.
#include "sandbox/workspace/workspace.h"

#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "base/fs.h"
#include "base/json.h"
#include "sandbox/mount/mount.h"
#include "sandbox/sys/probe.h"

namespace evalbox::sandbox::workspace {
namespace {

namespace fs = std::filesystem;

TEST(WorkspaceStrategy, EachHasItsName) {
  EXPECT_EQ(to_string(workspace_strategy::auto_select), "auto");
  EXPECT_EQ(to_string(workspace_strategy::overlay), "overlay");
  EXPECT_EQ(to_string(workspace_strategy::reflink), "reflink");
  EXPECT_EQ(to_string(workspace_strategy::copy), "copy");
}

TEST(WorkspaceStrategy, CopyIsAlwaysPossibleAndAutoPicksOneThatIs) {
  temp_dir dir("evalbox-ws-strategy");
  EXPECT_EQ(resolve_strategy(workspace_strategy::copy, dir.path()), workspace_strategy::copy);
  auto picked = resolve_strategy(workspace_strategy::auto_select, dir.path());
  ASSERT_TRUE(picked) << picked.error().message;
  EXPECT_NE(*picked, workspace_strategy::auto_select);
}

TEST(WorkspaceStrategy, ReflinkIsTakenWhereTheFilesystemHasItElseSaysWhatToDo) {
  temp_dir dir("evalbox-ws-strategy");
  auto r = resolve_strategy(workspace_strategy::reflink, dir.path());
  if (sys::reflink_supported(dir.path())) {
    EXPECT_EQ(r, workspace_strategy::reflink);
    return;
  }
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, error_kind::unsupported);
  EXPECT_NE(r.error().message.find("does not support FICLONE"), std::string::npos);
  EXPECT_NE(r.error().message.find("use auto, overlay or copy"), std::string::npos);
}

// As root a snapshot is a read-only bind: the fixture keeps it in a mount namespace of its own.
class CopyWorkspace : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() == 0) {
      ASSERT_EQ(::unshare(CLONE_NEWNS), 0);
      ASSERT_EQ(::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr), 0);
    }
    source_ = dir_.path() / "source";
    run_ = dir_.path() / "run";
    ASSERT_TRUE(make_dirs(source_ / "src", 0755));
    ASSERT_TRUE(make_dirs(run_, 0700));
    ASSERT_TRUE(write_file(source_ / "a.txt", "a\n", 0644));
    ASSERT_TRUE(write_file(source_ / "src" / "b.txt", "b\n", 0644));
  }
  void TearDown() override { (void)mount::unmount_all_under(dir_.path()); }
  temp_dir dir_{"evalbox-ws"};
  fs::path source_, run_;
};

TEST_F(CopyWorkspace, APlainDiskRecordsTheQuotaWithoutEnforcingIt) {
  auto disk = prepare_disk(run_, 1 << 20, /*use_tmpfs=*/false);
  ASSERT_TRUE(disk) << disk.error().message;
  EXPECT_EQ(disk->dir, run_ / "disk");
  EXPECT_FALSE(disk->tmpfs);
  EXPECT_EQ(disk->quota_bytes, 1u << 20);
  EXPECT_TRUE(fs::is_directory(run_ / "disk"));
}

TEST_F(CopyWorkspace, MaterializesSnapshotsAndListsWhatChanged) {
  auto disk = prepare_disk(run_, 64 << 20, false);
  ASSERT_TRUE(disk);
  auto ws = workspace_tree::materialize({source_}, workspace_strategy::copy, run_, *disk,
                                        ::getuid(), ::getgid());
  ASSERT_TRUE(ws) << ws.error().message;
  EXPECT_EQ(ws->strategy(), workspace_strategy::copy);
  EXPECT_EQ(ws->dir(), run_ / "disk" / "workspace");
  EXPECT_EQ(read_file(ws->dir() / "src" / "b.txt").value_or(""), "b\n");
  EXPECT_EQ(ws->identity()["fs_type"], "host");
  EXPECT_EQ(ws->identity()["enforced"], false);

  auto snap = ws->snapshot();
  ASSERT_TRUE(snap) << snap.error().message;
  const auto [view, index] = *snap;
  EXPECT_EQ(index, 0);
  ASSERT_TRUE(write_file(ws->dir() / "a.txt", "changed\n", 0644));
  ASSERT_TRUE(write_file(ws->dir() / "new.txt", "new\n", 0644));
  ASSERT_TRUE(remove_tree(ws->dir() / "src" / "b.txt"));
  EXPECT_EQ(read_file(view / "a.txt").value_or(""), "a\n");  // the snapshot is frozen
  auto changed = ws->changed_paths(index);
  ASSERT_TRUE(changed) << changed.error().message;
  EXPECT_EQ(*changed, (std::vector<std::string>{"a.txt", "new.txt", "src/b.txt"}));
  // Nothing was written to the source.
  EXPECT_EQ(read_file(source_ / "a.txt").value_or(""), "a\n");
  auto none = ws->changed_paths(1);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().kind, error_kind::not_found);
}

TEST_F(CopyWorkspace, MaterializingRequiresAResolvedStrategy) {
  auto disk = prepare_disk(run_, 64 << 20, false);
  ASSERT_TRUE(disk);
  auto ws = workspace_tree::materialize({source_}, workspace_strategy::auto_select, run_, *disk,
                                        ::getuid(), ::getgid());
  ASSERT_FALSE(ws);
  EXPECT_EQ(ws.error().kind, error_kind::internal);
}

}  // namespace
}  // namespace evalbox::sandbox::workspace
