// run_suite without a sandbox: its attempts replaced through runner_options::attempt, the
// runner's own rules are seen end to end without root — every run recorded once, resumed runs
// skipped, infrastructure errors retried and task failures never, a cancel recording nothing
// unfinished, the tally and progress matching the records, and runs on one credential held
// to its max_concurrent, their wait recorded.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "base/fs.h"
#include "base/json.h"
#include "harness/results/record.h"
#include "harness/results/results.h"
#include "harness/runner/execute.h"
#include "harness/runner/runner.h"
#include "harness/runner/suite_run.h"

namespace evalbox::harness {
namespace {

namespace fs = std::filesystem;

class RunSuite : public ::testing::Test {
 protected:
  void SetUp() override {
    suite_.name = "s";
    suite_.file = dir_.path() / "suite.yaml";
    suite_.trials = 2;
    for (const char* id : {"a", "b"}) {
      fixture_spec f;
      f.id = id;
      f.dir = dir_.path() / "fixtures" / id;
      f.digest = std::string(64, id[0]);
      suite_.fixtures.push_back(std::move(f));
    }
    candidate_spec c;
    c.id = "agent";
    c.adapter = "command";
    suite_.candidates.push_back(std::move(c));
    options_.results_dir = dir_.path() / "results";
    options_.sandbox.state_root = dir_.path() / "state";
    options_.concurrency = 2;
    options_.protect_host_home = false;
  }

  std::vector<run_spec> plan() {
    auto runs = plan_runs(suite_, {});
    EXPECT_TRUE(runs) << runs.error().message;
    return runs.value_or(std::vector<run_spec>{});
  }

  // What every attempt does first, as execute_attempt does: a fresh run directory.
  static attempt_state begin(const execution_context& x, const run_spec& r) {
    EXPECT_TRUE(make_dirs(x.results.run_dir(r.run_id)));
    return attempt_state{};
  }

  // Attempts that pass on fixture a and fail on b, counting every call.
  attempt_function scripted(std::map<std::string, int>& calls) {
    return [this, &calls](const execution_context& x, const run_spec& r, int,
                          std::optional<sandbox::prepared_session>&) {
      std::lock_guard lock(mu_);
      ++calls[r.run_id];
      attempt_state st = begin(x, r);
      st.verdict = suite_.fixtures[r.fixture].id == "a" ? run_verdict::passed : run_verdict::failed;
      return st;
    };
  }

  std::vector<recorded_run> records() {
    auto all = results_dir(options_.results_dir).read_records();
    EXPECT_TRUE(all) << all.error().message;
    std::vector<recorded_run> out;
    for (const auto& j : all.value_or(std::vector<json>{})) out.push_back(read_recorded_run(j));
    return out;
  }

  temp_dir dir_{"evalbox-run-suite"};
  suite_spec suite_;
  runner_options options_;
  adapter_registry adapters_;
  std::mutex mu_;
};

TEST_F(RunSuite, RecordsEveryRunOnceAndTalliesWhatItRecorded) {
  std::map<std::string, int> calls;
  options_.attempt = scripted(calls);
  std::vector<progress> seen;
  std::mutex seen_mu;
  options_.on_progress = [&](const progress& p) {
    std::lock_guard lock(seen_mu);
    seen.push_back(p);
  };
  auto runs = plan();
  ASSERT_EQ(runs.size(), 4u);
  auto totals = run_suite(suite_, runs, adapters_, options_);
  ASSERT_TRUE(totals) << totals.error().message;
  EXPECT_EQ(totals->planned, 4);
  EXPECT_EQ(totals->passed, 2);
  EXPECT_EQ(totals->failed, 2);
  auto recorded = records();
  ASSERT_EQ(recorded.size(), 4u);
  for (const auto& r : recorded) {
    EXPECT_EQ(calls[r.run_id], 1) << r.run_id;
    EXPECT_EQ(r.ending, r.fixture_id == "a" ? run_ending::passed : run_ending::task_failed);
  }
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen.back().done, 4);
  EXPECT_EQ(seen.back().passed + seen.back().failed, 4);
}

TEST_F(RunSuite, AResumedSuiteSkipsWhatIsRecorded) {
  std::map<std::string, int> calls;
  options_.attempt = scripted(calls);
  auto runs = plan();
  ASSERT_TRUE(run_suite(suite_, {runs[0]}, adapters_, options_));
  auto again = run_suite(suite_, runs, adapters_, options_);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->skipped, 1);
  EXPECT_EQ(calls[runs[0].run_id], 1) << "a recorded run is not run again";
  EXPECT_EQ(records().size(), 4u);
  options_.resume = false;
  ASSERT_TRUE(run_suite(suite_, {runs[0]}, adapters_, options_));
  EXPECT_EQ(calls[runs[0].run_id], 2) << "--no-resume runs it again";
}

