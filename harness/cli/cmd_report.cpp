// `evalbox report RESULTS_DIR`: regenerates the reports from results.jsonl alone, so results
// merged from several machines (or shards) report exactly like one process's.
#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <fstream>

#include "base/json.h"
#include "base/json_get.h"
#include "base/log.h"
#include "harness/cli/commands.h"
#include "harness/plan/identity.h"
#include "harness/report/report.h"
#include "harness/results/results.h"

namespace evalbox::harness::cli {

namespace {

struct report_args {
  std::string dir;
  std::vector<std::string> formats;
  std::string baseline;
  bool no_baseline = false;
};

// The baseline is a suite setting, not part of any record: take it from the flag, else from
// the summary.json a previous run or report wrote (docs/report.md).
std::optional<std::string> baseline_of(const report_args& a) {
  if (a.no_baseline) return std::nullopt;
  if (!a.baseline.empty()) return a.baseline;
  std::error_code ec;
  auto summary_path = std::filesystem::path(a.dir) / "summary.json";
  if (!std::filesystem::exists(summary_path, ec)) return std::nullopt;
  // Only "settings" is kept while parsing: the rest of summary.json grows with the suite.
  std::ifstream in(summary_path, std::ios::binary);
  json previous = json::parse(
      in,
      [](int depth, json::parse_event_t event, json& parsed) {
        return depth != 1 || event != json::parse_event_t::key || parsed == "settings";
      },
      /*allow_exceptions=*/false);
  return json_find<std::string>(json_member(previous, "settings"), "baseline");
}

int report_command(const report_args& a) {
  std::vector<harness::report_format> formats;
  for (const auto& f : a.formats) formats.push_back(*harness::parse_report_format(f));
  if (formats.empty())
    formats.assign(std::begin(harness::all_report_formats), std::end(harness::all_report_formats));

  harness::results_dir results(a.dir);
  std::error_code ec;
  if (!std::filesystem::exists(results.results_file(), ec)) {
    fmt::print(stderr, "{}: no results.jsonl here (is it a results directory?)\n", a.dir);
    return exit_usage;
  }
  // The plan the directory was written for, when it says (plan.json): a report of a directory
  // that lacks some of its planned runs (an interrupted run, a partial merge) says how many.
  std::optional<harness::plan_identity> plan;
  if (auto p = harness::read_plan(a.dir))
    plan = std::move(*p);
  else if (p.error().kind != error_kind::not_found)
    log::warn("{} (the report cannot say whether planned runs are missing)", p.error().message);
  std::vector<std::string> planned =
      plan ? harness::planned_ids(*plan) : std::vector<std::string>();
  std::vector<bool> seen(planned.size(), false);
  auto note = [&](const json& r) -> status {
    std::string id = json_value_or(r, "run_id", "");
    auto it = std::lower_bound(planned.begin(), planned.end(), id);
    if (it != planned.end() && *it == id) seen[static_cast<size_t>(it - planned.begin())] = true;
    return {};
  };
  // One pass indexes results.jsonl; each report then reads back one record at a time.
  auto runs = harness::run_index::of_results(results, note);
  if (!runs) {
    log::error("{}", runs.error().message);
    return exit_internal;
  }
  if (runs->empty()) {
    fmt::print(stderr, "{}: results.jsonl has no complete evalbox.run.v1 record\n", a.dir);
    return exit_usage;
  }
  auto suite = runs->suite_name(std::filesystem::path(a.dir).filename());
  auto baseline = baseline_of(a);
  if (!baseline && !a.no_baseline && plan) baseline = plan->baseline;
  auto s = harness::summarize_runs(*runs, baseline);
  if (s) {
    auto missing = static_cast<uint64_t>(std::count(seen.begin(), seen.end(), false));
    if (missing > 0) s->missing = harness::stats::missing_runs{planned.size(), missing};
    if (auto w = harness::write_reports(a.dir, *s, *runs, suite, formats); !w)
      s = std::unexpected(std::move(w).error());
  }
  if (!s) {
    fmt::print(stderr, "reports for {}: {}\n", a.dir, s.error().message);
    return s.error().kind == error_kind::invalid_argument ? exit_usage : exit_internal;
  }
  if (s->missing)
    fmt::print(stderr, "{}: {} of the {} planned runs have no record (the reports say so)\n", a.dir,
               s->missing->missing, s->missing->planned);
  fmt::print("{}", harness::render_terminal_summary(*s));
  std::string written;
  for (auto f : formats)
    written +=
        fmt::format(" {}", (std::filesystem::path(a.dir) / harness::report_file_name(f)).string());
  fmt::print("reports:{}\n", written);
  return exit_ok;
}

}  // namespace

void register_report(CLI::App& app, action& out) {
  auto a = std::make_shared<report_args>();
  auto* cmd = app.add_subcommand(
      "report",
      "Regenerate the reports of a results directory from its results.jsonl alone: "
      "summary.json, report.md, report.html and junit.xml (or the --format ones).\n\n"
      "Example: evalbox report results/examples --format html");
  cmd->add_option("results", a->dir, "the results directory (holds results.jsonl)")->required();
  cmd->add_option("--format", a->formats, "md, html, json or junit (repeatable; default: all)")
      ->check(CLI::IsMember({"md", "html", "json", "junit"}));
  cmd->add_option("--baseline", a->baseline,
                  "compare every candidate with this one (default: the baseline recorded in "
                  "the directory's summary.json, if any)");
  cmd->add_flag("--no-baseline", a->no_baseline, "no paired comparison");
  cmd->callback([&out, a] { out = [a] { return report_command(*a); }; });
}

}  // namespace evalbox::harness::cli
