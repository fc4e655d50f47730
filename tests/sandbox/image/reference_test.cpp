// Image references: each transport parses, relative paths resolve against the naming file's
// directory, and mistakes are reported with the reference and what is accepted.
#include "sandbox/image/reference.h"

#include <gtest/gtest.h>

namespace evalbox::sandbox::image {
namespace {

TEST(Reference, OciDirectoryWithTag) {
  auto r = parse_reference("oci:/srv/images/py313:3.13", "/unused");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->kind, transport::oci);
  EXPECT_EQ(r->path, "/srv/images/py313");
  EXPECT_EQ(r->tag, "3.13");
  EXPECT_EQ(r->str(), "oci:/srv/images/py313:3.13");
}

TEST(Reference, RelativePathResolvesAgainstTheBaseDirectory) {
  auto r = parse_reference("oci:images/py313", "/work/fixtures/task");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->path, "/work/fixtures/task/images/py313");
  EXPECT_EQ(r->tag, "");
  auto up = parse_reference("oci-archive:../shared/py.tar:v1", "/work/fixtures/task");
  ASSERT_TRUE(up) << up.error().message;
  EXPECT_EQ(up->path, "/work/fixtures/shared/py.tar");
}

TEST(Reference, DockerArchiveTakesNameAndTag) {
  auto r = parse_reference("docker-archive:/x/app.tar:localhost/app:latest", "/");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->kind, transport::docker_archive);
  EXPECT_EQ(r->tag, "localhost/app:latest");
  auto bad = parse_reference("docker-archive:/x/app.tar:latest", "/");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("NAME:TAG"), std::string::npos);
}

TEST(Reference, RootfsTakesNoTag) {
  ASSERT_TRUE(parse_reference("rootfs:/srv/tree", "/"));
  auto bad = parse_reference("rootfs:/srv/tree:v1", "/");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("rootfs:/srv/tree:v1"), std::string::npos);
}

TEST(Reference, UnknownTransportNamesWhatIsAccepted) {
  auto r = parse_reference("containers-storage:busybox", "/");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, error_kind::invalid_argument);
  EXPECT_NE(r.error().message.find("containers-storage:busybox"), std::string::npos);
  EXPECT_NE(r.error().message.find("oci-archive:FILE"), std::string::npos);
  EXPECT_NE(r.error().message.find("docker://NAME"), std::string::npos);
}

// Registry names normalize as Docker's do, so that the store, run ids and credentials agree on
// one spelling whatever a fixture wrote.
TEST(RegistryReference, NormalizesAsDockerDoes) {
  struct {
    std::string_view in, out;
  } cases[] = {
      {"python", "docker://docker.io/library/python:latest"},
      {"python:3.13", "docker://docker.io/library/python:3.13"},
      {"docker://python:3.13-slim", "docker://docker.io/library/python:3.13-slim"},
      {"alexgshaw/regex-log:20251031", "docker://docker.io/alexgshaw/regex-log:20251031"},
      {"docker.io/library/busybox", "docker://docker.io/library/busybox:latest"},
      {"index.docker.io/library/busybox:1", "docker://docker.io/library/busybox:1"},
      {"registry-1.docker.io/org/x:v", "docker://docker.io/org/x:v"},
      {"ghcr.io/org/env:v1", "docker://ghcr.io/org/env:v1"},
      {"localhost/app", "docker://localhost/app:latest"},
      {"localhost:5000/a/b/c:t", "docker://localhost:5000/a/b/c:t"},
      {"127.0.0.1:5000/x", "docker://127.0.0.1:5000/x:latest"},
      {"swebench/sweb.eval.x86_64.django_1776_django-11099:latest",
       "docker://docker.io/swebench/sweb.eval.x86_64.django_1776_django-11099:latest"},
      {"a__b/c-----d", "docker://docker.io/a__b/c-----d:latest"},
  };
  for (const auto& c : cases) {
    auto r = parse_registry_reference(c.in);
    ASSERT_TRUE(r) << c.in << ": " << r.error().message;
    EXPECT_EQ(r->str(), c.out) << c.in;
    EXPECT_EQ(r->kind, transport::docker);
  }
  // parse_reference takes the same names behind docker:// (and only there).
  auto r = parse_reference("docker://python:3.13", "/");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->str(), "docker://docker.io/library/python:3.13");
  EXPECT_EQ(r->name(), "docker.io/library/python");
}

TEST(RegistryReference, ADigestNamesTheImageAndPinsIt) {
  const std::string hex(64, 'a');
  auto r = parse_registry_reference("ghcr.io/org/env@sha256:" + hex);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->digest, "sha256:" + hex);
  EXPECT_EQ(r->tag, "");  // no :latest when a digest names it
  EXPECT_EQ(r->str(), "docker://ghcr.io/org/env@sha256:" + hex);
  auto both = parse_registry_reference("python:3.13@sha256:" + hex);
  ASSERT_TRUE(both);
  EXPECT_EQ(both->str(), "docker://docker.io/library/python:3.13@sha256:" + hex);
  EXPECT_EQ(both->pinned("sha256:" + std::string(64, 'b')),
            "docker://docker.io/library/python@sha256:" + std::string(64, 'b'));
}

TEST(RegistryReference, AliasesApplyToShortNamesOnly) {
  std::vector<std::pair<std::string, std::string>> aliases{{"py", "quay.io/team/python"}};
  EXPECT_EQ(parse_registry_reference("py:3", aliases)->str(), "docker://quay.io/team/python:3");
  EXPECT_EQ(parse_registry_reference("other/py:3", aliases)->str(),
            "docker://docker.io/other/py:3");
}

TEST(RegistryReference, MalformedNamesAreRefusedWithTheReason) {
  struct {
    std::string_view in, why;
  } cases[] = {
      {"", "no image name"},
      {"docker://", "no image name"},
      {"Python:3", "lowercase"},
      {"org/Python", "lowercase"},
      {"python:", "not a valid tag"},
      {"python:.hidden", "not a valid tag"},
      {"python:a b", "space"},
      {"python@sha256:abc", "64 lowercase hex"},
      {"python@md5:0123", "64 lowercase hex"},
      {"ghcr.io/", "no repository"},
      {"-bad/x", "not a valid repository component"},
      {"a..b/x", "not a valid registry host"},  // a "." makes the first part a host
      {"bad_host.-x.io/x", "not a valid registry host"},
      {"host.io:99999999/x", "not a valid registry host"},
      {"x/../y", "not a valid repository component"},
  };
  for (const auto& c : cases) {
    auto r = parse_registry_reference(c.in);
    ASSERT_FALSE(r) << c.in << " was accepted as " << r->str();
    EXPECT_EQ(r.error().kind, error_kind::invalid_argument);
    EXPECT_NE(r.error().message.find(c.why), std::string::npos)
        << c.in << ": " << r.error().message;
  }
  EXPECT_FALSE(parse_registry_reference(std::string(300, 'a')));  // longer than 255
  EXPECT_FALSE(parse_registry_reference("x:" + std::string(129, 't')));
}

TEST(Reference, EmptyPathAndBadTagAreRefused) {
  EXPECT_FALSE(parse_reference("oci:", "/"));
  EXPECT_FALSE(parse_reference("oci:/x:bad tag", "/"));
  EXPECT_FALSE(parse_reference("oci:/x:", "/"));
}

}  // namespace
}  // namespace evalbox::sandbox::image
