// A planned suite run to its end: the runs executed (run_suite), then the reports written from
// results.jsonl, and how the planned runs ended — what `evalbox run`, `evalbox fixture test`,
// `evalbox fixture shell` and `evalbox runs shell` share, below the command line. The caller
// owns the cancel token (the command line sets it from SIGINT/SIGTERM) and says how progress
// is shown.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "harness/agent/adapter.h"
#include "harness/config/spec.h"
#include "harness/plan/plan.h"
#include "harness/report/report.h"
#include "harness/results/record.h"
#include "harness/runner/exit_status.h"
#include "harness/runner/runner.h"
#include "sandbox/base/error.h"

namespace evalbox::harness {

struct suite_run_options {
  std::filesystem::path results_dir;
  int concurrency = 1;
  int retries = 0;
  bool resume = true;
  keep_policy keep_workspaces = keep_policy::none;
  uint64_t keep_workspace_bytes = default_keep_bytes;
  sandbox::preparer_options sandbox = sandbox::default_preparer_options();
  sandbox::cancel_token* cancel = nullptr;  // set by the caller to stop (runner_options::cancel)
  std::function<void(const progress&)> on_progress;   // unset: no progress
  std::function<void(const std::string&)> on_notice;  // unset: logged
  // A person's shell instead of the agent, and the grader shown to it
  // (runner_options::interactive, interactive_grader).
  std::function<result<sandbox::run_record>(const sandbox::prepared_session&,
                                            sandbox::launch_options)>
      interactive;
  bool interactive_grader = false;
  std::filesystem::path workspace_override;  // runner_options::workspace_override
};

struct suite_run {
  run_totals totals;
  // How the planned runs ended, from every record of a planned run id in the results
  // directory (an older record of a rerun included). Read from results.jsonl with the reports,
  // one record at a time: the records themselves are not kept.
  ending_tally planned;
  uint64_t planned_without_record = 0;    // planned runs with no record yet (interrupted)
  std::optional<stats::summary> summary;  // unset when the reports could not be written
  bool cancelled = false;                 // stopped through options.cancel
};

// Runs `runs` of `suite` (planned by the caller), then writes the reports from results.jsonl.
// Stopped through the cancel token before any run started (while an image was imported), it
// returns what it has with `cancelled` set rather than an error.
result<suite_run> run_and_report(const suite_spec& suite, const std::vector<run_spec>& runs,
                                 const adapter_registry& adapters,
                                 const suite_run_options& options);

}  // namespace evalbox::harness
