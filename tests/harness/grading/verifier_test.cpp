// A Harbor task's verifier in grading: its reward files read (and refused when they say
// nothing usable), the reward as partial credit, the threshold, and a verifier that cannot be
// evaluated making grading an error rather than a failed task.
#include <gtest/gtest.h>

#include "base/json.h"
#include "harness/grading/grading.h"

namespace evalbox::harness {
namespace {

TEST(Reward, RewardTxtHoldsOneNumber) {
  for (auto [text, value] :
       {std::pair{"1", 1.0}, {"0\n", 0.0}, {" 0.75 \n", 0.75}, {"1e0", 1.0}, {"-2", -2.0}}) {
    auto r = read_reward(std::string(text), std::nullopt);
    ASSERT_TRUE(r) << text << ": " << r.error().message;
    EXPECT_EQ(r->source, "reward.txt");
    EXPECT_DOUBLE_EQ(r->rewards.at("reward"), value) << text;
  }
  for (const char* bad : {"", "\n", "one", "1 2", "0.5x", "nan", "inf", "1e999"}) {
    auto r = read_reward(std::string(bad), std::nullopt);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().message.find("not one number"), std::string::npos) << r.error().message;
  }
}

TEST(Reward, RewardTxtWinsOverRewardJson) {
  auto r = read_reward(std::string("0"), std::string(R"({"reward": 1})"));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->source, "reward.txt");
  EXPECT_DOUBLE_EQ(r->rewards.at("reward"), 0);
}

TEST(Reward, RewardJsonIsAnObjectOfNumbers) {
  auto r = read_reward(std::nullopt, std::string(R"({"reward": 0.5, "a": 1, "b": 0})"));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->source, "reward.json");
  EXPECT_EQ(r->rewards.size(), 3u);
  EXPECT_DOUBLE_EQ(run_reward(r->rewards), 0.5);
  // Without "reward", the run's reward is the mean of the named numbers.
  auto named = read_reward(std::nullopt, std::string(R"({"accuracy": 1, "style": 0.5})"));
  ASSERT_TRUE(named);
  EXPECT_DOUBLE_EQ(run_reward(named->rewards), 0.75);
  for (const char* bad :
       {"", "[]", "{}", "1", R"({"reward": "1"})", R"({"reward": null})", R"({"reward": true})",
        R"({"reward": {"x": 1}})", "{\"reward\": 1",
        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}) {
    auto bad_r = read_reward(std::nullopt, std::string(bad));
    EXPECT_FALSE(bad_r) << bad;
  }
}

TEST(Reward, NoRewardFileIsNotFound) {
  auto r = read_reward(std::nullopt, std::nullopt);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, error_kind::not_found);
  EXPECT_NE(r.error().message.find("neither /logs/verifier/reward.txt nor reward.json"),
            std::string::npos);
}

class VerifierGrading : public ::testing::Test {
 protected:
  VerifierGrading() {
    fixture_.harbor.emplace();
    check_spec c;
    c.id = "reward";
    c.kind = check_kind::verifier;
    fixture_.checks.push_back(c);
  }
  grading_result grade_with(result<verifier_outcome> out) {
    auto runner = [out](const check_spec&) { return out; };
    return grade({fixture_, transcript_, "/nonexistent", "/nonexistent", {}, runner});
  }
  static verifier_outcome rewards(std::map<std::string, double> m) {
    return {std::move(m), "reward.json"};
  }
  fixture_spec fixture_;
  transcript transcript_;
};

TEST_F(VerifierGrading, TheRewardIsTheScoreAndTheThresholdDecides) {
  auto full = grade_with(rewards({{"reward", 1}}));
  EXPECT_TRUE(full.ok && full.passed);
  EXPECT_DOUBLE_EQ(full.score, 1);
  auto partial = grade_with(rewards({{"reward", 0.75}, {"tests", 3}}));
  EXPECT_TRUE(partial.ok);
  EXPECT_FALSE(partial.passed);
  EXPECT_DOUBLE_EQ(partial.score, 0.75);
  ASSERT_TRUE(partial.reward);
  EXPECT_DOUBLE_EQ(*partial.reward, 0.75);
  EXPECT_EQ(partial.rewards.size(), 2u);
  json j = partial.to_json(1.0);
  EXPECT_EQ(j["rewards"]["tests"], 3);
  EXPECT_EQ(j["reward"], 0.75);
  EXPECT_EQ(j["checks"][0]["kind"], "verifier");
  EXPECT_EQ(j["checks"][0]["score"], 0.75);
  EXPECT_NE(j["checks"][0]["detail"].get<std::string>().find("below the threshold 1"),
            std::string::npos);
  fixture_.threshold = 0.5;
  EXPECT_TRUE(grade_with(rewards({{"reward", 0.75}})).passed);
}

TEST_F(VerifierGrading, RewardsOutsideZeroToOneKeepTheVerdictHonest) {
  fixture_.threshold = 2;
  auto high = grade_with(rewards({{"reward", 3}}));
  EXPECT_TRUE(high.passed);  // 3 reaches 2, though the score is cut to 1
  EXPECT_DOUBLE_EQ(high.score, 1);
  fixture_.threshold = 1;
  auto low = grade_with(rewards({{"reward", -1}}));
  EXPECT_FALSE(low.passed);
  EXPECT_DOUBLE_EQ(low.score, 0);
}

TEST_F(VerifierGrading, AVerifierThatCannotBeEvaluatedIsAGraderError) {
  auto g = grade_with(make_error(error_kind::expired, "the verifier timed out after 2s"));
  EXPECT_FALSE(g.ok);
  EXPECT_FALSE(g.passed);
  EXPECT_NE(g.error.find("the verifier timed out after 2s"), std::string::npos);
  EXPECT_EQ(g.to_json(1.0)["status"], "error");
  auto empty = grade_with(rewards({}));
  EXPECT_FALSE(empty.ok);
  // No runner at all (a broken composition) is an error too, never a pass.
  auto none = grade({fixture_, transcript_, "/nonexistent", "/nonexistent", {}, {}});
  EXPECT_FALSE(none.ok);
}

}  // namespace
}  // namespace evalbox::harness