TEST_F(RunSuite, RetriesInfrastructureErrorsButNeverTaskFailures) {
  std::map<std::string, int> calls;
  options_.retries = 2;
  options_.attempt = [&](const execution_context& x, const run_spec& r, int attempt,
                         std::optional<sandbox::prepared_session>&) {
    std::lock_guard lock(mu_);
    ++calls[r.run_id];
    attempt_state st = begin(x, r);
    if (suite_.fixtures[r.fixture].id == "a" && attempt == 0)
      st.fail(run_error_kind::sandbox, "mount: EBUSY");  // passes on the second attempt
    else
      st.verdict = suite_.fixtures[r.fixture].id == "a" ? run_verdict::passed : run_verdict::failed;
    return st;
  };
  auto runs = plan();
  auto totals = run_suite(suite_, runs, adapters_, options_);
  ASSERT_TRUE(totals) << totals.error().message;
  EXPECT_EQ(totals->passed, 2);
  EXPECT_EQ(totals->execution_errors, 0);
  for (const auto& r : records())
    EXPECT_EQ(calls[r.run_id], r.fixture_id == "a" ? 2 : 1) << r.fixture_id;
}

TEST_F(RunSuite, AnAgentErrorIsRecordedAsAnExecutionErrorWithoutRetry) {
  std::map<std::string, int> calls;
  options_.retries = 3;
  options_.attempt = [&](const execution_context& x, const run_spec& r, int,
                         std::optional<sandbox::prepared_session>&) {
    std::lock_guard lock(mu_);
    ++calls[r.run_id];
    attempt_state st = begin(x, r);
    st.fail(run_error_kind::agent, "the client exited 1");
    return st;
  };
  auto totals = run_suite(suite_, plan(), adapters_, options_);
  ASSERT_TRUE(totals) << totals.error().message;
  EXPECT_EQ(totals->execution_errors, 4);
  for (const auto& r : records()) {
    EXPECT_EQ(r.ending, run_ending::execution_error);
    EXPECT_EQ(r.error, "the client exited 1");
    EXPECT_EQ(calls[r.run_id], 1) << "an agent's failure would happen again";
  }
}

TEST_F(RunSuite, ACancelRecordsNothingUnfinished) {
  sandbox::cancel_token cancel;
  options_.cancel = &cancel;
  options_.concurrency = 1;
  std::atomic<int> started{0};
  options_.attempt = [&](const execution_context& x, const run_spec& r, int,
                         std::optional<sandbox::prepared_session>&) {
    attempt_state st = begin(x, r);
    if (++started == 2) {  // Ctrl-C while the second run is under way
      cancel.requested = true;
      st.cancelled = true;
      return st;
    }
    st.verdict = run_verdict::passed;
    return st;
  };
  auto totals = run_suite(suite_, plan(), adapters_, options_);
  ASSERT_TRUE(totals) << totals.error().message;
  EXPECT_EQ(started.load(), 2) << "no run starts after the cancel";
  EXPECT_EQ(records().size(), 1u) << "only the run that finished before it";
}

TEST_F(RunSuite, TheReportsAndTheExitStatusComeFromTheRecords) {
  std::map<std::string, int> calls;
  auto runs = plan();
  options_.attempt = scripted(calls);
  auto done = run_and_report(suite_, runs, adapters_, options_);
  ASSERT_TRUE(done) << done.error().message;
  EXPECT_EQ(done->totals.planned, 4);
  EXPECT_EQ(done->planned.worst(), run_ending::task_failed);
  EXPECT_EQ(exit_status(done->planned.worst()), exit_task_failed);
  EXPECT_EQ(done->planned_without_record, 0u);
  ASSERT_TRUE(done->summary);
  EXPECT_TRUE(fs::exists(options_.results_dir / "report.md"));
  EXPECT_TRUE(fs::exists(options_.results_dir / "summary.json"));
}

// The host home is a protected root of every session run_suite prepares, whoever calls it
// (not only the command line): the attempts see it in their context's options.
TEST_F(RunSuite, EveryAttemptSeesTheHostHomeProtected) {
  const auto home = host_home();
  if (!home) GTEST_SKIP() << "HOME is unset or /: there is no home to protect";
  ASSERT_FALSE(is_within(options_.results_dir, *home)) << "the test's results lie in the home";
  options_.protect_host_home = true;
  std::vector<fs::path> seen;
  options_.attempt = [&](const execution_context& x, const run_spec& r, int,
                         std::optional<sandbox::prepared_session>&) {
    std::lock_guard lock(mu_);
    seen = x.options.protected_roots;
    attempt_state st = begin(x, r);
    st.verdict = run_verdict::passed;
    return st;
  };
  ASSERT_TRUE(run_suite(suite_, plan(), adapters_, options_));
  EXPECT_NE(std::find(seen.begin(), seen.end(), *home), seen.end()) << home->string();
}

// Stopped before any run starts, a suite run is a cancelled outcome with nothing recorded, not
// an error.
TEST_F(RunSuite, ACancelBeforeAnyRunIsAnOutcomeNotAnError) {
  sandbox::cancel_token cancel;
  cancel.requested = true;
  options_.cancel = &cancel;
  auto done = run_and_report(suite_, plan(), adapters_, options_);
  ASSERT_TRUE(done) << done.error().message;
  EXPECT_TRUE(done->cancelled);
  EXPECT_EQ(done->totals.passed + done->totals.failed, 0);
  EXPECT_TRUE(records().empty());
}

