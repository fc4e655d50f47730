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

#include "base/error.h"
#include "harness/agent/adapter.h"
#include "harness/config/spec.h"
#include "harness/plan/plan.h"
#include "harness/report/report.h"
#include "harness/results/record.h"
#include "harness/runner/exit_status.h"
#include "harness/runner/runner.h"

namespace evalbox::harness {
inline namespace runner {

// The reports of a results directory, from results.jsonl alone: what a suite run writes when
// it ends and what `evalbox report` writes again.
struct report_request {
  std::filesystem::path results_dir;
  std::vector<std::string> planned;  // the run ids the directory is meant to hold; empty: unknown
  std::optional<std::string> baseline;  // the candidate the others are compared with
  std::string suite_name;               // empty: the records', else the directory's name
  std::vector<report_format> formats;   // empty: every format
  // Set: the reports show these gradings of the runs they select, and are written into
  // `out_dir` (report --grading); empty: the newest record of each run.
  grading_selection grading;
  std::filesystem::path out_dir;  // empty: results_dir
};

struct results_reports {
  uint64_t runs = 0;                    // complete records indexed (the newest per trial)
  ending_tally planned;                 // how the planned runs ended, from their every record
  uint64_t planned_without_record = 0;  // planned runs with no record (an interrupted run)
  // The summary the reports were written from (it says how many planned runs are missing), or
  // why they could not be written.
  result<stats::summary> summary = make_error(error_kind::internal, "not reported");
};

// One pass over results.jsonl indexes the runs for the reports and notes how the planned runs
// ended; the reports then read back one record at a time. An error only when results.jsonl
// cannot be read; without a complete record (or without results.jsonl) the summary is an
// invalid_argument error that says so.
result<results_reports> report_results(const report_request& request);

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
                                 const adapter_registry& adapters, const runner_options& options);

}  // namespace runner
}  // namespace evalbox::harness
