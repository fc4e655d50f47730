// Base64: the RFC 4648 test vectors both ways, every byte value round-trips, and the strict
// decoder refuses what is not canonical base64.
#include "base/base64.h"

#include <gtest/gtest.h>

#include <string>

namespace evalbox {
namespace {

TEST(Base64, EncodesTheRfcVectors) {
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode("foob"), "Zm9vYg==");
  EXPECT_EQ(base64_encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
}

TEST(Base64, DecodesTheRfcVectors) {
  EXPECT_EQ(base64_decode("").value(), "");
  EXPECT_EQ(base64_decode("Zg==").value(), "f");
  EXPECT_EQ(base64_decode("Zm8=").value(), "fo");
  EXPECT_EQ(base64_decode("Zm9vYmFy").value(), "foobar");
}

TEST(Base64, EveryByteRoundTrips) {
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  for (size_t len = 0; len <= all.size(); len += 37) {
    const std::string part = all.substr(0, len);
    auto back = base64_decode(base64_encode(part));
    ASSERT_TRUE(back);
    EXPECT_EQ(*back, part);
  }
  EXPECT_EQ(base64_decode(base64_encode(all)).value(), all);
}

TEST(Base64, RefusesWhatIsNotCanonical) {
  for (const char* bad : {"Zg=", "Z===", "Zm=v", "Zm9v\n", "Zm9v YmFy", "Zm9-", "Zh==", "Zm9=Zm9v"})
    EXPECT_FALSE(base64_decode(bad)) << bad;
}

}  // namespace
}  // namespace evalbox