// `evalbox cache warm --cache NAME`: a name no fixture declares is refused (not_found, listing
// those declared) before any image or sandbox is touched; a suite without caches, or an `only`
// that selects none, warms nothing and prepares nothing.
TEST_F(RunSuite, WarmingRefusesAnUndeclaredCacheNameAndWarmsNothingWithoutCaches) {
  EXPECT_TRUE(declared_cache_names(suite_).empty());
  auto none = warm_suite(suite_, options_, {}, false);
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_TRUE(none->per_fixture.empty());
  EXPECT_EQ(none->warmed, 0);
  auto undeclared = warm_suite(suite_, options_, {"pip"}, false);
  ASSERT_FALSE(undeclared);
  EXPECT_EQ(undeclared.error().kind, error_kind::not_found);
  EXPECT_NE(undeclared.error().message.find("names a cache pip (it names none)"), std::string::npos)
      << undeclared.error().message;

  cache_spec pip;
  pip.name = "pip";
  pip.target = "/home/agent/.cache/pip";
  suite_.fixtures[0].caches.push_back(pip);
  pip.name = "npm";
  suite_.fixtures[1].caches.push_back(pip);
  EXPECT_EQ(declared_cache_names(suite_), (std::set<std::string>{"npm", "pip"}));
  EXPECT_TRUE(check_cache_names(suite_, {"pip", "npm"}));
  auto typo = check_cache_names(suite_, {"pip", "pipp"});
  ASSERT_FALSE(typo);
  EXPECT_NE(typo.error().message.find("names a cache pipp (it names: npm, pip)"), std::string::npos)
      << typo.error().message;
  EXPECT_FALSE(warm_suite(suite_, options_, {"pipp"}, false));
  EXPECT_FALSE(fs::exists(options_.sandbox.state_root)) << "nothing was prepared";
}

// Runs of a candidate with one credential, on four workers: attempts that count how many of
// them run at once (each waits up to 5 s for `want` of them to be running together, so that a
// runner allowing fewer shows as fewer) and leave the rest to the runner.
class CredentialRuns : public RunSuite {
 protected:
  void SetUp() override {
    RunSuite::SetUp();
    suite_.candidates[0].credentials = {"key"};
    suite_.credentials["key"] = dir_.path() / "key";
    options_.concurrency = 4;
  }
  attempt_function counting(int want) {
    return [this, want](const execution_context& x, const run_spec& r, int,
                        std::optional<sandbox::prepared_session>&) {
      attempt_state st = begin(x, r);
      std::unique_lock lock(mu_);
      max_on_ = std::max(max_on_, ++on_);
      together_.notify_all();
      together_.wait_for(lock, std::chrono::seconds(5), [&] { return on_ >= want; });
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      lock.lock();
      --on_;
      st.verdict = run_verdict::passed;
      return st;
    };
  }
  // timings.credential_wait_ms of each record (-1 when absent).
  std::vector<double> waits() {
    auto all = results_dir(options_.results_dir).read_records();
    EXPECT_TRUE(all) << all.error().message;
    std::vector<double> out;
    for (const auto& j : all.value_or(std::vector<json>{}))
      out.push_back(j.at("timings").value("credential_wait_ms", -1.0));
    return out;
  }
  std::condition_variable together_;
  int on_ = 0, max_on_ = 0;
};

TEST_F(CredentialRuns, ACredentialWithMaxConcurrentTwoServesTwoRunsAtOnce) {
  suite_.shared_credentials["key"] = {2, {}};
  options_.attempt = counting(2);
  auto totals = run_suite(suite_, plan(), adapters_, options_);
  ASSERT_TRUE(totals) << totals.error().message;
  EXPECT_EQ(totals->passed, 4);
  EXPECT_EQ(max_on_, 2) << "two at once, never more, on four workers";
}

TEST_F(CredentialRuns, ACredentialIsOneRunAtATimeByDefaultAndTheWaitIsRecorded) {
  options_.attempt = counting(1);
  auto totals = run_suite(suite_, plan(), adapters_, options_);
  ASSERT_TRUE(totals) << totals.error().message;
  EXPECT_EQ(totals->passed, 4);
  EXPECT_EQ(max_on_, 1);
  auto w = waits();
  ASSERT_EQ(w.size(), 4u);
  EXPECT_EQ(std::count_if(w.begin(), w.end(), [](double ms) { return ms < 0; }), 0)
      << "every run of a candidate with credentials says how long it waited";
  // Four free workers, one login: the three runs passed over at the start each waited for
  // those before them (50 ms or more each).
  EXPECT_EQ(std::count_if(w.begin(), w.end(), [](double ms) { return ms >= 40; }), 3);
}

TEST_F(CredentialRuns, ARunWithoutCredentialsRecordsNoCredentialWait) {
  suite_.candidates[0].credentials.clear();
  options_.attempt = counting(1);
  ASSERT_TRUE(run_suite(suite_, plan(), adapters_, options_));
  for (double ms : waits()) EXPECT_EQ(ms, -1.0);
}

}  // namespace
}  // namespace evalbox::harness
