// What every report shares (see report.h): the text helpers of the renderers, the formats and
// their file names, the statistics of the indexed runs, writing the chosen reports, and the
// terminal summary. The renderers: markdown.cpp, junit.cpp, html.cpp; the index: run_index.cpp.
#include "harness/report/report.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <functional>
#include <ostream>
#include <thread>

#include "base/fs.h"
#include "base/json.h"
#include "base/json_get.h"
#include "base/log.h"

namespace evalbox::harness {
inline namespace report {

namespace report_text {

std::string percent(std::optional<double> v) {
  return v ? fmt::format("{:.1f}%", *v * 100) : std::string("n/a");
}

std::string interval(const std::optional<stats::interval>& ci) {
  return ci ? fmt::format("[{:.1f}, {:.1f}]", ci->lo * 100, ci->hi * 100) : std::string("n/a");
}

// A cost nobody reported is unknown, never $0; a partly known total says what it leaves out.
std::string cost(const stats::cost_total& c) {
  if (!c.known_usd) return "unknown";
  if (c.unknown == 0) return fmt::format("${:.4f}", *c.known_usd);
  return fmt::format("≥ ${:.4f} ({} run(s) unknown)", *c.known_usd, c.unknown);
}

std::string error_message_of(const json& r) {
  // Any shape: records come from disk.
  if (auto e = json_find<std::string>(json_member(r, "execution"), "error")) return *e;
  if (auto g = json_find<std::string>(json_member(r, "grading"), "error")) return "grader: " + *g;
  return "not assessed";
}

bool passed(const json& check) { return json_value_or(check, "passed", false); }

std::string failed_check_ids(const run_detail& run) {
  std::string failed;
  for (const auto& c : run.checks)
    if (!c.passed) failed += (failed.empty() ? "" : ", ") + c.id;
  return failed;
}

std::string grading_note(const stats::summary& s) {
  const auto& g = s.grading;
  std::vector<std::string> parts;
  if (g.selected == "original")
    parts.push_back(
        "These are the verdicts each run gave itself (evalbox report --grading original), "
        "before any regrade; the newest are in the results directory's own report.");
  else if (!g.selected.empty())
    parts.push_back(fmt::format(
        "These are the verdicts of grading {} (evalbox report --grading), an older grading of "
        "these runs; the newest are in the results directory's own report.",
        g.selected));
  if (g.regraded > 0)
    parts.push_back(
        fmt::format("{} of the {} verdicts come from grading the run again (evalbox "
                    "regrade), not from the run itself.",
                    g.regraded, s.runs));
  if (!g.mixed_fixtures.empty())
    parts.push_back(fmt::format(
        "Runs of {} fixture(s) were graded by different checks ({}): evalbox regrade grades "
        "the older ones with the current checks.",
        g.mixed_fixtures.size(), fmt::join(g.mixed_fixtures, ", ")));
  return fmt::format("{}", fmt::join(parts, " "));
}

}  // namespace report_text

namespace {

using report_text::interval;
using report_text::percent;

result<stats::summary> summarize_outcomes(std::span<const stats::run_outcome> outcomes,
                                          std::optional<std::string> baseline) {
  stats::options opts;
  if (baseline) {
    bool present = std::any_of(outcomes.begin(), outcomes.end(), [&](const stats::run_outcome& o) {
      return o.candidate == *baseline;
    });
    // A filtered or sharded run may not include the baseline: report without a comparison
    // rather than not at all.
    if (!present)
      log::warn("baseline candidate {} has no runs: no paired comparison", *baseline);
    else
      opts.baseline = std::move(baseline);
  }
  return stats::summarize(outcomes, opts);
}

}  // namespace

std::optional<report_format> parse_report_format(std::string_view name) {
  if (name == "md") return report_format::md;
  if (name == "html") return report_format::html;
  if (name == "json") return report_format::json;
  if (name == "junit") return report_format::junit;
  return std::nullopt;
}

std::string_view report_file_name(report_format f) {
  switch (f) {
    case report_format::json:
      return "summary.json";
    case report_format::md:
      return "report.md";
    case report_format::html:
      return "report.html";
    case report_format::junit:
      return "junit.xml";
  }
  return "";
}

std::string render_terminal_summary(const stats::summary& s) {
  std::string out;
  if (const std::string note = report_text::grading_note(s); !note.empty())
    out += fmt::format("  grading: {}\n", note);
  for (const auto& c : s.candidates)
    out += fmt::format("  {:<20} pass@1 {:>6} {} over {} fixture(s), {} trial(s){}\n", c.candidate,
                       percent(c.pass_at_1), interval(c.pass_at_1_ci), c.fixtures, c.trials,
                       c.errors ? fmt::format(", {} error(s) not counted", c.errors) : "");
  for (const auto& c : s.candidates)
    if (c.use.gateway.runs > 0)
      out += fmt::format(
          "  {:<20} gateway: cost {} (exact), TTFB p50 {}{}\n", c.candidate,
          report_text::cost(c.use.cost),
          c.use.gateway.ttfb_ms.p50 ? fmt::format("{:.0f} ms", *c.use.gateway.ttfb_ms.p50)
                                    : std::string("unknown"),
          c.use.gateway.budget_exhausted
              ? fmt::format(", {} run(s) ended by their budget", c.use.gateway.budget_exhausted)
              : "");
  for (const auto& c : s.candidates)
    if (c.use.credentials.runs > 0)
      out += fmt::format(
          "  {:<20} credential wait: {} run(s) waited, {:.1f} s in all, longest "
          "{:.1f} s\n",
          c.candidate, c.use.credentials.runs, c.use.credentials.wait_ms.total.value_or(0) / 1000,
          c.use.credentials.wait_ms.max.value_or(0) / 1000);
  for (const auto& p : s.comparisons)
    out += fmt::format(
        "  {} vs {}: {}{} (n = {} shared fixture(s))\n", p.candidate, p.baseline, p.verdict,
        p.mean_difference
            ? fmt::format(", {:+.1f} pts {}", *p.mean_difference * 100,
                          p.ci ? fmt::format("[{:+.1f}, {:+.1f}]", p.ci->lo * 100, p.ci->hi * 100)
                               : std::string("[n/a]"))
            : std::string(),
        p.n);
  // A terminal is not a report: a few lines of each list, then where the rest are.
  constexpr size_t shown = 5;
  // Fixtures whose oracle is unstable come first: they need fixing whatever the agents do.
  std::vector<const stats::flaky_fixture*> flaky;
  for (const auto& f : s.flaky)
    if (f.oracle) flaky.push_back(&f);
  for (const auto& f : s.flaky)
    if (!f.oracle) flaky.push_back(&f);
  for (size_t i = 0; i < flaky.size() && i < 2 * shown; ++i)
    out += fmt::format("  flaky: {} ({}{})\n", flaky[i]->fixture,
                       fmt::join(flaky[i]->candidates, ", "),
                       flaky[i]->oracle ? "; the oracle too: fix the fixture" : "");
  if (flaky.size() > 2 * shown)
    out += fmt::format("  ... and {} more flaky fixture(s) (report.md lists them all)\n",
                       flaky.size() - 2 * shown);
  if (!s.errors.empty())
    out += fmt::format("  {} infrastructure error(s), not counted as failures:\n", s.errors.size());
  for (size_t i = 0; i < s.errors.size() && i < shown; ++i) {
    const auto& e = s.errors[i];
    std::string msg = e.message.substr(0, e.message.find('\n'));
    if (msg.size() > 160) msg = msg.substr(0, 157) + "...";
    out += fmt::format("    {} / {} #{}: {}\n", e.candidate, e.fixture, e.trial, msg);
  }
  if (s.errors.size() > shown)
    out += fmt::format("    ... and {} more (report.md lists them all)\n", s.errors.size() - shown);
  return out;
}

result<stats::summary> summarize_records(const std::vector<json>& records,
                                         std::optional<std::string> baseline) {
  return summarize_outcomes(outcomes_from_records(records), std::move(baseline));
}

result<stats::summary> summarize_runs(const run_index& runs, std::optional<std::string> baseline) {
  return summarize_outcomes(runs.outcomes(), std::move(baseline));
}

result<stats::summary> write_reports(const std::filesystem::path& dir, const run_index& runs,
                                     const std::string& suite_name,
                                     std::optional<std::string> baseline,
                                     std::span<const report_format> formats) {
  if (runs.superseded() > 0)
    log::info(
        "reports: {} superseded record(s) ignored (a later record has the same candidate, "
        "fixture and trial)",
        runs.superseded());
  auto s = EB_TRY(summarize_runs(runs, std::move(baseline)));
  EB_TRY(write_reports(dir, s, runs, suite_name, formats));
  return s;
}

status write_reports(const std::filesystem::path& dir, const stats::summary& s,
                     const run_index& runs, const std::string& suite_name,
                     std::span<const report_format> formats, const html_options& html) {
  auto write = [&](report_format f) -> status {
    auto render = [&](std::ostream& out) -> status {
      switch (f) {
        case report_format::json:
          stats::write_json(out, s);
          return {};
        case report_format::md:
          return write_markdown(out, s, runs, suite_name);
        case report_format::html:
          return write_html(out, s, runs, suite_name, dir, html);
        case report_format::junit:
          return write_junit(out, runs, suite_name);
      }
      return {};
    };
    EB_TRY_CTX(write_file_streamed(dir / report_file_name(f), render),
               fmt::format("write {}", report_file_name(f)));
    return {};
  };
  // report.html costs about as much as the others together (it reads every run back and embeds
  // its files): with a second CPU it is written on a thread of its own meanwhile.
  const auto html_at = std::find(formats.begin(), formats.end(), report_format::html);
  if (html_at == formats.end() || formats.size() == 1 || std::thread::hardware_concurrency() < 2) {
    for (report_format f : formats) EB_TRY(write(f));
    return {};
  }
  status html_written;
  std::thread html_thread([&] { html_written = write(report_format::html); });
  status others;
  for (report_format f : formats)
    if (f != report_format::html && others) others = write(f);
  html_thread.join();
  if (!others) return others;
  return html_written;
}

result<stats::summary> write_reports(const std::filesystem::path& dir,
                                     const std::vector<json>& records,
                                     const std::string& suite_name,
                                     std::optional<std::string> baseline,
                                     std::span<const report_format> formats) {
  return write_reports(dir, run_index::of_records(records, /*newest_only=*/true), suite_name,
                       std::move(baseline), formats);
}

}  // namespace report
}  // namespace evalbox::harness
