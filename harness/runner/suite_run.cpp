// A planned suite run to its end, and the exit statuses (see suite_run.h, exit_status.h).
#include "harness/runner/suite_run.h"

#include <signal.h>

#include <algorithm>
#include <string_view>

#include "base/json.h"
#include "base/log.h"
#include "harness/results/results.h"

namespace evalbox::harness {
inline namespace runner {

exit_code exit_status_of_signal(int sig) noexcept {
  if (sig == SIGINT) return exit_sigint;
  if (sig == SIGTERM) return exit_sigterm;
  return exit_internal;
}

namespace {

// The planned run ids, sorted, and which of them results.jsonl holds a record of.
class planned_ids {
 public:
  explicit planned_ids(const std::vector<run_spec>& runs) {
    ids_.reserve(runs.size());
    for (const auto& r : runs) ids_.push_back(r.run_id);
    std::sort(ids_.begin(), ids_.end());
    recorded_.assign(ids_.size(), false);
  }

  // Marks `run_id` recorded; false when it is not a planned run.
  bool note(std::string_view run_id) {
    auto at = std::lower_bound(ids_.begin(), ids_.end(), run_id);
    if (at == ids_.end() || *at != run_id) return false;
    recorded_[static_cast<size_t>(at - ids_.begin())] = true;
    return true;
  }

  [[nodiscard]] uint64_t size() const { return ids_.size(); }
  [[nodiscard]] uint64_t without_record() const {
    return static_cast<uint64_t>(std::count(recorded_.begin(), recorded_.end(), false));
  }

 private:
  std::vector<std::string_view> ids_;  // views of the run ids in the caller's runs
  std::vector<bool> recorded_;
};

}  // namespace

result<suite_run> run_and_report(const suite_spec& suite, const std::vector<run_spec>& runs,
                                 const adapter_registry& adapters, const runner_options& options) {
  suite_run out;
  auto totals = run_suite(suite, runs, adapters, options);
  out.cancelled = options.cancel && options.cancel->requested.load();
  // Stopped before any run (while an image was imported): the stop is the outcome.
  if (!totals && out.cancelled && totals.error().kind == error_kind::cancelled) return out;
  if (!totals) return std::unexpected(totals.error());
  out.totals = *totals;
  // One pass over results.jsonl indexes the runs for the reports and notes how the planned
  // runs ended; the reports then read back one record at a time.
  planned_ids planned(runs);
  auto note = [&](const json& record) -> status {
    const recorded_run r = read_recorded_run(record);
    if (planned.note(r.run_id)) out.planned.add(r.ending);
    return {};
  };
  auto index = EB_TRY(run_index::of_results(results_dir(options.results_dir), note));
  out.planned_without_record = planned.without_record();
  // An interrupted run's reports say how many of its planned runs have no record yet.
  auto s = summarize_runs(index, suite.baseline);
  if (s) {
    if (out.planned_without_record > 0)
      s->missing = stats::missing_runs{planned.size(), out.planned_without_record};
    if (auto w = write_reports(options.results_dir, *s, index, suite.name); !w)
      s = std::unexpected(std::move(w).error());
  }
  if (!s)
    log::warn("reports: {}", s.error().message);
  else
    out.summary = std::move(*s);
  return out;
}

}  // namespace runner
}  // namespace evalbox::harness
