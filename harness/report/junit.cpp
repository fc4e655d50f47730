// junit.xml (see report.h): one testsuite per candidate, one testcase per run. A task failure
// is a <failure>, an infrastructure error an <error> (never a failure), each with its checks.
#include <fmt/format.h>

#include <map>
#include <ostream>
#include <sstream>

#include "base/json.h"
#include "harness/report/report.h"
#include "harness/report/svg.h"

namespace evalbox::harness {
inline namespace report {

namespace {

// XML text and attributes escape exactly like the SVG labels (svg.h).
std::string xml_escape(std::string_view s) { return svg::escape(s); }

std::string checks_text(const run_detail& run) {
  std::string out;
  for (const auto& c : run.checks)
    out += fmt::format("{} {}{}\n", c.passed ? "PASS" : "FAIL", c.id,
                       c.detail.empty() ? "" : ": " + c.detail);
  return out;
}

}  // namespace

status write_junit(std::ostream& out, const run_index& runs, const std::string& suite_name) {
  using verdict = stats::run_outcome::verdict;
  // The totals head the file, so they come from the index, as do each candidate's counts (in
  // name order); each testcase then reads its record. A candidate's runs are found by a pass
  // over the index, so that nothing here grows with the runs.
  struct counts {
    size_t tests = 0, failures = 0, errors = 0;
  };
  std::map<std::string, counts> by_candidate;
  size_t total_failures = 0, total_errors = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    const stats::run_outcome& o = runs.outcome(i);
    counts& c = by_candidate[o.candidate];
    ++c.tests;
    c.failures += o.outcome == verdict::failed;
    c.errors += o.outcome == verdict::error;
    total_failures += o.outcome == verdict::failed;
    total_errors += o.outcome == verdict::error;
  }
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out << fmt::format("<testsuites name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\">\n",
                     xml_escape(suite_name), runs.size(), total_failures, total_errors);
  for (const auto& [cand, c] : by_candidate) {
    out << fmt::format("  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\">\n",
                       xml_escape(cand), c.tests, c.failures, c.errors);
    for (size_t i = 0; i < runs.size(); ++i) {
      if (runs.outcome(i).candidate != cand) continue;
      const run_detail r = EB_TRY(runs.read(i));
      const stats::run_outcome& o = runs.outcome(i);
      const double secs = o.wall_ms ? *o.wall_ms / 1000.0 : 0.0;
      out << fmt::format("    <testcase classname=\"{}\" name=\"{}#{}\" time=\"{:.3f}\">\n",
                         xml_escape(cand), xml_escape(o.fixture), o.trial, secs);
      std::string checks = checks_text(r);
      if (o.outcome == verdict::failed) {
        // A task failure: the agent ran and its work did not pass the checks.
        out << fmt::format("      <failure message=\"{}\" type=\"task\">{}</failure>\n",
                           xml_escape("failed checks: " + report_text::failed_check_ids(r)),
                           xml_escape(checks));
      } else if (o.outcome == verdict::error) {
        // The run could not be carried out or graded: never a task failure.
        const std::string& msg = o.error_message;
        out << fmt::format("      <error message=\"{}\" type=\"{}\">{}</error>\n", xml_escape(msg),
                           xml_escape(r.error_kind.empty() ? "infrastructure" : r.error_kind),
                           xml_escape(msg + "\n" + checks));
      } else if (!checks.empty()) {
        out << fmt::format("      <system-out>{}</system-out>\n", xml_escape(checks));
      }
      out << "    </testcase>\n";
    }
    out << "  </testsuite>\n";
  }
  out << "</testsuites>\n";
  return {};
}

std::string render_junit(const std::vector<json>& records, const std::string& suite_name) {
  std::ostringstream out;
  // Records in memory: reading them back cannot fail.
  (void)write_junit(out, run_index::of_records(records), suite_name);
  return std::move(out).str();
}

}  // namespace report
}  // namespace evalbox::harness
