// Hostile images: each bad input is refused with an error naming the image and what was wrong
// (the entry, the digest), leaves no partial layer, and writes nothing outside the store —
// the store and a canary directory beside it are byte-for-byte as they were.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include "tests/sandbox/image/image_test_support.h"

namespace evalbox::testing::image {
namespace {

namespace fs = std::filesystem;

class Hostile : public ::testing::Test {
 protected:
  void SetUp() override {
    canary_ = tmp_.path() / "canary";
    ASSERT_TRUE(make_dirs(canary_));
    ASSERT_TRUE(write_file(canary_ / "secret", "host data\n", 0600));
    auto s = img::store::open(options());
    ASSERT_TRUE(s) << s.error().message;
    store_.emplace(std::move(*s));
    // A populated store: "unchanged" then means more than "still empty".
    write_oci_layout(tmp_.path() / "good", {make_layer({file("etc/ok", "ok\n")})});
    auto good = store_->import("oci:" + (tmp_.path() / "good").string(), {});
    ASSERT_TRUE(good) << good.error().message;
    before_store_ = snapshot(tmp_.path() / "state");
    before_canary_ = snapshot(canary_);
  }

  virtual img::store_options options() { return test_store_options(tmp_.path() / "state"); }

  // Writes an OCI layout of `layers` and expects its import to fail mentioning every needle.
  void expect_refused(const std::vector<layer>& layers, const std::vector<std::string>& needles,
                      const layout_options& lo = {}) {
    fs::path dir = tmp_.path() / "image";
    write_oci_layout(dir, layers, lo);
    expect_refused_ref("oci:" + dir.string(), needles);
  }

  void expect_refused_ref(const std::string& ref, const std::vector<std::string>& needles) {
    auto r = store_->import(ref, {});
    ASSERT_FALSE(r) << "imported a hostile image";
    EXPECT_NE(r.error().message.find(ref), std::string::npos)
        << "the error does not name the image: " << r.error().message;
    for (const auto& n : needles)
      EXPECT_NE(r.error().message.find(n), std::string::npos)
          << "the error does not say '" << n << "': " << r.error().message;
    EXPECT_EQ(snapshot(tmp_.path() / "state"), before_store_) << "the store changed";
    EXPECT_EQ(snapshot(canary_), before_canary_) << "the canary changed";
    for (const auto& e : fs::directory_iterator(tmp_.path() / "state/images/layers"))
      EXPECT_FALSE(e.path().filename().string().starts_with(".tmp-")) << e.path();
  }

  // A layer that writes a good file first, then `bad`: the partial layer must go.
  std::vector<layer> one(std::vector<tar_item> bad, const std::string& compression = "gzip") {
    std::vector<tar_item> items{dir("usr"), file("usr/first", "written before the bad entry")};
    items.insert(items.end(), bad.begin(), bad.end());
    return {make_layer(items, compression)};
  }

