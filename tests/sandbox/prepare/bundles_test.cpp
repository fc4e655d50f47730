// The bundle store: a directory or tar verified against its tree digest once, when it enters
// the store, and found there after without reading its source again; a mismatch names both
// digests and keeps nothing; `bundle digest` gives a tar the digest of the tree it unpacks to.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>

#include <fmt/format.h>

#include "base/digest.h"
#include "base/fs.h"
#include "sandbox/prepare/preparer.h"
#include "sandbox/spec/request.h"

namespace evalbox::sandbox {
namespace {

namespace fs = std::filesystem;

class bundle_store : public ::testing::Test {
 protected:
  void SetUp() override {
    lib_ = tmp_.path() / "reflib";
    ASSERT_TRUE(make_dirs(lib_ / "include", 0755));
    ASSERT_TRUE(write_file(lib_ / "include" / "ref.h", "int ref(void);\n", 0644));
    ASSERT_TRUE(write_file(lib_ / "run.sh", "#!/bin/sh\necho ref\n", 0755));
    ASSERT_EQ(::symlink("include/ref.h", (lib_ / "ref.h").c_str()), 0);
    options_ = default_preparer_options();
    options_.state_root = tmp_.path() / "state";
  }
  std::vector<std::string> store_entries() const {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(bundle_store_dir(options_.state_root), ec))
      out.push_back(e.path().filename().string());
    return out;
  }
  temp_dir tmp_{"evalbox-bundles"};
  fs::path lib_;
  preparer_options options_;
};

TEST_F(bundle_store, a_directorys_digest_is_its_tree_digest) {
  auto d = bundle_digest(lib_);
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(*d, "sha256:" + tree_digest(lib_).value());
}

TEST_F(bundle_store, a_tar_has_the_digest_of_the_tree_it_unpacks_to) {
  const fs::path tar = tmp_.path() / "reflib.tar";
  ASSERT_EQ(std::system(fmt::format("tar -C '{}' -cf '{}' .", lib_.string(), tar.string()).c_str()),
            0);
  auto d = bundle_digest(tar);
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(*d, "sha256:" + tree_digest(lib_).value());
  const fs::path gz = tmp_.path() / "reflib.tar.gz";
  ASSERT_EQ(std::system(fmt::format("gzip -c '{}' > '{}'", tar.string(), gz.string()).c_str()), 0);
  EXPECT_EQ(bundle_digest(gz).value_or(""), *d);
}

TEST_F(bundle_store, a_bundle_is_verified_once_and_found_in_the_store_after) {
  const std::string digest = bundle_digest(lib_).value();
  preparer prep(options_);
  auto tree = prep.resolve_bundle(lib_, digest);
  ASSERT_TRUE(tree) << tree.error().message;
  EXPECT_EQ(*tree, bundle_store_dir(options_.state_root) / digest.substr(7) / "tree");
  EXPECT_EQ("sha256:" + tree_digest(*tree).value(), digest);
  // Found without its source: the store's copy is what runs see.
  ASSERT_TRUE(remove_tree(lib_));
  auto again = prep.resolve_bundle(lib_, digest);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(*again, *tree);
  EXPECT_EQ(store_entries(), std::vector<std::string>{digest.substr(7)});
}

TEST_F(bundle_store, a_tar_enters_the_store_unpacked) {
  const fs::path tar = tmp_.path() / "reflib.tar";
  ASSERT_EQ(std::system(fmt::format("tar -C '{}' -cf '{}' .", lib_.string(), tar.string()).c_str()),
            0);
  preparer prep(options_);
  auto tree = prep.resolve_bundle(tar, bundle_digest(tar).value());
  ASSERT_TRUE(tree) << tree.error().message;
  EXPECT_EQ(read_file(*tree / "include" / "ref.h").value_or(""), "int ref(void);\n");
  EXPECT_TRUE(fs::is_symlink(*tree / "ref.h"));
}

TEST_F(bundle_store, a_mismatch_names_both_digests_and_keeps_nothing) {
  const std::string digest = bundle_digest(lib_).value();
  ASSERT_TRUE(write_file(lib_ / "run.sh", "#!/bin/sh\necho changed\n", 0755));
  const std::string now = bundle_digest(lib_).value();
  preparer prep(options_);
  auto tree = prep.resolve_bundle(lib_, digest);
  ASSERT_FALSE(tree);
  EXPECT_EQ(tree.error().kind, error_kind::invalid_argument);
  EXPECT_NE(tree.error().message.find("expected " + digest), std::string::npos)
      << tree.error().message;
  EXPECT_NE(tree.error().message.find("found " + now), std::string::npos) << tree.error().message;
  EXPECT_TRUE(store_entries().empty());
}

TEST_F(bundle_store, a_malformed_digest_is_refused) {
  preparer prep(options_);
  for (const char* d : {"", "sha256:abc", "md5:0123", "9f2c"}) {
    auto tree = prep.resolve_bundle(lib_, d);
    ASSERT_FALSE(tree) << d;
    EXPECT_EQ(tree.error().kind, error_kind::invalid_argument);
  }
}

}  // namespace
}  // namespace evalbox::sandbox
