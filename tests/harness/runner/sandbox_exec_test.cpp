// `evalbox sandbox exec` without a sandbox: the exit status of every way a run ends, what is
// said on the way out, --network's syntax, and the usage errors caught before anything is
// prepared.
#include "harness/runner/sandbox_exec.h"

#include <gtest/gtest.h>
#include <signal.h>

#include "base/fs.h"
#include "harness/runner/exit_status.h"

namespace evalbox::harness {
namespace {

using sandbox::outcome_kind;
using sandbox::run_record;

run_record ended(outcome_kind kind, int exit_code = 0, int signal = 0) {
  run_record r;
  r.outcome = kind;
  r.exit_code = exit_code;
  r.signal = signal;
  return r;
}

TEST(ExecExitStatus, EveryOutcomeHasItsStatus) {
  EXPECT_EQ(exit_code_for(ended(outcome_kind::exited, 0)), 0);
  EXPECT_EQ(exit_code_for(ended(outcome_kind::exited, 3)), 3);
  EXPECT_EQ(exit_code_for(ended(outcome_kind::signaled, 0, SIGSEGV)), 128 + SIGSEGV);
  EXPECT_EQ(exit_code_for(ended(outcome_kind::timed_out)), 124);
  EXPECT_EQ(exit_code_for(ended(outcome_kind::cpu_limit)), 128 + SIGXCPU);
  EXPECT_EQ(exit_code_for(ended(outcome_kind::oom_killed)), 128 + SIGKILL);
  EXPECT_EQ(exit_code_for(ended(outcome_kind::output_limit)), 128 + SIGPIPE);
  EXPECT_EQ(exit_code_for(ended(outcome_kind::cancelled)), exit_sigint);
  EXPECT_EQ(exit_code_for(ended(static_cast<outcome_kind>(99))), exit_internal);
}

TEST(ExecExitStatus, AMissingProgramIsTheCommandsMistakeOtherErrorsTheSandboxs) {
  run_record missing;
  missing.error_step = "execve /usr/bin/nope";
  missing.error = "execve: ENOENT";
  EXPECT_EQ(exec_exit_status(missing), exit_not_found);
  run_record broken;
  broken.error_step = "mount /proc";
  broken.error = "mount: EPERM";
  EXPECT_EQ(exec_exit_status(broken), exit_sandbox_error);
  run_record denied;
  denied.error_step = "execve /bin/x";
  denied.error = "execve: EACCES";
  EXPECT_EQ(exec_exit_status(denied), exit_sandbox_error);
  EXPECT_EQ(exec_exit_status(ended(outcome_kind::exited, 7)), 7);
}

TEST(ExecEndingLine, NamesTheLimitThatKilledTheProgram) {
  exec_options o;
  o.command = {"nope"};
  o.wall = "30s";
  o.cpu = "5s";
  o.memory = "512MiB";
  EXPECT_EQ(exec_ending_line(o, ended(outcome_kind::timed_out)),
            "killed: wall-time limit of 30s reached");
  EXPECT_EQ(exec_ending_line(o, ended(outcome_kind::cpu_limit)),
            "killed: CPU-time limit of 5s reached");
  EXPECT_EQ(exec_ending_line(o, ended(outcome_kind::oom_killed)),
            "killed: memory limit of 512MiB reached");
  EXPECT_EQ(exec_ending_line(o, ended(outcome_kind::cancelled)), "cancelled");
  EXPECT_EQ(exec_ending_line(o, ended(outcome_kind::exited, 1)), std::nullopt);
  EXPECT_EQ(exec_ending_line(o, ended(outcome_kind::signaled, 0, SIGSEGV)), std::nullopt);
  EXPECT_EQ(exec_ending_line(o, ended(outcome_kind::output_limit)), std::nullopt);
  run_record missing;
  missing.error_step = "execve nope";
  missing.error = "ENOENT";
  EXPECT_EQ(exec_ending_line(o, missing), "nope: not found in the sandbox (execve nope)");
  run_record broken;
  broken.error_step = "pivot_root";
  broken.error = "pivot_root: EINVAL";
  EXPECT_EQ(exec_ending_line(o, broken), "sandbox error: pivot_root: EINVAL");
}

TEST(ExecNetwork, NoneAllowOrUnsafeHost) {
  auto none = parse_exec_network("none");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->mode, sandbox::network_mode::none);
  auto allow = parse_exec_network("allow:127.0.0.1:8080,example.com:443");
  ASSERT_TRUE(allow);
  EXPECT_EQ(allow->mode, sandbox::network_mode::allow);
  EXPECT_EQ(allow->allow, (std::vector<std::string>{"127.0.0.1:8080", "example.com:443"}));
  auto host = parse_exec_network("unsafe-host");
  ASSERT_TRUE(host);
  EXPECT_EQ(host->mode, sandbox::network_mode::host);
  EXPECT_TRUE(host->unsafe_host_network);
  EXPECT_FALSE(parse_exec_network("allow:"));
  auto bad = parse_exec_network("host");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind, error_kind::invalid_argument);
}

// Hooks that record what is said and fail the test if anything is launched.
struct recorded {
  std::vector<std::string> said;
  exec_hooks hooks() {
    exec_hooks h;
    h.say = [this](const std::string& line) { said.push_back(line); };
    h.launch = [](const sandbox::prepared_session&, sandbox::launch_options) {
      ADD_FAILURE() << "launched";
      return result<sandbox::run_record>(std::unexpected(error{}));
    };
    return h;
  }
};

TEST(ExecInSandbox, NeitherWorkspaceNorImageIsAUsageError) {
  recorded r;
  exec_options o;
  o.command = {"true"};
  auto out = exec_in_sandbox(o, r.hooks());
  EXPECT_EQ(out.exit_code, exit_usage);
  EXPECT_FALSE(out.record);
  ASSERT_EQ(r.said.size(), 1u);
  EXPECT_EQ(r.said[0],
            "give --workspace DIR (a host directory seen at /workspace), --image REF (an image "
            "as the root), or both");
}

TEST(ExecInSandbox, ABadLimitOrNetworkIsAUsageErrorNamingTheOption) {
  temp_dir dir;
  for (auto [field, text, says] :
       {std::tuple{&exec_options::memory, "lots", "--memory"},
        std::tuple{&exec_options::wall, "soon", "--wall"},
        std::tuple{&exec_options::network, "everything", "--network everything"}}) {
    recorded r;
    exec_options o;
    o.workspace = dir.path().string();
    o.state_dir = (dir.path() / "state").string();
    o.command = {"true"};
    o.*field = text;
    EXPECT_EQ(exec_in_sandbox(o, r.hooks()).exit_code, exit_usage) << says;
    ASSERT_EQ(r.said.size(), 1u);
    EXPECT_TRUE(r.said[0].starts_with(says)) << r.said[0];
  }
}

// The exit statuses of a store command's failure (evalbox image): what the user must change,
// what is missing, a stop, and the host's failure are told apart.
TEST(ExitStatus, OfAnErrorByItsKind) {
  EXPECT_EQ(exit_status_of_error({error_kind::invalid_argument, "x"}), exit_usage);
  EXPECT_EQ(exit_status_of_error({error_kind::not_found, "x"}), exit_task_failed);
  EXPECT_EQ(exit_status_of_error({error_kind::cancelled, "x"}), exit_sigint);
  for (auto k : {error_kind::io, error_kind::permission, error_kind::busy, error_kind::internal})
    EXPECT_EQ(exit_status_of_error({k, "x"}), exit_execution_failed);
}

}  // namespace
}  // namespace evalbox::harness