  temp_dir tmp_{"evalbox-image-hostile"};
  fs::path canary_;
  std::optional<img::store> store_;
  std::string before_store_;
  std::string before_canary_;
};

TEST_F(Hostile, DotDotComponentIsRefused) {
  expect_refused(one({file("usr/../../../../../../canary/pwned", "x")}),
                 {"usr/../../../../../../canary/pwned", "\"..\""});
}

TEST_F(Hostile, AbsolutePathIsRefused) {
  std::string target = (canary_ / "pwned").string();
  expect_refused(one({file(target, "x")}), {target, "absolute"});
}

TEST_F(Hostile, EntryThroughAnAbsoluteSymlinkIsRefused) {
  expect_refused(one({symlink("usr/evil", canary_.string()), file("usr/evil/pwned", "x")}),
                 {"usr/evil/pwned", "symlink"});
}

TEST_F(Hostile, EntryThroughARelativeSymlinkIsRefused) {
  expect_refused(one({symlink("usr/up", "../../../../../../.."),
                      file("usr/up/" + canary_.relative_path().string() + "/pwned", "x")}),
                 {"symlink"});
}

TEST_F(Hostile, DirectoryThroughASymlinkIsRefused) {
  expect_refused(one({symlink("usr/evil", canary_.string()), dir("usr/evil/sub")}),
                 {"usr/evil/sub", "symlink"});
}

TEST_F(Hostile, HardLinkToAnAbsolutePathOutsideIsRefused) {
  expect_refused(one({hardlink("usr/stolen", (canary_ / "secret").string())}),
                 {"usr/stolen", "absolute"});
}

TEST_F(Hostile, HardLinkWithDotDotIsRefused) {
  expect_refused(one({hardlink("usr/stolen", "../../../../../../canary/secret")}),
                 {"usr/stolen", "\"..\""});
}

TEST_F(Hostile, HardLinkToAnEntryNotInThisLayerIsRefused) {
  expect_refused(one({hardlink("usr/stolen", "etc/ok")}),
                 {"usr/stolen", "not an entry of this layer"});
}

TEST_F(Hostile, HardLinkThroughASymlinkIsRefused) {
  expect_refused(
      one({symlink("usr/evil", canary_.string()), hardlink("usr/stolen", "usr/evil/secret")}),
      {"usr/stolen", "symlink"});
}

// Device nodes are skipped rather than refused (tree_writer.h): none is ever created, and a
// device's path is checked like any other.
TEST_F(Hostile, DeviceNodesAreNeverCreated) {
  fs::path dir = tmp_.path() / "image";
  write_oci_layout(dir, one({{"usr/mem", 'c', "", "", 0666, 1, 1},
                             {"usr/disk", 'b', "", "", 0666, 8, 0},
                             hardlink("usr/mem-again", "usr/mem"),
                             {"usr/kmsg", 'c', "", "", 0666, 1, 11}}));
  auto r = store_->import("oci:" + dir.string(), {});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->devices_skipped, 4u);
  const fs::path root = r->image.layers.at(0).dir;
  EXPECT_EQ(*read_file(root / "usr/first"), "written before the bad entry");
  for (const char* p : {"usr/mem", "usr/disk", "usr/mem-again", "usr/kmsg"})
    EXPECT_FALSE(fs::exists(fs::symlink_status(root / p))) << p;
  for (const auto& e : fs::recursive_directory_iterator(tmp_.path() / "state"))
    EXPECT_FALSE(fs::is_character_file(e.symlink_status()) || fs::is_block_file(e.symlink_status()))
        << e.path();
  EXPECT_EQ(snapshot(canary_), before_canary_) << "the canary changed";
}

TEST_F(Hostile, DeviceNodeWithDotDotIsRefused) {
  expect_refused(one({{"usr/../../../../../../canary/null", 'c', "", "", 0666, 1, 3}}),
                 {"usr/../../../../../../canary/null", "\"..\""});
}

TEST_F(Hostile, DeviceNodeAtAnAbsolutePathIsRefused) {
  std::string target = (canary_ / "disk").string();
  expect_refused(one({{target, 'b', "", "", 0660, 8, 0}}), {target, "absolute"});
}

TEST_F(Hostile, HardLinkToADeviceOutsideIsRefused) {
  expect_refused(one({{"usr/null", 'c', "", "", 0666, 1, 3}, hardlink("usr/zero", "/dev/zero")}),
                 {"usr/zero", "absolute"});
}

TEST_F(Hostile, CompressedDigestMismatchIsRefused) {
  auto layers = one({file("usr/x", "x")});
  // The blob stored under the manifest's digest is another valid gzip of the same tar, of the
  // same size: only its header's MTIME differs.
  std::string tampered = layers[0].blob;
  tampered[4] = static_cast<char>(tampered[4] ^ 0x5a);
  layout_options lo;
  lo.stored_blob_override = {{0, tampered}};
  expect_refused(layers, {"layer digest mismatch", sha256_digest(layers[0].blob)}, lo);
}

TEST_F(Hostile, DiffIdMismatchIsRefused) {
  layout_options lo;
  lo.diff_id_override = {{0, sha256_digest("not this layer")}};
  expect_refused(one({file("usr/x", "x")}), {"diff_id", sha256_digest("not this layer")}, lo);
}

TEST_F(Hostile, BlobOfTheWrongSizeIsRefused) {
  auto layers = one({file("usr/x", "x")});
  layout_options lo;
  lo.stored_blob_override = {{0, layers[0].blob + "trailing"}};
  expect_refused(layers, {"bytes"}, lo);
}

// The corrupt streams below carry correct digests (computed over the damaged bytes): the
// refusal must come from decompression itself.
std::vector<layer> damaged(std::string (*compress)(const std::string&), bool truncate,
                           const std::string& media) {
  std::string tar = make_tar({dir("usr"), file("usr/big", std::string(200000, 'a') + "end")});
  std::string blob = compress(tar);
  if (truncate) {
    blob.resize(blob.size() / 2);
  } else {
    for (size_t i = blob.size() / 3; i < blob.size() / 3 + 16; ++i)
      blob[i] = static_cast<char>(~blob[i]);
  }
  return {layer{tar, blob, media}};
}

TEST_F(Hostile, TruncatedGzipIsRefused) {
  expect_refused(damaged(gzip, true, "application/vnd.oci.image.layer.v1.tar+gzip"), {"layer 1/1"});
}

TEST_F(Hostile, CorruptGzipIsRefused) {
  expect_refused(damaged(gzip, false, "application/vnd.oci.image.layer.v1.tar+gzip"),
                 {"layer 1/1"});
}

TEST_F(Hostile, TruncatedZstdIsRefused) {
  expect_refused(damaged(zstd, true, "application/vnd.oci.image.layer.v1.tar+zstd"), {"layer 1/1"});
}

TEST_F(Hostile, CorruptZstdIsRefused) {
  expect_refused(damaged(zstd, false, "application/vnd.oci.image.layer.v1.tar+zstd"),
                 {"layer 1/1"});
}

TEST_F(Hostile, IndexThatIsNotJsonIsRefused) {
  layout_options lo;
  lo.raw_index = "{\"schemaVersion\": 2, \"manifests\": [";
  expect_refused(one({file("usr/x", "x")}), {"index.json"}, lo);
}

TEST_F(Hostile, ManifestThatIsNotJsonIsRefused) {
  layout_options lo;
  lo.raw_manifest = "this is not json";
  expect_refused(one({file("usr/x", "x")}), {"manifest"}, lo);
}

TEST_F(Hostile, ManifestNamingAMissingLayerBlobIsRefused) {
  layout_options lo;
  lo.omit_layer_blobs = true;
  expect_refused(one({file("usr/x", "x")}), {"blobs/sha256/"}, lo);
}

TEST_F(Hostile, IndexNamingAMissingManifestIsRefused) {
  layout_options lo;
  lo.omit_manifest_blob = true;
  expect_refused(one({file("usr/x", "x")}), {"missing"}, lo);
}

TEST_F(Hostile, ManifestForAnotherArchitectureIsRefused) {
  layout_options lo;
  lo.index_platform_arch = "riscv64";
  lo.architecture = "riscv64";
  const std::string host = "linux/" + img::host_platform().architecture;
  expect_refused(one({file("usr/x", "x")}), {"linux/riscv64", host}, lo);
}

TEST_F(Hostile, ConfigForAnotherArchitectureIsRefused) {
  layout_options lo;
  lo.architecture = "s390x";
  const std::string host = "linux/" + img::host_platform().architecture;
  expect_refused(one({file("usr/x", "x")}), {"linux/s390x", host}, lo);
}

TEST_F(Hostile, AFifoPlantedAsABlobIsRefusedWithoutHanging) {
  fs::path dir = tmp_.path() / "image";
  auto layers = one({file("usr/x", "x")});
  write_oci_layout(dir, layers);
  fs::path blob = dir / "blobs/sha256" / sha256_digest(layers[0].blob).substr(7);
  fs::remove(blob);
  ASSERT_EQ(::mkfifo(blob.c_str(), 0644), 0);
  expect_refused_ref("oci:" + dir.string(), {"not a regular file"});
}

TEST_F(Hostile, DockerArchiveWithAnEscapingEntryIsRefused) {
  fs::path tar = tmp_.path() / "docker.tar";
  write_docker_archive(tar, one({file("../../escape", "x")}), "localhost/evil:latest");
  expect_refused_ref("docker-archive:" + tar.string(), {"../../escape"});
}

// The copy fallback deletes files (whiteouts, opaque directories): never outside the tree.
class HostileFlatten : public Hostile {
 protected:
  img::store_options options() override {
    auto o = Hostile::options();
    o.whiteout = sys::whiteout_form::copy;
    return o;
  }
};

TEST_F(HostileFlatten, WhiteoutThroughASymlinkDeletesNothingOutside) {
  expect_refused(one({symlink("usr/evil", canary_.string()), file("usr/evil/.wh.secret", "")}),
                 {"usr/evil/.wh.secret", "symlink"});
}

TEST_F(HostileFlatten, OpaqueMarkerThroughASymlinkDeletesNothingOutside) {
  expect_refused(one({symlink("usr/evil", canary_.string()), file("usr/evil/.wh..wh..opq", "")}),
                 {"usr/evil/.wh..wh..opq", "symlink"});
}

TEST_F(HostileFlatten, WhiteoutOfDotDotIsRefused) {
  expect_refused(one({file("usr/.wh...", "")}), {"usr/.wh...", "no name"});
}

// Limits: small in these tests, so that the bomb stays small too.
class Bomb : public Hostile {
 protected:
  img::store_options options() override {
    auto o = Hostile::options();
    o.limits.max_bytes = 1u << 20;
    o.limits.max_entries = 100;
    return o;
  }
};

TEST_F(Bomb, LayerExpandingPastTheByteLimitIsRefused) {
  // 64 MiB of zeros: a gzip blob of about 64 KiB.
  auto layers = one({file("usr/zeros", std::string(64u << 20, '\0'))});
  ASSERT_LT(layers[0].blob.size(), 1u << 20);
  expect_refused(layers, {"usr/zeros", "limit of 1048576 bytes"});
}

TEST_F(Bomb, LayerWithTooManyEntriesIsRefused) {
  std::vector<tar_item> many;
  for (int i = 0; i < 150; ++i) many.push_back(file("usr/f" + std::to_string(i), ""));
  expect_refused(one(many), {"more than 100 entries"});
}

}  // namespace
}  // namespace evalbox::testing::image
