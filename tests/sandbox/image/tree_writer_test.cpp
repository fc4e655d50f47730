// What an unpacked layer looks like on disk: modes (setuid and read-only directories
// included), mtimes, the single owner, links, fifos, whiteouts, opaque markers, the xattrs
// that are kept or dropped, and the device nodes that are skipped.
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "base/json.h"
#include "sandbox/image/tree_writer.h"
#include "tests/sandbox/image/image_test_support.h"

namespace evalbox::testing::image {
namespace {

namespace fs = std::filesystem;

class Unpacked : public ::testing::Test {
 protected:
  fs::path unpack(const std::vector<tar_item>& items, const std::string& compression = "gzip") {
    auto s = img::store::open(test_store_options(tmp_.path() / "state"));
    EXPECT_TRUE(s) << s.error().message;
    write_oci_layout(tmp_.path() / "img", {make_layer(items, compression)});
    auto r = s->import("oci:" + (tmp_.path() / "img").string(), {});
    EXPECT_TRUE(r) << r.error().message;
    return r ? r->image.layers.at(0).dir : fs::path();
  }
  static struct stat lstat_of(const fs::path& p) {
    struct stat st {};
    EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
    return st;
  }
  static std::string xattr(const fs::path& p, const char* name) {
    char buf[256];
    ssize_t n = ::lgetxattr(p.c_str(), name, buf, sizeof buf);
    return n < 0 ? "<none>" : std::string(buf, static_cast<size_t>(n));
  }
  temp_dir tmp_{"evalbox-image-unpacked"};
};

TEST_F(Unpacked, ModesIncludingSetuidAreKept) {
  auto root = unpack(
      {dir("bin"), file("bin/su", "elf", 04755), file("bin/sg", "elf", 02711), dir("tmp", 01777)});
  EXPECT_EQ(lstat_of(root / "bin/su").st_mode & 07777, 04755u);
  EXPECT_EQ(lstat_of(root / "bin/sg").st_mode & 07777, 02711u);
  EXPECT_EQ(lstat_of(root / "tmp").st_mode & 07777, 01777u);
}

TEST_F(Unpacked, ReadOnlyDirectoryStillReceivesItsFiles) {
  auto root = unpack({dir("ro", 0555), file("ro/inside", "content"), dir("ro/sub", 0500),
                      file("ro/sub/deeper", "more")});
  EXPECT_EQ(lstat_of(root / "ro").st_mode & 07777, 0555u);
  EXPECT_EQ(lstat_of(root / "ro/sub").st_mode & 07777, 0500u);
  EXPECT_EQ(*read_file(root / "ro/sub/deeper"), "more");
}

TEST_F(Unpacked, MtimesAreKeptForFilesDirectoriesAndSymlinks) {
  tar_item f = file("d/f", "x");
  f.mtime = 1111111111;
  tar_item d = dir("d");
  d.mtime = 1222222222;
  tar_item l = symlink("d/l", "f");
  l.mtime = 1333333333;
  auto root = unpack({d, f, l});
  EXPECT_EQ(lstat_of(root / "d/f").st_mtim.tv_sec, 1111111111);
  EXPECT_EQ(lstat_of(root / "d").st_mtim.tv_sec, 1222222222);
  EXPECT_EQ(lstat_of(root / "d/l").st_mtim.tv_sec, 1333333333);
}

TEST_F(Unpacked, EveryEntryBelongsToTheStoreOwner) {
  // The tar says 1234:5678 for everything (builder.cpp); the sandbox maps only one id.
  auto root = unpack({dir("etc"), file("etc/f", "x"), symlink("etc/l", "/nowhere"),
                      tar_item{"etc/p", 'p', "", "", 0600}, file("implicit/dir/f", "y")});
  for (const char* p : {"", "etc", "etc/f", "etc/l", "etc/p", "implicit", "implicit/dir"}) {
    auto st = lstat_of(root / p);
    EXPECT_EQ(st.st_uid, test_owner()) << p;
  }
}

TEST_F(Unpacked, SymlinksAreStoredAsIsAndHardLinksShareTheInode) {
  auto root = unpack({dir("bin"), file("bin/busybox", "elf", 0755),
                      symlink("bin/sh", "/bin/busybox"), hardlink("bin/ash", "bin/busybox")});
  EXPECT_EQ(fs::read_symlink(root / "bin/sh"), "/bin/busybox");
  EXPECT_EQ(lstat_of(root / "bin/ash").st_ino, lstat_of(root / "bin/busybox").st_ino);
}

TEST_F(Unpacked, ZstdAndUncompressedLayersUnpack) {
  EXPECT_EQ(*read_file(unpack({file("z", "zstd!")}, "zstd") / "z"), "zstd!");
  temp_dir other("evalbox-image-plain");
  auto s = img::store::open(test_store_options(other.path() / "state"));
  ASSERT_TRUE(s);
  write_oci_layout(other.path() / "img", {make_layer({file("p", "plain")}, "none")});
  auto r = s->import("oci:" + (other.path() / "img").string(), {});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->image.layers[0].compression, "none");
  EXPECT_EQ(*read_file(r->image.layers[0].dir / "p"), "plain");
}

TEST_F(Unpacked, WhiteoutsBecomeCharacterDevicesAndOpaqueMarkersXattrs) {
  auto root = unpack({dir("etc"), file("etc/.wh.motd", ""), dir("opt"), file("opt/keep", "k"),
                      file("opt/.wh..wh..opq", "")});
  auto st = lstat_of(root / "etc/motd");
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_EQ(st.st_rdev, makedev(0, 0));
  EXPECT_FALSE(fs::exists(root / "etc/.wh.motd"));
  EXPECT_FALSE(fs::exists(root / "opt/.wh..wh..opq"));
  EXPECT_EQ(xattr(root / "opt", "user.overlay.opaque"), "y");
  if (::geteuid() == 0) {
    EXPECT_EQ(xattr(root / "opt", "trusted.overlay.opaque"), "y");
  }
  EXPECT_EQ(*read_file(root / "opt/keep"), "k");
}

TEST_F(Unpacked, OpaqueMarkerWorksWhereverItComesInTheTar) {
  auto root = unpack({file("first/.wh..wh..opq", ""), dir("first"), file("first/a", "a")});
  EXPECT_EQ(xattr(root / "first", "user.overlay.opaque"), "y");
}

TEST_F(Unpacked, ImageXattrsUserKeptOverlayTrustedSecurityDropped) {
  tar_item f = file("f", "x");
  f.xattrs = {{"user.mime_type", "text/plain"},
              {"user.overlay.redirect", "/etc"},
              {"trusted.overlay.metacopy", ""},
              {"security.capability", std::string("\x01\x00\x00\x02", 4)}};
  tar_item d = dir("d");
  d.xattrs = {{"user.overlay.opaque", "y"}, {"trusted.overlay.opaque", "y"}};
  auto root = unpack({f, d});
  EXPECT_EQ(xattr(root / "f", "user.mime_type"), "text/plain");
  EXPECT_EQ(xattr(root / "f", "user.overlay.redirect"), "<none>");
  EXPECT_EQ(xattr(root / "f", "trusted.overlay.metacopy"), "<none>");
  EXPECT_EQ(xattr(root / "f", "security.capability"), "<none>");
  // An image cannot make its own directories opaque except with .wh..wh..opq.
  EXPECT_EQ(xattr(root / "d", "user.overlay.opaque"), "<none>");
  EXPECT_EQ(xattr(root / "d", "trusted.overlay.opaque"), "<none>");
}

// A root filesystem tar (mmdebstrap, `ADD rootfs.tar`) carries /dev nodes: they are left out
// and counted, the image is not refused, and everything around them is written.
TEST_F(Unpacked, DeviceNodesAreSkippedAndCountedTheRestUnpacked) {
  const std::vector<tar_item> items{
      dir("dev"),
      {"dev/null", 'c', "", "", 0666, 1, 3},
      {"dev/console", 'c', "", "", 0600, 5, 1},
      {"dev/sda", 'b', "", "", 0660, 8, 0},
      {"dev/loop0", 'b', "", "", 0660, 0, 0},   // 0/0, but a block device: no whiteout
      {"nodir/zero", 'c', "", "", 0666, 1, 5},  // a skipped entry makes no parent either
      hardlink("dev/null-again", "dev/null"),   // a link to a skipped device goes with it
      {"dev/tty", 'c', "", "", 0666, 5, 0},
      file("dev/tty", "a later entry of the same name wins\n"),
      hardlink("dev/tty-link", "dev/tty"),  // the file now, so a link is made
      {"dev/initctl", 'p', "", "", 0600},   // a fifo is harmless: created
      dir("etc"),
      file("etc/hostname", "debian\n"),
      {"etc/gone", 'c', "", "", 0, 0, 0},  // overlayfs's whiteout form keeps its meaning
      file("etc/.wh.motd", ""),
  };
  auto s = img::store::open(test_store_options(tmp_.path() / "state"));
  ASSERT_TRUE(s) << s.error().message;
  write_oci_layout(tmp_.path() / "img", {make_layer(items)});
  auto r = s->import("oci:" + (tmp_.path() / "img").string(), {});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->devices_skipped, 7u);
  ASSERT_EQ(r->image.layers.size(), 1u);
  EXPECT_EQ(r->image.layers[0].devices_skipped, 7u);

