#include "base/log.h"

#include <gtest/gtest.h>

namespace evalbox {
namespace {

TEST(Log, ScrubsRegisteredSecrets) {
  log::redact_secret("sk-test-0123456789");
  EXPECT_EQ(log::scrub("token sk-test-0123456789 and sk-test-0123456789"),
            "token <redacted> and <redacted>");
}

TEST(Log, IgnoresTooShortSecrets) {
  log::redact_secret("ab");
  EXPECT_EQ(log::scrub("ab cd"), "ab cd");
}

TEST(Log, SecretNeverReachesStderr) {
  log::redact_secret("hunter2-super-secret");
  ::testing::internal::CaptureStderr();
  log::error("failed with {}", "hunter2-super-secret");
  std::string out = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(out.find("hunter2"), std::string::npos);
  EXPECT_NE(out.find("<redacted>"), std::string::npos);
}

}  // namespace
}  // namespace evalbox
