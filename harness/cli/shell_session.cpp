// A person's shell in place of the agent, then the grading (shell_session.h).
#include "harness/cli/shell_session.h"

#include <fmt/format.h>
#include <signal.h>

#include "harness/cli/commands.h"
#include "harness/cli/interactive.h"
#include "harness/cli/session.h"
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
  const auto& exec = r["execution"];
  if (exec.value("status", "") == "error") {
    fmt::print("evalbox {}: the run could not be carried out: {}\n", cmd,
               exec["error"].is_string() ? exec["error"].get<std::string>() : "error");
    if (const std::string log = tail_of(run_dir / "setup.log"); !log.empty())
      fmt::print("setup output:\n{}{}", log, log.ends_with('\n') ? "" : "\n");
    return exit_execution_failed;
  }
  const auto& shell = exec["records"]["shell"];
  if (shell.is_object())
    fmt::print("evalbox {}: the shell ended ({} {}); grading what it left:\n", cmd,
               shell.value("outcome", "?"), shell.value("exit_code", json(nullptr)).dump());
  const auto& g = r["grading"];
  int passing = 0, total = 0;
  for (const auto& c : g["checks"]) {
    ++total;
    const bool ok = c.value("passed", false);
    passing += ok ? 1 : 0;
    std::string detail = c.value("detail", "");
    if (auto nl = detail.find('\n'); nl != std::string::npos) detail = detail.substr(0, nl);
    fmt::print("  {}  {:<24} {}\n", ok ? "pass" : "FAIL", c.value("id", ""), detail);
  }
  const std::string verdict = r.value("verdict", "not_assessed");
  fmt::print("verdict: {} ({} of {} checks pass)\n", verdict, passing, total);
  if (g["error"].is_string()) fmt::print("grading error: {}\n", g["error"].get<std::string>());
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
