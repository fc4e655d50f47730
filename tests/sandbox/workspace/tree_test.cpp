// Tree copies and comparisons of the copy and reflink workspace strategies (workspace/tree.h):
// what is kept (content, modes, times, symlinks as links), what is dropped (setuid bits,
// special files), and what counts as a difference.
#include "sandbox/workspace/tree.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "base/fs.h"
#include "tests/support/isolation.h"

namespace evalbox::sandbox::workspace {
namespace {

namespace fs = std::filesystem;

struct stat_of {
  explicit stat_of(const fs::path& p) { ok = ::lstat(p.c_str(), &st) == 0; }
  struct stat st {};
  bool ok = false;
};

class Tree : public ::testing::Test {
 protected:
  void SetUp() override {
    from_ = dir_.path() / "from";
    to_ = dir_.path() / "to";
    ASSERT_TRUE(make_dirs(from_ / "src" / "deep", 0755));
    ASSERT_TRUE(make_dirs(to_, 0700));
    ASSERT_TRUE(write_file(from_ / "README.md", "hello\n", 0644));
    ASSERT_TRUE(write_file(from_ / "src" / "run.sh", "#!/bin/sh\n", 0755));
    ASSERT_TRUE(write_file(from_ / "src" / "deep" / "secret", "x", 0600));
    ASSERT_EQ(::symlink("/etc/passwd", (from_ / "outside").c_str()), 0);
    ASSERT_EQ(::symlink("README.md", (from_ / "readme").c_str()), 0);
  }
  temp_dir dir_{"evalbox-tree"};
  fs::path from_, to_;
};

TEST_F(Tree, CopyKeepsContentModesTimesAndLinksAsLinks) {
  struct timespec old[2] = {{1000000, 0}, {1000000, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, (from_ / "README.md").c_str(), old, 0), 0);
  ASSERT_TRUE(copy_tree(from_, to_, copy_mode::copy, ::getuid(), ::getgid()));
  EXPECT_EQ(read_file(to_ / "README.md").value_or(""), "hello\n");
  EXPECT_EQ(stat_of(to_ / "src" / "run.sh").st.st_mode & 07777, 0755u);
  EXPECT_EQ(stat_of(to_ / "src" / "deep" / "secret").st.st_mode & 07777, 0600u);
  EXPECT_EQ(stat_of(to_ / "README.md").st.st_mtim.tv_sec, 1000000);
  // A link is copied as the link, never followed out of the tree.
  ASSERT_TRUE(S_ISLNK(stat_of(to_ / "outside").st.st_mode));
  EXPECT_EQ(fs::read_symlink(to_ / "outside"), "/etc/passwd");
  EXPECT_EQ(fs::read_symlink(to_ / "readme"), "README.md");
  EXPECT_EQ(list_tree(from_), list_tree(to_));
}

TEST_F(Tree, CopyDropsSetuidBitsAndSkipsSpecialFiles) {
  ASSERT_TRUE(write_file(from_ / "suid", "x", 0755));
  ASSERT_EQ(::chmod((from_ / "suid").c_str(), 06755), 0);
  ASSERT_EQ(::mkfifo((from_ / "fifo").c_str(), 0644), 0);
  ASSERT_TRUE(copy_tree(from_, to_, copy_mode::copy, ::getuid(), ::getgid()));
  EXPECT_EQ(stat_of(to_ / "suid").st.st_mode & 07777, 0755u);
  EXPECT_FALSE(stat_of(to_ / "fifo").ok);
}

TEST_F(Tree, CopyOwnsEverythingByTheSandboxIdAsRoot) {
  EVALBOX_REQUIRE_FEATURE(::geteuid() == 0, "root (chown to another id)");
  ASSERT_TRUE(copy_tree(from_, to_, copy_mode::copy, 60000, 60000));
  for (const char* p : {"", "README.md", "src", "src/deep/secret", "outside"}) {
    const stat_of s(to_ / p);
    EXPECT_EQ(s.st.st_uid, 60000u) << p;
    EXPECT_EQ(s.st.st_gid, 60000u) << p;
  }
}

TEST_F(Tree, CopyIntoAMissingDirectoryFailsNamingIt) {
  auto r = copy_tree(from_, dir_.path() / "absent", copy_mode::copy, ::getuid(), ::getgid());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find((dir_.path() / "absent").string()), std::string::npos);
}

TEST_F(Tree, EntryDiffersSeesContentModeTypeLinkAndExistence) {
  ASSERT_TRUE(copy_tree(from_, to_, copy_mode::copy, ::getuid(), ::getgid()));
  for (const char* p : {"README.md", "src", "src/run.sh", "outside", "no-such"})
    EXPECT_FALSE(entry_differs(from_, to_, p)) << p;
  ASSERT_TRUE(write_file(to_ / "README.md", "hellO\n", 0644));  // same size
  EXPECT_TRUE(entry_differs(from_, to_, "README.md"));
  ASSERT_EQ(::chmod((to_ / "src" / "run.sh").c_str(), 0700), 0);
  EXPECT_TRUE(entry_differs(from_, to_, "src/run.sh"));
  ASSERT_TRUE(remove_tree(to_ / "readme"));
  ASSERT_EQ(::symlink("src", (to_ / "readme").c_str()), 0);
  EXPECT_TRUE(entry_differs(from_, to_, "readme"));
  ASSERT_TRUE(remove_tree(to_ / "outside"));
  ASSERT_TRUE(write_file(to_ / "outside", "/etc/passwd", 0644));  // a file, not a link
  EXPECT_TRUE(entry_differs(from_, to_, "outside"));
  ASSERT_TRUE(write_file(to_ / "new", "", 0644));
  EXPECT_TRUE(entry_differs(from_, to_, "new"));
}

TEST_F(Tree, ListTreeIsSortedAndIncludesDirectories) {
  EXPECT_EQ(list_tree(from_),
            (std::vector<std::string>{"README.md", "outside", "readme", "src", "src/deep",
                                      "src/deep/secret", "src/run.sh"}));
  EXPECT_TRUE(list_tree(dir_.path() / "absent").empty());
}

}  // namespace
}  // namespace evalbox::sandbox::workspace
