// json_get.h: the one accessor for JSON from files and programs. Every refusal names the key
// and says what was wrong; nothing throws, whatever the document holds.
#include "base/json_get.h"

#include <gtest/gtest.h>

#include <limits>

namespace evalbox {
namespace {

const json doc = json::parse(R"({
  "name": "run", "count": 3, "neg": -5, "big": 1e300, "huge": 18446744073709551615,
  "ok": true, "ratio": 0.25, "null": null, "argv": ["a", "b"], "mixed": ["a", 1],
  "env": {"A": "1"}, "env_bad": {"A": 1}, "nested": {"inner": {"x": 1}}
})");

std::string message_of(const error& e) { return e.message; }

TEST(JsonGet, ReadsEachTypeItNames) {
  EXPECT_EQ(json_get<std::string>(doc, "name").value(), "run");
  EXPECT_EQ(json_get<int>(doc, "count").value(), 3);
  EXPECT_EQ(json_get<int64_t>(doc, "neg").value(), -5);
  EXPECT_EQ(json_get<bool>(doc, "ok").value(), true);
  EXPECT_DOUBLE_EQ(json_get<double>(doc, "ratio").value(), 0.25);
  EXPECT_DOUBLE_EQ(json_get<double>(doc, "count").value(), 3.0) << "an integer is a number";
  EXPECT_EQ(json_get<std::vector<std::string>>(doc, "argv").value(),
            (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ((json_get<std::map<std::string, std::string>>(doc, "env").value()),
            (std::map<std::string, std::string>{{"A", "1"}}));
  EXPECT_EQ(json_get<json>(doc, "nested").value(), json::parse(R"({"inner":{"x":1}})"));
}

TEST(JsonGet, AMissingFieldIsAnErrorNamingIt) {
  auto r = json_get<std::string>(doc, "absent");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, error_kind::invalid_argument);
  EXPECT_EQ(message_of(r.error()), "missing field 'absent'");
  EXPECT_FALSE(json_get<int>(json::array({1, 2}), "count")) << "not an object";
  EXPECT_FALSE(json_get<int>(json(), "count")) << "null";
}

TEST(JsonGet, AFieldOfAnotherTypeIsRefusedNotConverted) {
  EXPECT_EQ(message_of(json_get<int>(doc, "name").error()),
            "field 'name' is a string, not an integer");
  EXPECT_EQ(message_of(json_get<std::string>(doc, "count").error()),
            "field 'count' is a number, not a string");
  EXPECT_EQ(message_of(json_get<bool>(doc, "count").error()),
            "field 'count' is a number, not a boolean");
  EXPECT_FALSE(json_get<int>(doc, "ratio")) << "a fraction is not an integer";
  EXPECT_FALSE(json_get<int>(doc, "big")) << "1e300 is a float, not an integer";
  EXPECT_EQ(message_of(json_get<std::vector<std::string>>(doc, "mixed").error()),
            "field 'mixed' is an array, not a list of strings");
  EXPECT_FALSE((json_get<std::map<std::string, std::string>>(doc, "env_bad")));
  EXPECT_FALSE(json_get<std::string>(doc, "null")) << "null is not a string";
}

TEST(JsonGet, IntegersOutsideTheTypeAreRefusedNotWrapped) {
  EXPECT_EQ(message_of(json_get<uint64_t>(doc, "neg").error()), "field 'neg' is out of range: -5");
  EXPECT_FALSE(json_get<int64_t>(doc, "huge"));
  EXPECT_EQ(json_get<uint64_t>(doc, "huge").value(), std::numeric_limits<uint64_t>::max());
  EXPECT_FALSE(json_get<uint8_t>(json{{"n", 256}}, "n"));
  EXPECT_EQ(json_get<uint8_t>(json{{"n", 255}}, "n").value(), 255);
}

TEST(JsonGet, ContextNamesWhatWasBeingRead) {
  auto read = [](const json& j) -> result<int> {
    return EB_TRY_CTX(json_get<int>(j, "seq"), "launch plan");
  };
  EXPECT_EQ(read(json::object()).error().message, "launch plan: missing field 'seq'");
}

TEST(JsonGetOptional, MissingAndNullAreNothingButAWrongTypeIsStillAnError) {
  EXPECT_EQ(json_get_optional<std::string>(doc, "absent").value(), std::nullopt);
  EXPECT_EQ(json_get_optional<std::string>(doc, "null").value(), std::nullopt);
  EXPECT_EQ(json_get_optional<int>(doc, "count").value(), 3);
  EXPECT_FALSE(json_get_optional<int>(doc, "name"));
}

TEST(JsonValueOr, TakesAnyShapeAndFallsBack) {
  EXPECT_EQ(json_value_or(doc, "name", "?"), "run");
  EXPECT_EQ(json_value_or(doc, "count", "?"), "?");
  EXPECT_EQ(json_value_or(doc, "absent", 7), 7);
  EXPECT_EQ(json_value_or<uint64_t>(doc, "neg", 9), 9u) << "out of range falls back";
  EXPECT_EQ(json_value_or(json("text"), "name", "?"), "?") << "not an object";
}

TEST(JsonFind, IsNothingForAnyShapeItCannotRead) {
  EXPECT_EQ(json_find<std::string>(doc, "name"), "run");
  EXPECT_EQ(json_find<std::string>(doc, "count"), std::nullopt);
  EXPECT_EQ(json_find<uint64_t>(doc, "neg"), std::nullopt) << "a negative count is no count";
  EXPECT_EQ(json_find<int>(doc, "huge"), std::nullopt) << "not wrapped into an int";
  EXPECT_EQ(json_find<double>(doc, "count"), 3.0);
  EXPECT_EQ(json_find<bool>(doc, "absent"), std::nullopt);
}

TEST(JsonMember, ChainsThroughMissingLevelsWithoutUndefinedBehaviour) {
  EXPECT_EQ(json_member(json_member(json_member(doc, "nested"), "inner"), "x"), 1);
  EXPECT_TRUE(json_member(json_member(doc, "absent"), "inner").is_null());
  EXPECT_TRUE(json_member(json(42), "x").is_null());
  EXPECT_TRUE(json_member(doc, "null").is_null());
}

}  // namespace
}  // namespace evalbox
