// `evalbox report RESULTS_DIR`: regenerates the reports from results.jsonl alone, so results
// merged from several machines (or shards) report exactly like one process's.
#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <fstream>
#include <map>

#include "base/fs.h"
#include "base/json.h"
#include "base/json_get.h"
#include "base/log.h"
#include "harness/cli/commands.h"
#include "harness/plan/identity.h"
#include "harness/report/report.h"
#include "harness/runner/suite_run.h"

namespace evalbox::harness::cli {

namespace {

struct report_args {
  std::string dir;
  std::vector<std::string> formats;
  std::string baseline;
  bool no_baseline = false;
  std::vector<std::string> grading;
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
  harness::report_request request;
  request.results_dir = a.dir;
  for (const auto& f : a.formats) request.formats.push_back(*harness::parse_report_format(f));
  // The plan the directory was written for, when it says (plan.json): a report of a directory
  // that lacks some of its planned runs (an interrupted run, a partial merge) says how many.
  std::optional<harness::plan_identity> plan;
  if (auto p = harness::read_plan(a.dir))
    plan = std::move(*p);
  else if (p.error().kind != error_kind::not_found)
    log::warn("{} (the report cannot say whether planned runs are missing)", p.error().message);
  if (plan) request.planned = harness::planned_ids(*plan);
  request.baseline = baseline_of(a);
  if (!a.grading.empty()) {
    auto selection = harness::select_gradings(harness::results_dir(a.dir), a.grading);
    if (!selection) {
      log::error("{}", selection.error().message);
      return selection.error().kind == error_kind::invalid_argument ? exit_usage : exit_internal;
    }
    request.grading = std::move(*selection);
    request.out_dir = std::filesystem::path(a.dir) / "gradings" / request.grading.label();
    if (auto m = make_dirs(request.out_dir); !m) {
      log::error("{}", m.error().message);
      return exit_internal;
    }
  }
  if (!request.baseline && !a.no_baseline && plan) request.baseline = plan->baseline;
  auto reports = harness::report_results(request);
  if (!reports) {
    log::error("{}", reports.error().message);
    return exit_internal;
  }
  const auto& s = reports->summary;
  if (!s) {
    fmt::print(stderr, "{}\n", s.error().message);
    return s.error().kind == error_kind::invalid_argument ? exit_usage : exit_internal;
  }
  if (s->missing)
    fmt::print(stderr, "{}: {} of the {} planned runs have no record (the reports say so)\n", a.dir,
               s->missing->missing, s->missing->planned);
  fmt::print("{}", harness::render_terminal_summary(*s));
  std::string written;
  for (auto f : request.formats.empty()
                    ? std::vector<harness::report_format>(std::begin(harness::all_report_formats),
                                                          std::end(harness::all_report_formats))
                    : request.formats)
    written += fmt::format(
        " {}", ((request.out_dir.empty() ? std::filesystem::path(a.dir) : request.out_dir) /
                harness::report_file_name(f))
                   .string());
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
  cmd->add_option("--grading", a->grading,
                  "report an older grading instead of the newest: original (each run as its own "
                  "run graded it, before any evalbox regrade) or a grading digest (summary.json's "
                  "grading.digests, whole or its first 8+ hex digits; repeatable: each fixture's "
                  "checks have their own); runs it never graded are left out; written into "
                  "RESULTS/gradings/<original|digests>/");
  cmd->callback([&out, a] { out = [a] { return report_command(*a); }; });
}

}  // namespace evalbox::harness::cli