  const fs::path root = r->image.layers[0].dir;
  for (const char* p :
       {"dev/null", "dev/console", "dev/sda", "dev/loop0", "nodir/zero", "nodir", "dev/null-again"})
    EXPECT_FALSE(fs::exists(fs::symlink_status(root / p))) << p;
  EXPECT_EQ(*read_file(root / "dev/tty"), "a later entry of the same name wins\n");
  EXPECT_EQ(lstat_of(root / "dev/tty-link").st_ino, lstat_of(root / "dev/tty").st_ino);
  EXPECT_TRUE(S_ISFIFO(lstat_of(root / "dev/initctl").st_mode));
  EXPECT_EQ(*read_file(root / "etc/hostname"), "debian\n");
  for (const char* p : {"etc/gone", "etc/motd"}) {
    auto st = lstat_of(root / p);
    EXPECT_TRUE(S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0)) << p << " is no whiteout";
  }
  // The only device nodes in the tree are the two whiteouts.
  int devices = 0;
  for (const auto& e : fs::recursive_directory_iterator(root))
    devices +=
        fs::is_character_file(e.symlink_status()) || fs::is_block_file(e.symlink_status()) ? 1 : 0;
  EXPECT_EQ(devices, 2);

  // Recorded: the layer's layer.json, the image record, and both as read back.
  auto layer_json = read_json_file(root.parent_path() / "layer.json");
  ASSERT_TRUE(layer_json);
  EXPECT_EQ((*layer_json)["devices_skipped"], 7);
  EXPECT_EQ(r->image.to_json()["layers"][0]["devices_skipped"], 7);
  auto again = img::store::open(test_store_options(tmp_.path() / "state"));
  ASSERT_TRUE(again);
  auto listed = again->list();
  ASSERT_TRUE(listed && listed->size() == 1u);
  EXPECT_EQ(listed->front().layers.at(0).devices_skipped, 7u);
  // A second import unpacks nothing, so skips nothing; the layer keeps its count.
  auto second = again->import("oci:" + (tmp_.path() / "img").string(), {});
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_EQ(second->devices_skipped, 0u);
  EXPECT_EQ(second->image.layers.at(0).devices_skipped, 7u);
}

