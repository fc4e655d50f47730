// Image layers read the way overlayfs stacks them, without a mount: which layers a directory
// is made of, and a copy of the merged view — whiteouts (both forms) hide, opaque directories
// cut off the layers below, a file hides a lower directory, a symlink on the way is refused.
#include "sandbox/workspace/layers.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#include <gtest/gtest.h>

#include "base/fs.h"
#include "sandbox/workspace/tree.h"

namespace evalbox::sandbox::workspace {
namespace {

namespace fs = std::filesystem;

class Layers : public ::testing::Test {
 protected:
  // Layer `n` (0 = base), created on first use.
  fs::path layer(int n) {
    fs::path p = tmp_.path() / ("layer" + std::to_string(n));
    EXPECT_TRUE(make_dirs(p, 0755));
    return p;
  }
  void file(const fs::path& p, const std::string& text) {
    ASSERT_TRUE(make_dirs(p.parent_path(), 0755));
    ASSERT_TRUE(write_file(p, text, 0644));
  }
  void dir(const fs::path& p) { ASSERT_TRUE(make_dirs(p, 0755)); }
  // A whiteout in the form the store writes as root (a 0/0 character device) or, where that
  // cannot be made, the xattr form.
  void whiteout(const fs::path& p) {
    ASSERT_TRUE(make_dirs(p.parent_path(), 0755));
    if (::mknod(p.c_str(), S_IFCHR | 0, makedev(0, 0)) == 0) return;
    ASSERT_TRUE(write_file(p, "", 0644));
    ASSERT_EQ(::setxattr(p.c_str(), "user.overlay.whiteout", "", 0, 0), 0);
  }
  void xattr_whiteout(const fs::path& p) {
    ASSERT_TRUE(make_dirs(p.parent_path(), 0755));
    ASSERT_TRUE(write_file(p, "", 0644));
    ASSERT_EQ(::setxattr(p.c_str(), "user.overlay.whiteout", "", 0, 0), 0);
  }
  void opaque(const fs::path& p) {
    dir(p);
    ASSERT_EQ(::setxattr(p.c_str(), "user.overlay.opaque", "y", 1, 0), 0);
  }
  std::vector<std::string> copied(const std::vector<fs::path>& layers) {
    fs::path to = tmp_.path() / ("copy" + std::to_string(++copies_));
    EXPECT_TRUE(make_dirs(to, 0755));
    auto s = copy_layers(layers, to, copy_mode::copy, ::getuid(), ::getgid());
    EXPECT_TRUE(s) << s.error().message;
    return list_tree(to);
  }
  temp_dir tmp_{"evalbox-layers"};
  int copies_ = 0;
};

TEST_F(Layers, ADirectoryComesFromEveryLayerDownToTheFirstThatHidesIt) {
  fs::path l0 = layer(0), l1 = layer(1), l2 = layer(2), l3 = layer(3);
  file(l0 / "app/base.txt", "0");
  file(l1 / "app/one.txt", "1");
  file(l2 / "other/x", "");  // has no app/: does not hide it
  file(l3 / "app/three.txt", "3");
  auto got = subtree_layers({l3, l2, l1, l0}, "/app");
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(*got, (std::vector<fs::path>{l3 / "app", l1 / "app", l0 / "app"}));
  EXPECT_EQ(copied(*got), (std::vector<std::string>{"base.txt", "one.txt", "three.txt"}));
}

TEST_F(Layers, AWhiteoutAFileOrAnOpaqueDirectoryCutsOffTheLayersBelow) {
  fs::path l0 = layer(0), l1 = layer(1), l2 = layer(2);
  file(l0 / "app/base.txt", "0");
  whiteout(l1 / "app");
  file(l2 / "app/new.txt", "2");
  EXPECT_EQ(*subtree_layers({l2, l1, l0}, "/app"), (std::vector<fs::path>{l2 / "app"}));

  fs::path m0 = layer(10), m1 = layer(11);
  file(m0 / "srv/app/old.txt", "0");
  opaque(m1 / "srv");
  file(m1 / "srv/app/new.txt", "1");
  EXPECT_EQ(*subtree_layers({m1, m0}, "/srv/app"), (std::vector<fs::path>{m1 / "srv/app"}));

  fs::path n0 = layer(20), n1 = layer(21);
  file(n0 / "data/deep/f", "0");
  file(n1 / "data", "a file now");
  EXPECT_TRUE(subtree_layers({n1, n0}, "/data/deep")->empty());
}

TEST_F(Layers, ASymlinkOnTheWayIsRefusedNamingIt) {
  fs::path l0 = layer(0);
  dir(l0 / "real/app");
  ASSERT_EQ(::symlink("real", (l0 / "srv").c_str()), 0);
  auto got = subtree_layers({l0}, "/srv/app");
  ASSERT_FALSE(got);
  EXPECT_NE(got.error().message.find("/srv is a symlink in the image"), std::string::npos)
      << got.error().message;
}

TEST_F(Layers, TheCopyLeavesWhitedOutNamesOutAndKeepsOpaqueDirectoriesOwn) {
  fs::path l0 = layer(0), l1 = layer(1);
  file(l0 / "keep.txt", "k");
  file(l0 / "gone.txt", "g");
  file(l0 / "xgone.txt", "x");
  file(l0 / "cache/old", "o");
  file(l0 / "lib/a", "a");
  whiteout(l1 / "gone.txt");
  xattr_whiteout(l1 / "xgone.txt");
  opaque(l1 / "cache");
  file(l1 / "cache/new", "n");
  file(l1 / "lib/b", "b");
  file(l1 / "keep.txt", "newer");
  EXPECT_EQ(copied({l1, l0}),
            (std::vector<std::string>{"cache", "cache/new", "keep.txt", "lib", "lib/a", "lib/b"}));
  EXPECT_EQ(read_file(tmp_.path() / "copy1/keep.txt").value_or(""), "newer");
}

}  // namespace
}  // namespace evalbox::sandbox::workspace

