// execute_attempt without a sandbox: the phases before the first launch, each ending the
// attempt the way run.json must say — which error kind, whether a retry may help — and the
// run directory a crashed earlier attempt left started afresh.
#include "harness/runner/execute.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "base/fs.h"

namespace evalbox::harness {
namespace {

namespace fs = std::filesystem;

// An adapter whose plan is what the test says: an error, an exception, or a command.
class scripted_adapter : public adapter {
 public:
  enum class does { fail, raise, plan };
  explicit scripted_adapter(does d) : does_(d) {}
  std::string_view id() const override { return "scripted"; }
  std::vector<config_error> validate(const candidate_spec&) const override { return {}; }
  result<agent_plan> plan(const run_context&) const override {
    if (does_ == does::fail) return make_error(error_kind::invalid_argument, "cannot plan: no key");
    if (does_ == does::raise) throw std::runtime_error("boom");
    agent_plan p;
    p.argv = {"/bin/true"};
    return p;
  }
  result<transcript> read_transcript(const run_context&,
                                     const std::vector<agent_output>&) const override {
    return transcript{};
  }

 private:
  does does_;
};

class ExecuteAttempt : public ::testing::Test {
 protected:
  void SetUp() override {
    suite_.name = "s";
    suite_.file = dir_.path() / "suite.yaml";
    fixture_spec f;
    f.id = "a";
    f.dir = dir_.path() / "fixtures" / "a";  // no workspace/: nothing to prepare from
    f.digest = std::string(64, 'a');
    suite_.fixtures.push_back(std::move(f));
    candidate_spec c;
    c.id = "agent";
    c.adapter = "scripted";
    suite_.candidates.push_back(std::move(c));
    options_.results_dir = dir_.path() / "results";
    options_.sandbox.state_root = dir_.path() / "state";
    ASSERT_TRUE(make_dirs(options_.results_dir));
  }

  attempt_state run(scripted_adapter::does d) {
    adapter_registry adapters;
    adapters.add(std::make_unique<scripted_adapter>(d));
    sandbox::preparer preparer(options_.sandbox);
    const results_dir results(options_.results_dir);
    const std::vector<std::string> bin_digests(1);
    const std::vector<std::optional<sandbox::image_summary>> images(1);
    const execution_context x{suite_, adapters, options_, preparer, results, bin_digests, images};
    run_ = plan_runs(suite_, {})->front();
    auto st = execute_attempt(x, run_, 0, session_);
    EXPECT_FALSE(session_) << "no session outlives a refused preparation";
    return st;
  }
  fs::path run_dir() const { return options_.results_dir / "runs" / run_.run_id; }

  temp_dir dir_;
  suite_spec suite_;
  runner_options options_;
  run_spec run_;
  std::optional<sandbox::prepared_session> session_;
};

TEST_F(ExecuteAttempt, AnUnknownAdapterIsTheAdaptersErrorInAFreshRunDirectory) {
  suite_.candidates[0].adapter = "nosuch";
  run_ = plan_runs(suite_, {})->front();
  ASSERT_TRUE(make_dirs(run_dir()));
  ASSERT_TRUE(write_file(run_dir() / "left-by-a-crash.txt", "x"));
  auto st = run(scripted_adapter::does::plan);
  ASSERT_TRUE(st.error_kind);
  EXPECT_EQ(*st.error_kind, run_error_kind::adapter);
  EXPECT_EQ(st.error, "no adapter named 'nosuch'");
  EXPECT_FALSE(fs::exists(run_dir() / "left-by-a-crash.txt")) << "a crashed attempt's files";
  EXPECT_TRUE(fs::is_directory(run_dir() / "native"));
}

TEST_F(ExecuteAttempt, APlanTheAdapterRefusesIsTheAdaptersError) {
  auto st = run(scripted_adapter::does::fail);
  ASSERT_TRUE(st.error_kind);
  EXPECT_EQ(*st.error_kind, run_error_kind::adapter);
  EXPECT_EQ(st.error, "cannot plan: no key");
  EXPECT_FALSE(st.infrastructure()) << "a retry would plan the same";
}

TEST_F(ExecuteAttempt, AnExceptionInAPhaseEndsTheAttemptAsAnErrorNotRetried) {
  auto st = run(scripted_adapter::does::raise);
  ASSERT_TRUE(st.error_kind);
  EXPECT_EQ(*st.error_kind, run_error_kind::host);
  EXPECT_EQ(st.error, "internal error: boom");
  EXPECT_FALSE(st.retryable);
}

TEST_F(ExecuteAttempt, APreparationThePreparerRefusesEndsBeforeAnyLaunch) {
  auto st = run(scripted_adapter::does::plan);
  ASSERT_TRUE(st.error_kind) << "a fixture without a workspace cannot be prepared";
  EXPECT_EQ(*st.error_kind, run_error_kind::sandbox) << st.error;
  EXPECT_TRUE(st.records.empty()) << "nothing was launched";
  EXPECT_EQ(st.verdict, run_verdict::not_assessed);
}

}  // namespace
}  // namespace evalbox::harness
