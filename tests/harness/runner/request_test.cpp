// The phase "request" without a sandbox: what a run's session request hides from the agent
// (grader files always, the fixture's solution unless the plan runs it), in which order
// environments override each other, and the limits, network and bundles it asks for.
#include "harness/runner/execute.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "sandbox/base/fs.h"

namespace evalbox::harness {
namespace {

namespace fs = std::filesystem;

class SessionRequest : public ::testing::Test {
 protected:
  void SetUp() override {
    fixture_.dir = dir_.path() / "fx";
    fixture_.id = "fx";
    fixture_.digest = "fd";
    fixture_.has_grader = true;
    fixture_.has_solution = true;
    fixture_.limits.wall_ms = 60'000;
    candidate_.id = "c";
    candidate_.adapter = "command";
    plan_.argv = {"/bin/agent", "go"};
    plan_.home.adapter = "command";
  }
  result<sandbox::session_request> request() {
    return make_session_request({fixture_,
                                 candidate_,
                                 plan_,
                                 suite_limits_,
                                 "run-0-00000001",
                                 {"/host/home", "/results"},
                                 "bd"});
  }
  static bool has(const std::vector<fs::path>& roots, const fs::path& p) {
    return std::find(roots.begin(), roots.end(), p) != roots.end();
  }
  temp_dir dir_;
  fixture_spec fixture_;
  candidate_spec candidate_;
  agent_plan plan_;
  limits_spec suite_limits_;
};

TEST_F(SessionRequest, HidesTheGraderAndTheSolutionFromAnAgent) {
  auto req = request();
  ASSERT_TRUE(req) << req.error().message;
  EXPECT_TRUE(has(req->protected_roots, "/host/home"));
  EXPECT_TRUE(has(req->protected_roots, "/results"));
  EXPECT_TRUE(has(req->protected_roots, fixture_.dir / "grader"));
  EXPECT_TRUE(has(req->protected_roots, fixture_.dir / "solution"));
}

TEST_F(SessionRequest, APlanThatRunsTheSolutionSeesItButNeverTheGrader) {
  plan_.runs_fixture_solution = true;
  auto req = request();
  ASSERT_TRUE(req) << req.error().message;
  EXPECT_FALSE(has(req->protected_roots, fixture_.dir / "solution"));
  EXPECT_TRUE(has(req->protected_roots, fixture_.dir / "grader"));
}

TEST_F(SessionRequest, AFixtureWithoutGraderOrSolutionProtectsOnlyTheGivenRoots) {
  fixture_.has_grader = fixture_.has_solution = false;
  auto req = request();
  ASSERT_TRUE(req);
  EXPECT_EQ(req->protected_roots, (std::vector<fs::path>{"/host/home", "/results"}));
}

TEST_F(SessionRequest, TheCandidatesEnvironmentOverridesThePlansWhichOverridesTheBase) {
  plan_.env = {{"PATH", "/plan/bin"}, {"A", "plan"}, {"B", "plan"}};
  candidate_.env = {{"B", "candidate"}};
  auto req = request();
  ASSERT_TRUE(req);
  EXPECT_EQ(req->env.at("PATH"), "/plan/bin");
  EXPECT_EQ(req->env.at("A"), "plan");
  EXPECT_EQ(req->env.at("B"), "candidate");
  EXPECT_EQ(req->env.at("HOME"), "/home/agent");  // from the base environment
}

TEST_F(SessionRequest, HomeFilesAreReadIntoTheHome) {
  ASSERT_TRUE(write_file(dir_.path() / "x.toml", "x = 1\n"));
  candidate_.home_files[".config/x.toml"] = dir_.path() / "x.toml";
  auto req = request();
  ASSERT_TRUE(req);
  ASSERT_EQ(req->home.files.size(), 1u);
  EXPECT_EQ(req->home.files[0].path, ".config/x.toml");
  EXPECT_EQ(req->home.files[0].content, "x = 1\n");
  candidate_.home_files[".config/y.toml"] = dir_.path() / "missing.toml";
  auto missing = request();
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("missing.toml"), std::string::npos);
}

TEST_F(SessionRequest, LimitsNetworkAndBundlesComeFromFixtureCandidateAndSuite) {
  suite_limits_.wall_ms = 5'000;
  suite_limits_.memory_bytes = 1 << 20;
  fixture_.has_bin = true;
  fixture_.network.mode = network_spec::mode_kind::allow;
  fixture_.network.allow = {"api.example.com:443"};
  auto before = std::chrono::system_clock::now();
  auto req = request();
  ASSERT_TRUE(req);
  EXPECT_EQ(req->run_id, "run-0-00000001");
  EXPECT_EQ(req->limits.wall_ms, 60'000u);        // the fixture's own wins
  EXPECT_EQ(req->limits.memory_bytes, 1u << 20);  // the suite's default
  EXPECT_EQ(req->network.mode, sandbox::network_mode::allow);
  EXPECT_EQ(req->network.allow, std::vector<std::string>{"api.example.com:443"});
  ASSERT_EQ(req->bundles.size(), 1u);
  EXPECT_EQ(req->bundles[0].target, "/evalbox/bin");
  EXPECT_EQ(req->bundles[0].sha256, "bd");
  EXPECT_GE(req->authorized_until,
            before + std::chrono::hours(1) + std::chrono::milliseconds(4 * 60'000));
  EXPECT_EQ(req->workspace.source, fixture_.dir / "workspace");
  EXPECT_EQ(req->workspace.digest, "fd");
  // A candidate's own network wins over the fixture's.
  candidate_.network = network_spec{};
  req = request();
  ASSERT_TRUE(req);
  EXPECT_EQ(req->network.mode, sandbox::network_mode::none);
}

}  // namespace
}  // namespace evalbox::harness
