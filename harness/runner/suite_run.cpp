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
  explicit planned_ids(const std::vector<std::string>& ids) : ids_(ids.begin(), ids.end()) {
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

result<results_reports> report_results(const report_request& request) {
  const results_dir results(request.results_dir);
  results_reports out;
  planned_ids planned(request.planned);
  auto note = [&](const json& record) -> status {
    const recorded_run r = read_recorded_run(record);
    if (planned.note(r.run_id)) out.planned.add(r.ending);
    return {};
  };
  auto index = EB_TRY(run_index::of_results(results, note, &request.grading));
  out.runs = index.size();
  out.planned_without_record = planned.without_record();
  if (out.runs == 0) {
    std::error_code ec;
    const bool file = std::filesystem::exists(results.results_file(), ec);
    out.summary = make_error(error_kind::invalid_argument, "{}: {}", request.results_dir.string(),
                             file ? "results.jsonl has no complete evalbox.run.v1 record"
                                  : "no results.jsonl here (is it a results directory?)");
    return out;
  }
  out.summary = summarize_runs(index, request.baseline);
  if (!out.summary) return out;
  out.summary->grading.selected = request.grading.empty() ? "" : request.grading.label();
  // A directory without some of its planned runs (an interrupted run, a partial merge) says
  // how many in every report.
  if (out.planned_without_record > 0)
    out.summary->missing = stats::missing_runs{planned.size(), out.planned_without_record};
  const std::string suite = request.suite_name.empty()
                                ? index.suite_name(request.results_dir.filename().string())
                                : request.suite_name;
  std::vector<report_format> formats = request.formats;
  if (formats.empty()) formats.assign(std::begin(all_report_formats), std::end(all_report_formats));
  const std::filesystem::path out_dir =
      request.out_dir.empty() ? request.results_dir : request.out_dir;
  html_options html;
  if (!request.out_dir.empty())
    html.run_dir = [&request](const std::string& id) { return request.results_dir / "runs" / id; };
  if (auto w = write_reports(out_dir, *out.summary, index, suite, formats, html); !w)
    out.summary = std::unexpected(std::move(w).error());
  return out;
}

result<suite_run> run_and_report(const suite_spec& suite, const std::vector<run_spec>& runs,
                                 const adapter_registry& adapters, const runner_options& options) {
  suite_run out;
  auto totals = run_suite(suite, runs, adapters, options);
  out.cancelled = options.cancel && options.cancel->requested.load();
  // Stopped before any run (while an image was imported): the stop is the outcome.
  if (!totals && out.cancelled && totals.error().kind == error_kind::cancelled) return out;
  if (!totals) return std::unexpected(totals.error());
  out.totals = *totals;
  report_request request{options.results_dir, {}, suite.baseline, suite.name, {}};
  request.planned.reserve(runs.size());
  for (const auto& r : runs) request.planned.push_back(r.run_id);
  auto reports = EB_TRY(report_results(request));
  out.planned = reports.planned;
  out.planned_without_record = reports.planned_without_record;
  if (!reports.summary)
    log::warn("reports: {}", reports.summary.error().message);
  else
    out.summary = std::move(*reports.summary);
  return out;
}

}  // namespace runner
}  // namespace evalbox::harness
