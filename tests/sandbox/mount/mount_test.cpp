// Host-side mounts of a run (mount/mount.h): the mount table as data, and tmpfs, bind and
// overlay mounts and their removal. The mounting tests run in a private mount namespace of
// their own (each test is its own process): nothing they mount is ever seen by the host.
#include "sandbox/mount/mount.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "base/fs.h"
#include "base/unique_fd.h"
#include "tests/support/isolation.h"

namespace evalbox::sandbox::mount {
namespace {

namespace fs = std::filesystem;

TEST(Mountinfo, ParsesEveryFieldAndDecodesEscapes) {
  auto table = read_mountinfo(fs::path(EVALBOX_SOURCE_DIR) / "tests/data/sandbox/mount/mountinfo");
  ASSERT_TRUE(table) << table.error().message;
  ASSERT_EQ(table->size(), 5u);
  const mount_entry& root = (*table)[0];
  EXPECT_EQ(root.id, 22);
  EXPECT_EQ(root.parent_id, 1);
  EXPECT_EQ(root.mount_point, "/");
  EXPECT_EQ(root.fstype, "ext4");
  EXPECT_EQ(root.source, "/dev/vda1");
  EXPECT_EQ(root.options, "rw,relatime");
  EXPECT_EQ(root.optional, "shared:1");
  EXPECT_EQ(root.super_options, "rw,errors=remount-ro");
  const mount_entry& runs = (*table)[2];
  EXPECT_EQ(runs.mount_point, "/state/runs/with space");
  EXPECT_EQ(runs.optional, "master:3 shared:7");
  EXPECT_EQ(runs.source, "evalbox");
  EXPECT_EQ(runs.super_options, "rw,size=1024k,mode=700");
  EXPECT_EQ((*table)[3].super_options, "rw,lowerdir=/l1:/l2,upperdir=/u,workdir=/w");
  EXPECT_EQ((*table)[3].optional, "");
  EXPECT_EQ((*table)[4].mount_point, "/state/runs/tab\tand\\backslash");
  EXPECT_EQ((*table)[4].source, "my source");
}

TEST(Mountinfo, AMissingFileIsAnErrorNamingIt) {
  auto table = read_mountinfo("/proc/evalbox-no-such-mountinfo");
  ASSERT_FALSE(table);
  EXPECT_NE(table.error().message.find("/proc/evalbox-no-such-mountinfo"), std::string::npos);
}

TEST(Mountinfo, ALineWithoutEveryFieldIsLeftOutAndTheRestRead) {
  const std::string text =
      "22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n"
      "\n"
      "garbage\n"
      "23 22 0:5 / /no/separator rw shared:2 tmpfs tmpfs rw\n"
      "x 22 0:5 / /bad/id rw - tmpfs tmpfs rw\n"
      "24 22 0:5 / /cut/short rw - tmpfs\n"
      "25   22 0:6 / /dev/shm   rw,nosuid  -  tmpfs shm rw,size=65536k";  // no final newline
  auto table = sys::parse_mountinfo(text);
  ASSERT_EQ(table.size(), 2u);
  EXPECT_EQ(table[0].mount_point, "/");
  EXPECT_EQ(table[1].id, 25);
  EXPECT_EQ(table[1].parent_id, 22);
  EXPECT_EQ(table[1].mount_point, "/dev/shm");
  EXPECT_EQ(table[1].options, "rw,nosuid");
  EXPECT_EQ(table[1].optional, "");
  EXPECT_EQ(table[1].source, "shm");
  EXPECT_EQ(table[1].super_options, "rw,size=65536k");
  EXPECT_TRUE(sys::parse_mountinfo("").empty());
}

class Mounts : public ::testing::Test {
 protected:
  void SetUp() override {
    EVALBOX_REQUIRE_FEATURE(::geteuid() == 0, "root (mounting)");
    ASSERT_EQ(::unshare(CLONE_NEWNS), 0) << std::strerror(errno);
    ASSERT_EQ(::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr), 0);
    top_ = dir_.path() / "t";
    for (const char* d : {"t/a", "t/c", "t/x"}) ASSERT_TRUE(make_dirs(dir_.path() / d, 0755));
  }
  void TearDown() override { (void)unmount_all_under(dir_.path()); }

