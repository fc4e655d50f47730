// What `evalbox run` and `evalbox fixture test` share: signal handling (Ctrl-C stops
// scheduling and kills running sandboxes), the progress line, Harbor tasks' images resolved
// before anything runs, running a planned suite and writing its reports.
#pragma once

#include <expected>
#include <optional>
#include <string>
#include <vector>

#include "harness/plan/plan.h"
#include "harness/report/report.h"
#include "harness/runner/runner.h"

namespace evalbox::cli {

// What the records of the planned runs say (every record of a planned run id in the results
// directory, an older one of a rerun included): the exit status of `evalbox run`.
struct planned_outcomes {
  bool execution_error = false;  // a run could not be carried out
  bool grader_error = false;     // a run could not be graded
  bool task_failed = false;      // a run was graded and did not pass
};

struct suite_run {
  harness::run_totals totals;
  // Read from results.jsonl with the reports, one record at a time: the records themselves
  // are not kept (a suite of thousands of runs would hold them all).
  planned_outcomes planned;
  std::optional<harness::stats::summary> summary;
  int signal = 0;  // SIGINT/SIGTERM that stopped it, else 0
};

struct suite_run_options {
  std::filesystem::path results_dir;
  int concurrency = 1;
  int retries = 0;
  bool resume = true;
  bool quiet = false;  // no progress output
  harness::keep_policy keep_workspaces = harness::keep_policy::none;
  uint64_t keep_workspace_bytes = harness::default_keep_bytes;
  // A person's shell instead of the agent (harness::runner_options::interactive), given the
  // suite's cancel token, which SIGINT and SIGTERM set.
  std::function<result<sandbox::run_record>(const sandbox::prepared_session&,
                                            sandbox::launch_options, sandbox::cancel_token&)>
      interactive;
  bool interactive_grader = false;
  std::filesystem::path workspace_override;
};

// Plans nothing: runs `runs` of `suite`, then writes the reports from results.jsonl.
result<suite_run> run_planned(const harness::suite_spec& suite,
                              const std::vector<harness::run_spec>& runs,
                              const suite_run_options& options);

// Prints a line of progress (an image saved or built) as "evalbox: LINE" on stderr.
void say_progress(const std::string& line);

// For a command: harness::resolve_suite_images with the images of `options` (--image) over the
// suite's and the state directory's image caches, its progress and problems printed to stderr.
// Returns exit_ok, or exit_usage when an image cannot be had (the message says how to get it).
int resolve_suite_images(harness::suite_spec& suite, const std::vector<std::string>& options);

// Adapter-level validation of every candidate (its settings), as config errors. The adapter
// names themselves were checked by load_suite against this same registry.
std::vector<harness::config_error> validate_candidates(const harness::suite_spec& suite);

// The suite at `path`, loaded and its candidates validated, for a command that plans runs
// (run, slurm, k8s). On a problem it prints the messages and returns the exit code:
// exit_usage for a suite that is wrong or missing, exit_internal for one that cannot be read.
std::expected<harness::suite_spec, int> load_runnable_suite(const std::string& path);

}  // namespace evalbox::cli