namespace evalbox::sandbox::workspace {
namespace {

// What a program path is in an image: symlinks resolved inside the image (Debian's /bin ->
// usr/bin, an absolute link never to the host), whiteouts and files hiding the layers below.
TEST_F(Layers, MergedLookupFollowsLinksInsideTheImageOnly) {
  fs::path l0 = layer(0), l1 = layer(1);
  file(l0 / "usr/bin/python3.11", "elf");
  ASSERT_EQ(::symlink("python3.11", (l0 / "usr/bin/python3").c_str()), 0);
  ASSERT_EQ(::symlink("usr/bin", (l0 / "bin").c_str()), 0);
  ASSERT_EQ(::symlink("/usr/bin/python3", (l0 / "usr/bin/py").c_str()), 0);
  // Absolute and pointing at a host file that exists: resolved in the image, where it does not.
  ASSERT_EQ(::symlink("/etc/hostname", (l0 / "usr/bin/hostlink").c_str()), 0);
  file(l0 / "usr/bin/gone", "x");
  whiteout(l1 / "usr/bin/gone");
  auto at = [&](const char* p) { return *merged_lookup({l1, l0}, p); };
  EXPECT_EQ(at("/bin/python3"), merged_kind::file);
  EXPECT_EQ(at("/usr/bin/py"), merged_kind::file);
  EXPECT_EQ(at("/bin"), merged_kind::directory);
  EXPECT_EQ(at("/usr/bin/gone"), merged_kind::missing);
  EXPECT_EQ(at("/usr/bin/hostlink"), merged_kind::missing);
  EXPECT_EQ(at("/usr/bin/python3.11/x"), merged_kind::missing);
  ASSERT_EQ(::symlink("loop", (l0 / "loop").c_str()), 0);
  EXPECT_FALSE(merged_lookup({l1, l0}, "/loop"));
}

}  // namespace
}  // namespace evalbox::sandbox::workspace
