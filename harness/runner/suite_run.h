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
