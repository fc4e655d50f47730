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
  auto r = parse_reference("docker://busybox", "/");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, error_kind::invalid_argument);
  EXPECT_NE(r.error().message.find("docker://busybox"), std::string::npos);
  EXPECT_NE(r.error().message.find("oci-archive:FILE"), std::string::npos);
}

TEST(Reference, EmptyPathAndBadTagAreRefused) {
  EXPECT_FALSE(parse_reference("oci:", "/"));
  EXPECT_FALSE(parse_reference("oci:/x:bad tag", "/"));
  EXPECT_FALSE(parse_reference("oci:/x:", "/"));
}

}  // namespace
}  // namespace evalbox::sandbox::image
