#include "base/digest.h"

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "base/fs.h"

namespace evalbox {
namespace {

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // FIPS 180-2's long vector: a million 'a's, in updates that straddle the 64-byte blocks.
  sha256 h;
  const std::string part(999, 'a');
  for (int i = 0; i < 1000; ++i) h.update(part);
  h.update(std::string(1000, 'a'));
  EXPECT_EQ(h.hex_digest(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, IncrementalEqualsOneShot) {
  sha256 h;
  h.update("a").update("bc");
  EXPECT_EQ(h.hex_digest(), sha256_hex("abc"));
}

TEST(Sha256, FileDigestMatchesContent) {
  temp_dir dir;
  ASSERT_TRUE(write_file(dir.path() / "f", "abc"));
  EXPECT_EQ(*sha256_file(dir.path() / "f"), sha256_hex("abc"));
  EXPECT_FALSE(sha256_file(dir.path() / "missing"));
}

class TreeDigest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(make_dirs(dir_.path() / "t/sub"));
    ASSERT_TRUE(write_file(dir_.path() / "t/a.txt", "alpha"));
    ASSERT_TRUE(write_file(dir_.path() / "t/sub/b.txt", "beta"));
    ASSERT_EQ(::symlink("a.txt", (dir_.path() / "t/link").c_str()), 0);
  }
  std::filesystem::path tree() const { return dir_.path() / "t"; }
  temp_dir dir_;
};

TEST_F(TreeDigest, IsStableAcrossCalls) { EXPECT_EQ(*tree_digest(tree()), *tree_digest(tree())); }

TEST_F(TreeDigest, ChangesWithContent) {
  auto before = *tree_digest(tree());
  ASSERT_TRUE(write_file(tree() / "sub/b.txt", "BETA"));
  EXPECT_NE(*tree_digest(tree()), before);
}

TEST_F(TreeDigest, ChangesWithMode) {
  auto before = *tree_digest(tree());
  ASSERT_EQ(::chmod((tree() / "a.txt").c_str(), 0755), 0);
  EXPECT_NE(*tree_digest(tree()), before);
}

TEST_F(TreeDigest, ChangesWithSymlinkTarget) {
  auto before = *tree_digest(tree());
  ASSERT_EQ(::unlink((tree() / "link").c_str()), 0);
  ASSERT_EQ(::symlink("sub/b.txt", (tree() / "link").c_str()), 0);
  EXPECT_NE(*tree_digest(tree()), before);
}

TEST_F(TreeDigest, ChangesWithRename) {
  auto before = *tree_digest(tree());
  ASSERT_EQ(::rename((tree() / "a.txt").c_str(), (tree() / "c.txt").c_str()), 0);
  EXPECT_NE(*tree_digest(tree()), before);
}

TEST_F(TreeDigest, DoesNotFollowSymlinksOutOfTheTree) {
  ASSERT_TRUE(write_file(dir_.path() / "outside", "secret"));
  ASSERT_EQ(::symlink((dir_.path() / "outside").c_str(), (tree() / "out").c_str()), 0);
  auto before = *tree_digest(tree());
  ASSERT_TRUE(write_file(dir_.path() / "outside", "changed"));
  EXPECT_EQ(*tree_digest(tree()), before);
}

TEST(Sha256Hex, Validates) {
  EXPECT_TRUE(is_sha256_hex(sha256_hex("x")));
  EXPECT_FALSE(is_sha256_hex("abc"));
  EXPECT_FALSE(is_sha256_hex(std::string(64, 'G')));
  EXPECT_FALSE(is_sha256_hex(std::string(64, 'A')));  // uppercase is not canonical
}

}  // namespace
}  // namespace evalbox