  temp_dir dir_{"evalbox-mount"};
  fs::path top_;
};

TEST_F(Mounts, UnderListsDeepestFirstThenNewestFirst) {
  ASSERT_TRUE(mount_tmpfs(top_ / "a", 1 << 20, 0755, 0, 0));
  ASSERT_TRUE(make_dirs(top_ / "a" / "b", 0755));
  ASSERT_TRUE(mount_tmpfs(top_ / "a" / "b", 1 << 20, 0755, 0, 0));
  ASSERT_TRUE(mount_tmpfs(top_ / "c", 1 << 20, 0755, 0, 0));
  ASSERT_TRUE(mount_tmpfs(top_ / "c", 1 << 20, 0700, 0, 0));  // stacked
  auto under = mounts_under(top_);
  ASSERT_TRUE(under) << under.error().message;
  EXPECT_EQ(*under, (std::vector<fs::path>{top_ / "a" / "b", top_ / "c", top_ / "c", top_ / "a"}));
  auto count = unmount_all_under(top_);
  ASSERT_TRUE(count) << count.error().message;
  EXPECT_EQ(*count, 4);
  EXPECT_TRUE(mounts_under(top_)->empty());
}

TEST_F(Mounts, UnderLeavesASiblingWithTheSamePrefixAndTakesAnUnnormalizedDirectory) {
  ASSERT_TRUE(make_dirs(dir_.path() / "t-sibling", 0755));
  ASSERT_TRUE(mount_tmpfs(dir_.path() / "t-sibling", 1 << 20, 0755, 0, 0));
  ASSERT_TRUE(mount_tmpfs(top_ / "a", 1 << 20, 0755, 0, 0));
  auto under = mounts_under(top_);
  ASSERT_TRUE(under) << under.error().message;
  EXPECT_EQ(*under, (std::vector<fs::path>{top_ / "a"}));
  auto same = mounts_under(top_ / "x" / ".." / "." / "");
  ASSERT_TRUE(same) << same.error().message;
  EXPECT_EQ(*same, (std::vector<fs::path>{top_ / "a"}));
  auto sibling = mounts_under(dir_.path() / "t-sibling");
  ASSERT_TRUE(sibling) << sibling.error().message;
  EXPECT_EQ(*sibling, (std::vector<fs::path>{dir_.path() / "t-sibling"}));
}

TEST_F(Mounts, UnmountEachTakesStackedMountsAndSkipsPlainDirectories) {
  ASSERT_TRUE(mount_tmpfs(top_ / "c", 1 << 20, 0755, 0, 0));
  ASSERT_TRUE(mount_tmpfs(top_ / "c", 1 << 20, 0755, 0, 0));
  auto count = unmount_each({top_ / "x", top_ / "c", top_ / "absent"});
  ASSERT_TRUE(count) << count.error().message;
  EXPECT_EQ(*count, 2);
  EXPECT_TRUE(mounts_under(top_)->empty());
}

// The teardown lists the run directory (a bind of itself) before the mounts it holds: its
// lazy unmount takes them along, and the targets below it are then skipped, not errors.
TEST_F(Mounts, UnmountEachSkipsWhatADetachedParentTookAlong) {
  ASSERT_TRUE(make_dirs(top_ / "run", 0755));
  ASSERT_TRUE(bind(top_ / "run", top_ / "run", false));
  ASSERT_TRUE(make_dirs(top_ / "run" / "disk", 0755));
  ASSERT_TRUE(mount_tmpfs(top_ / "run" / "disk", 1 << 20, 0755, 0, 0));
  ASSERT_TRUE(make_dirs(top_ / "run" / "disk" / "inner", 0755));
  ASSERT_TRUE(mount_tmpfs(top_ / "run" / "disk" / "inner", 1 << 20, 0755, 0, 0));
  ASSERT_TRUE(mount_tmpfs(top_ / "c", 1 << 20, 0755, 0, 0));
  ASSERT_EQ(mounts_under(top_)->size(), 4u);
  auto count = unmount_each({top_ / "run", top_ / "run" / "disk", top_ / "run" / "disk" / "inner",
                             top_ / "run" / "disk", top_ / "c"});
  ASSERT_TRUE(count) << count.error().message;
  EXPECT_EQ(*count, 2);  // the run directory (with the two below it) and c
  EXPECT_TRUE(mounts_under(top_)->empty());
}

TEST_F(Mounts, UnmountWithoutDetachSaysBusy) {
  ASSERT_TRUE(mount_tmpfs(top_ / "a", 1 << 20, 0755, 0, 0));
  // A file open on it keeps it busy (MNT_DETACH, which the teardown uses, would not care).
  unique_fd held(::open((top_ / "a").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(held);
  auto r = unmount(top_ / "a");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().sys_errno, EBUSY);
  EXPECT_NE(r.error().message.find((top_ / "a").string()), std::string::npos);
}

TEST_F(Mounts, ATmpfsHoldsItsSizeModeAndOwner) {
  ASSERT_TRUE(mount_tmpfs(top_ / "a", 1 << 20, 0710, 60000, 60001));
  struct stat st {};
  ASSERT_EQ(::stat((top_ / "a").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0710u);
  EXPECT_EQ(st.st_uid, 60000u);
  EXPECT_EQ(st.st_gid, 60001u);
  auto big = write_file(top_ / "a" / "big", std::string(2 << 20, 'x'));
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().sys_errno, ENOSPC);
}

TEST_F(Mounts, AReadOnlyBindRefusesWrites) {
  ASSERT_TRUE(write_file(top_ / "x" / "f", "x"));
  ASSERT_TRUE(bind(top_ / "x", top_ / "a", /*read_only=*/true));
  EXPECT_EQ(read_file(top_ / "a" / "f").value_or(""), "x");
  auto w = write_file(top_ / "a" / "g", "y");
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().sys_errno, EROFS);
}

// Each idmap's user namespace is made by a child sharing the caller's memory on a stack of its
// own (idmap.cpp): two idmaps one after the other (the stack used twice), each bind showing the
// source's owner as its own id, read-only, from a caller with threads, and no child left after.
TEST_F(Mounts, IdmappedBindsShowTheSourceOwnerAsTheMappedIdAndLeaveNoChild) {
  EVALBOX_REQUIRE_FEATURE(testing::host().idmapped_mounts, "idmapped mounts");
  ASSERT_TRUE(write_file(top_ / "x" / "f", "x"));
  ASSERT_EQ(::chown((top_ / "x" / "f").c_str(), 0, 0), 0);
  std::atomic<bool> stop{false};
  std::thread busy([&stop] {  // another thread of the caller, allocating while the child runs
    while (!stop) std::string(1000, 'x').swap(*std::make_unique<std::string>());
  });
  const status first = bind_idmapped(top_ / "x", top_ / "a", 0, 0, 60001, 60002);
  const status second = bind_idmapped(top_ / "x", top_ / "c", 0, 0, 60003, 60004);
  stop = true;
  busy.join();
  ASSERT_TRUE(first) << first.error().message;
  ASSERT_TRUE(second) << second.error().message;
  struct stat a {
  }, c{};
  ASSERT_EQ(::stat((top_ / "a" / "f").c_str(), &a), 0);
  ASSERT_EQ(::stat((top_ / "c" / "f").c_str(), &c), 0);
  EXPECT_EQ(a.st_uid, 60001u);
  EXPECT_EQ(a.st_gid, 60002u);
  EXPECT_EQ(c.st_uid, 60003u);
  EXPECT_EQ(c.st_gid, 60004u);
  EXPECT_EQ(read_file(top_ / "c" / "f").value_or(""), "x");
  auto w = write_file(top_ / "a" / "g", "y");
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().sys_errno, EROFS);
  errno = 0;
  EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), -1);  // every child was reaped
  EXPECT_EQ(errno, ECHILD);
}