TEST_F(Unpacked, LaterEntryOfTheSameNameWins) {
  auto root = unpack({file("f", "old"), file("f", "new"), symlink("l", "a"), symlink("l", "b")});
  EXPECT_EQ(*read_file(root / "f"), "new");
  EXPECT_EQ(fs::read_symlink(root / "l"), "b");
}

TEST(SplitEntryPath, NormalizesAndRefuses) {
  evalbox::sandbox::image::layer_limits limits;
  auto p = evalbox::sandbox::image::split_entry_path("./usr//bin/./env", limits);
  ASSERT_TRUE(p);
  EXPECT_EQ(*p, (std::vector<std::string>{"usr", "bin", "env"}));
  EXPECT_TRUE(evalbox::sandbox::image::split_entry_path("./", limits)->empty());
  EXPECT_FALSE(evalbox::sandbox::image::split_entry_path("a/../b", limits));
  EXPECT_FALSE(evalbox::sandbox::image::split_entry_path("/etc/passwd", limits));
  EXPECT_FALSE(evalbox::sandbox::image::split_entry_path(std::string(300, 'a'), limits));
  limits.max_depth = 3;
  EXPECT_FALSE(evalbox::sandbox::image::split_entry_path("a/b/c/d", limits));
}

}  // namespace
}  // namespace evalbox::testing::image
