// A person's shell in place of the agent, then the grading (shell_session.h).
#include "harness/cli/shell_session.h"

#include <fmt/format.h>
#include <signal.h>

#include "harness/cli/commands.h"
#include "harness/cli/interactive.h"
#include "harness/cli/session.h"
#include "harness/report/report.h"
#include "harness/results/results.h"
#include "sandbox/base/fs.h"
#include "sandbox/base/log.h"

namespace evalbox::cli {
namespace {

// The last lines of a log the scratch results hold (the setup's), before they go.
std::string tail_of(const std::filesystem::path& path, size_t max = 2000) {
  std::string text = read_file(path, 16u << 20).value_or("");
  return text.size() > max ? text.substr(text.size() - max) : text;
}

// What the record says: each check, pass or fail, and the verdict.
int print_grading(const json& r, const std::filesystem::path& run_dir, const std::string& cmd) {
  // The record is read through field()/str(): a key that is missing, or of another type, reads
  // as null or "" rather than failing.
  using harness::report_text::field;
  using harness::report_text::str;
  const json& exec = field(r, "execution");
  if (str(exec, "status") == "error") {
    const std::string error = str(exec, "error");
    fmt::print("evalbox {}: the run could not be carried out: {}\n", cmd,
               error.empty() ? "error" : error);
    if (const std::string log = tail_of(run_dir / "setup.log"); !log.empty())
      fmt::print("setup output:\n{}{}", log, log.ends_with('\n') ? "" : "\n");
    return exit_execution_failed;
  }
  const json& shell = field(field(exec, "records"), "shell");
  if (shell.is_object()) {
    const std::string outcome = str(shell, "outcome");
    fmt::print("evalbox {}: the shell ended ({} {}); grading what it left:\n", cmd,
               outcome.empty() ? "?" : outcome, field(shell, "exit_code").dump());
  }
  const json& g = field(r, "grading");
  int passing = 0, total = 0;
  const json& checks = field(g, "checks");
  for (const auto& c : checks.is_array() ? checks : json::array()) {
    ++total;
    const bool ok = harness::report_text::passed(c);
    passing += ok ? 1 : 0;
    std::string detail = str(c, "detail");
    if (auto nl = detail.find('\n'); nl != std::string::npos) detail = detail.substr(0, nl);
    fmt::print("  {}  {:<24} {}\n", ok ? "pass" : "FAIL", str(c, "id"), detail);
  }
  std::string verdict = str(r, "verdict");
  if (verdict.empty()) verdict = "not_assessed";
  fmt::print("verdict: {} ({} of {} checks pass)\n", verdict, passing, total);
  if (const std::string error = str(g, "error"); !error.empty())
    fmt::print("grading error: {}\n", error);
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
  o.interactive = launch_interactive;
  o.interactive_grader = options.grader;
  o.workspace_override = options.workspace;
  auto done = run_planned(suite, *runs, o);
  if (!done) {
    log::error("{}", done.error().message);
    return exit_internal;
  }
  if (done->signal) return done->signal == SIGINT ? exit_sigint : exit_sigterm;
  auto records = harness::results_dir(scratch.path()).read_records();
  if (!records || records->empty()) {
    log::error("{}: the run left no record{}", options.command,
               records ? "" : ": " + records.error().message);
    return exit_internal;
  }
  const std::string id = records->front().value("run_id", "");
  return print_grading(records->front(), harness::results_dir(scratch.path()).run_dir(id),
                       options.command);
}

}  // namespace evalbox::cli
