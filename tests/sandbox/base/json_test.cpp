#include "sandbox/base/json.h"

#include <gtest/gtest.h>

namespace evalbox {
namespace {

TEST(CanonicalJson, SortsKeysAndIsCompact) {
  json j = json::parse(R"({"b":1,"a":{"d":2,"c":[3,1]}})");
  EXPECT_EQ(canonical_json(j), R"({"a":{"c":[3,1],"d":2},"b":1})");
}

TEST(ParseJson, ReportsWhereItBroke) {
  auto r = parse_json("{\"a\": ", "plan.json");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, error_kind::invalid_argument);
  EXPECT_NE(r.error().message.find("plan.json"), std::string::npos);
}

}  // namespace
}  // namespace evalbox
