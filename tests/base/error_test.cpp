#include "base/error.h"

#include <gtest/gtest.h>

namespace evalbox {
namespace {

result<int> fails() { return sys_error(EPERM, "mount(\"/a\", \"/b\", MS_BIND)"); }
result<int> propagates() {
  int v = EB_TRY_CTX(fails(), "prepare run x");
  return v + 1;
}
result<int> succeeds() {
  int v = EB_TRY(result<int>(41));
  return v + 1;
}

TEST(Error, SysErrorNamesTheCallAndErrno) {
  auto r = fails();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, error_kind::permission);
  EXPECT_EQ(r.error().sys_errno, EPERM);
  EXPECT_EQ(r.error().message, "mount(\"/a\", \"/b\", MS_BIND): EPERM");
}

TEST(Error, TryAddsContextOnTheWayUp) {
  auto r = propagates();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "prepare run x: mount(\"/a\", \"/b\", MS_BIND): EPERM");
  EXPECT_EQ(r.error().kind, error_kind::permission);
}

TEST(Error, TryPassesValues) { EXPECT_EQ(*succeeds(), 42); }

TEST(Error, KindsFromErrno) {
  EXPECT_EQ(kind_from_errno(ENOENT), error_kind::not_found);
  EXPECT_EQ(kind_from_errno(EBUSY), error_kind::busy);
  EXPECT_EQ(kind_from_errno(ENOSYS), error_kind::unsupported);
}

}  // namespace
}  // namespace evalbox
