// The request's vocabulary: each network mode has one name, parsed back by network_mode_from
// and nothing else.
#include "sandbox/spec/request.h"

#include <gtest/gtest.h>

namespace evalbox::sandbox {
namespace {

TEST(NetworkMode, EachNameParsesBackToItsMode) {
  for (network_mode m : {network_mode::none, network_mode::allow, network_mode::host})
    EXPECT_EQ(network_mode_from(to_string(m)), m) << to_string(m);
  static_assert(network_mode_from("allow") == network_mode::allow);
}

TEST(NetworkMode, AnyOtherTextIsNoMode) {
  for (std::string_view text : {"", "Host", "NONE", "none ", " allow", "hostnet", "unsafe"})
    EXPECT_FALSE(network_mode_from(text)) << '"' << text << '"';
}

}  // namespace
}  // namespace evalbox::sandbox
