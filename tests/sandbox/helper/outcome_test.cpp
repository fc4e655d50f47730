// The precedence among outcomes (docs/run-record.md): an OOM kill anywhere in the run is
// oom_killed even when the main process survives it or exits on its own afterwards.
#include "sandbox/helper/outcome.h"

#include <gtest/gtest.h>
#include <signal.h>

namespace evalbox::sandbox::helper {
namespace {

constexpr int exited_with(int code) { return (code & 0xff) << 8; }  // a wait status
constexpr int killed_by(int sig) { return sig; }

run_end exit_of(int status) {
  run_end e;
  e.wait_status = status;
  return e;
}

TEST(DecideOutcome, AnExitIsExitedWithItsCode) {
  auto d = decide_outcome(exit_of(exited_with(3)));
  EXPECT_EQ(d.outcome, outcome_kind::exited);
  EXPECT_EQ(d.exit_code, 3);
  d = decide_outcome(exit_of(killed_by(SIGSEGV)));
  EXPECT_EQ(d.outcome, outcome_kind::signaled);
  EXPECT_EQ(d.signal, SIGSEGV);
}

// bash whose python3 child was OOM-killed exits 137 on its own: still oom_killed.
TEST(DecideOutcome, AnOomKillOfAChildWinsOverTheMainProcessExit) {
  for (int status : {exited_with(137), exited_with(0), killed_by(SIGKILL), killed_by(SIGTERM)}) {
    auto e = exit_of(status);
    e.oom_kills = 1;
    auto d = decide_outcome(e);
    EXPECT_EQ(d.outcome, outcome_kind::oom_killed) << status;
    EXPECT_TRUE(d.error.empty());
  }
}

TEST(DecideOutcome, AnOomKillWinsOverEvalboxsOwnLimitKillsButNotACancel) {
  for (auto forced :
       {outcome_kind::timed_out, outcome_kind::cpu_limit, outcome_kind::output_limit}) {
    run_end e = exit_of(killed_by(SIGKILL));
    e.forced = forced;
    EXPECT_EQ(decide_outcome(e).outcome, forced) << to_string(forced);
    e.oom_kills = 2;
    EXPECT_EQ(decide_outcome(e).outcome, outcome_kind::oom_killed) << to_string(forced);
  }
  run_end e = exit_of(killed_by(SIGKILL));
  e.forced = outcome_kind::cancelled;
  e.oom_kills = 1;
  EXPECT_EQ(decide_outcome(e).outcome, outcome_kind::cancelled);
}

TEST(DecideOutcome, Pid1GoneWithoutAReportIsOomKilledOrAnError) {
  run_end e;
  e.init_status = killed_by(SIGKILL);
  e.oom_kills = 1;
  EXPECT_EQ(decide_outcome(e).outcome, outcome_kind::oom_killed);
  e.oom_kills = 0;
  auto d = decide_outcome(e);
  EXPECT_FALSE(d.outcome);
  EXPECT_EQ(d.error_step, "init");
  EXPECT_NE(d.error.find("killed by signal 9 from outside the sandbox"), std::string::npos);
}

TEST(DecideOutcome, SigxcpuOrAKillPastTheCpuLimitIsCpuLimit) {
  EXPECT_EQ(decide_outcome(exit_of(killed_by(SIGXCPU))).outcome, outcome_kind::cpu_limit);
  run_end e = exit_of(killed_by(SIGKILL));
  e.cpu_limit_ms = 1000;
  e.cpu_ms = 999;
  EXPECT_EQ(decide_outcome(e).outcome, outcome_kind::signaled);
  e.cpu_ms = 1000;
  EXPECT_EQ(decide_outcome(e).outcome, outcome_kind::cpu_limit);
}

}  // namespace
}  // namespace evalbox::sandbox::helper
