// OCI and Docker image documents: parsing is strict (types, digests, media types), and the
// manifest chosen from an index is the one for the tag and this host's platform.
#include "sandbox/image/oci.h"

#include <gtest/gtest.h>

namespace evalbox::sandbox::image {
namespace {

const std::string digest_a = "sha256:" + std::string(64, 'a');
const std::string digest_b = "sha256:" + std::string(64, 'b');

descriptor entry(std::string digest, std::string tag, std::optional<platform> p) {
  descriptor d;
  d.media_type = "application/vnd.oci.image.manifest.v1+json";
  d.digest = std::move(digest);
  d.size = 10;
  d.ref_name = std::move(tag);
  d.plat = std::move(p);
  return d;
}

// --platform: what a pull of a multi-platform image is asked to choose.
TEST(Oci, PlatformsParseAsOsArchVariant) {
  auto p = parse_platform("linux/arm64");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->str(), "linux/arm64");
  EXPECT_EQ(p->variant, "");
  auto v = parse_platform("linux/arm/v7");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->architecture, "arm");
  EXPECT_EQ(v->variant, "v7");
  for (std::string_view bad : {"", "linux", "linux/", "/amd64", "linux/arm/v7/x", "linux//v7",
                               "linux/amd 64", "linux/amd64\n"}) {
    auto r = parse_platform(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().kind, error_kind::invalid_argument);
    EXPECT_NE(r.error().message.find("OS/ARCH[/VARIANT]"), std::string::npos);
  }
}

TEST(Oci, ParsesAManifestWithDockerMediaTypes) {
  std::string text = R"({"schemaVersion":2,
    "mediaType":"application/vnd.docker.distribution.manifest.v2+json",
    "config":{"mediaType":"application/vnd.docker.container.image.v1+json","digest":")" +
                     digest_a + R"(","size":7},
    "layers":[{"mediaType":"application/vnd.docker.image.rootfs.diff.tar.gzip","digest":")" +
                     digest_b + R"(","size":9}]})";
  auto m = parse_manifest(text, "m");
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->config.digest, digest_a);
  ASSERT_EQ(m->layers.size(), 1u);
  EXPECT_EQ(m->layers[0].size, 9);
}

TEST(Oci, RefusesAnUnknownLayerMediaType) {
  std::string text =
      R"({"schemaVersion":2,"config":{"digest":")" + digest_a +
      R"(","size":7},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+encrypted","digest":")" +
      digest_b + R"(","size":9}]})";
  auto m = parse_manifest(text, "m");
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("+encrypted"), std::string::npos);
}

TEST(Oci, RefusesBadDigestsAndTypes) {
  EXPECT_FALSE(digest_hex("sha256:abc", "x"));
  EXPECT_FALSE(digest_hex("md5:" + std::string(32, 'a'), "x"));
  EXPECT_FALSE(parse_index(R"({"schemaVersion":2,"manifests":[{"digest":1,"size":1}]})", "i"));
  EXPECT_FALSE(parse_index(R"({"schemaVersion":"2","manifests":[]})", "i"));
  EXPECT_FALSE(parse_config(R"({"architecture":"amd64","os":"linux","rootfs":{"type":"x"}})", "c"));
}

TEST(Oci, RefusesOversizedDocuments) {
  std::string huge(max_json_bytes + 1, ' ');
  auto r = parse_index(huge, "index.json");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("larger than"), std::string::npos);
}

TEST(Oci, ConfigGivesHowARunStarts) {
  auto c = parse_config(R"({"architecture":"amd64","os":"linux",
      "config":{"Env":["PATH=/bin"],"Entrypoint":["/init"],"Cmd":["sh"],"WorkingDir":"/w","User":"1000"},
      "rootfs":{"type":"layers","diff_ids":[")" +
                            digest_a + R"("]}})",
                        "c");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->env, std::vector<std::string>{"PATH=/bin"});
  EXPECT_EQ(c->entrypoint, std::vector<std::string>{"/init"});
  EXPECT_EQ(c->cmd, std::vector<std::string>{"sh"});
  EXPECT_EQ(c->working_dir, "/w");
  EXPECT_EQ(c->user, "1000");
  EXPECT_EQ(c->diff_ids, std::vector<std::string>{digest_a});
}

TEST(Oci, SelectsTheHostPlatformAmongSeveral) {
  platform host{"linux", "amd64", ""};
  index_doc idx;
  idx.manifests = {entry(digest_b, "", platform{"linux", "arm64", "v8"}),
                   entry(digest_a, "", platform{"linux", "amd64", ""})};
  auto d = select_manifest(idx, "", host, "oci:/x");
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(d->digest, digest_a);
}

TEST(Oci, OnlyAnotherPlatformNamesBoth) {
  platform host{"linux", "amd64", ""};
  index_doc idx;
  idx.manifests = {entry(digest_b, "", platform{"linux", "arm64", ""})};
  auto d = select_manifest(idx, "", host, "oci:/x");
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message.find("linux/arm64"), std::string::npos);
  EXPECT_NE(d.error().message.find("linux/amd64"), std::string::npos);
  EXPECT_NE(d.error().message.find("oci:/x"), std::string::npos);
}

TEST(Oci, TagSelectsAndAnUnknownTagListsTheTags) {
  platform host{"linux", "amd64", ""};
  index_doc idx;
  idx.manifests = {entry(digest_a, "v1", std::nullopt), entry(digest_b, "v2", std::nullopt)};
  auto v2 = select_manifest(idx, "v2", host, "oci:/x");
  ASSERT_TRUE(v2);
  EXPECT_EQ(v2->digest, digest_b);
  auto none = select_manifest(idx, "v3", host, "oci:/x");
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("v1, v2"), std::string::npos);
  auto ambiguous = select_manifest(idx, "", host, "oci:/x");
  ASSERT_FALSE(ambiguous);
  EXPECT_NE(ambiguous.error().message.find(":TAG"), std::string::npos);
}

}  // namespace
}  // namespace evalbox::sandbox::image
