// A person's shell in place of the agent, then the grading (shell_session.h).
#include "harness/cli/shell_session.h"

#include <fmt/format.h>

#include "base/fs.h"
#include "base/json_get.h"
#include "base/log.h"
#include "harness/cli/commands.h"
#include "harness/cli/interactive.h"
#include "harness/cli/suite_command.h"
#include "harness/results/record.h"
#include "harness/results/results.h"

namespace evalbox::harness::cli {
namespace {

// The last lines of a log the scratch results hold (the setup's), before they go.
std::string tail_of(const std::filesystem::path& path, size_t max = 2000) {
  std::string text = read_file(path, 16u << 20).value_or("");
  return text.size() > max ? text.substr(text.size() - max) : text;
}

// What the record says: each check, pass or fail, and the verdict.
int print_grading(const json& record, const std::filesystem::path& run_dir,
                  const std::string& cmd) {
  const harness::recorded_run r = harness::read_recorded_run(record);
  if (r.ending == harness::run_ending::execution_error) {
    fmt::print("evalbox {}: the run could not be carried out: {}\n", cmd,
               r.error.empty() ? "error" : r.error);
    if (const std::string log = tail_of(run_dir / "setup.log"); !log.empty())
      fmt::print("setup output:\n{}{}", log, log.ends_with('\n') ? "" : "\n");
    return exit_execution_failed;
  }
  // The shell's own record, beside the agent's in a run (any shape: it comes from disk).
  const json& shell =
      json_member(json_member(json_member(record, "execution"), "records"), "shell");
  if (shell.is_object()) {
    const std::string outcome = json_value_or(shell, "outcome", "");
    fmt::print("evalbox {}: the shell ended ({} {}); grading what it left:\n", cmd,
               outcome.empty() ? "?" : outcome, json_member(shell, "exit_code").dump());
  }
  int passing = 0;
  for (const auto& c : r.checks) {
    passing += c.passed ? 1 : 0;
    const std::string detail = c.detail.substr(0, c.detail.find('\n'));
    fmt::print("  {}  {:<24} {}\n", c.passed ? "pass" : "FAIL", c.id, detail);
  }
  const std::string verdict = r.verdict.empty() ? "not_assessed" : r.verdict;
  fmt::print("verdict: {} ({} of {} checks pass)\n", verdict, passing, r.checks.size());
  if (!r.error.empty()) fmt::print("grading error: {}\n", r.error);
  if (verdict == "passed") return exit_ok;
  if (verdict == "failed") return exit_task_failed;
  return exit_grader_failed;
}

}  // namespace

int run_shell_session(const harness::suite_spec& suite, const shell_session_options& options) {
  auto runs = harness::plan_runs(suite, {});
  if (!runs || runs->size() != 1) {
    log::error("{}: {}", options.command, runs ? "expected exactly one run" : runs.error().message);
    return exit_usage;
  }
  temp_dir scratch("evalbox-shell");
  suite_run_options o;
  o.results_dir = scratch.path();
  o.concurrency = 1;
  o.resume = false;
  o.quiet = true;
  o.shell = launch_interactive;
  o.interactive_grader = options.grader;
  o.workspace_override = options.workspace;
  auto done = run_planned(suite, *runs, o);
  if (!done) {
    log::error("{}", done.error().message);
    return exit_internal;
  }
  if (done->signal) return harness::exit_status_of_signal(done->signal);
  auto records = harness::results_dir(scratch.path()).read_records();
  if (!records || records->empty()) {
    log::error("{}: the run left no record{}", options.command,
               records ? "" : ": " + records.error().message);
    return exit_internal;
  }
  const std::string id = json_value_or(records->front(), "run_id", "");
  return print_grading(records->front(), harness::results_dir(scratch.path()).run_dir(id),
                       options.command);
}

}  // namespace evalbox::harness::cli