TEST_F(Mounts, AnOverlayPathOverlayfsCannotTakeIsRefusedBeforeMounting) {
  for (const char* bad : {"t/with,comma", "t/with:colon"}) {
    const fs::path lower = dir_.path() / bad;
    ASSERT_TRUE(make_dirs(lower, 0755));
    auto r = mount_overlay(top_ / "a", {lower}, top_ / "x", top_ / "c");
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().kind, error_kind::invalid_argument) << bad;
    EXPECT_NE(r.error().message.find("choose a state directory without them"), std::string::npos);
  }
  EXPECT_TRUE(mounts_under(top_)->empty());
}

TEST_F(Mounts, AnOverlayShowsItsUpperOverItsLowers) {
  for (const char* d : {"t/l1", "t/l2", "t/u", "t/w"})
    ASSERT_TRUE(make_dirs(dir_.path() / d, 0755));
  ASSERT_TRUE(write_file(top_ / "l2" / "f", "bottom"));
  ASSERT_TRUE(write_file(top_ / "l1" / "f", "top"));
  ASSERT_TRUE(write_file(top_ / "l2" / "g", "only below"));
  ASSERT_TRUE(mount_overlay(top_ / "a", {top_ / "l1", top_ / "l2"}, top_ / "u", top_ / "w"));
  EXPECT_EQ(read_file(top_ / "a" / "f").value_or(""), "top");
  EXPECT_EQ(read_file(top_ / "a" / "g").value_or(""), "only below");
  ASSERT_TRUE(write_file(top_ / "a" / "new", "written"));
  EXPECT_EQ(read_file(top_ / "u" / "new").value_or(""), "written");  // writes go up
  EXPECT_FALSE(fs::exists(top_ / "l1" / "new"));
}

}  // namespace
}  // namespace evalbox::sandbox::mount
