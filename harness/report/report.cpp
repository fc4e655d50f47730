// Report writers (see report.h).
#include "harness/report/report.h"

#include <map>
#include <set>

#include "sandbox/base/fs.h"

namespace evalbox::harness {

namespace {

std::string pct(std::optional<double> v) {
  return v ? fmt::format("{:.1f}%", *v * 100) : std::string("n/a");
}

std::string ci_text(const std::optional<stats::interval>& ci) {
  return ci ? fmt::format("[{:.1f}, {:.1f}]", ci->lo * 100, ci->hi * 100) : std::string("n/a");
}

std::string xml_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') out += ' ';
        else out += c;
    }
  }
  return out;
}

std::string md_cell(std::string s) {
  for (auto& c : s)
    if (c == '|' || c == '\n') c = ' ';
  return s;
}

std::string checks_text(const json& run) {
  std::string out;
  for (const auto& c : run["grading"].value("checks", json::array())) {
    out += fmt::format("{} {}{}\n", c.value("passed", false) ? "PASS" : "FAIL", c.value("id", ""),
                       c.value("detail", "").empty() ? "" : ": " + c.value("detail", ""));
  }
  return out;
}

}  // namespace

std::vector<stats::run_outcome> outcomes_from_records(const std::vector<json>& records) {
  std::vector<stats::run_outcome> out;
  for (const auto& r : records) {
    stats::run_outcome o;
    o.candidate = r["candidate"].value("id", "");
    o.fixture = r["fixture"].value("id", "");
    o.trial = r.value("trial", 0);
    std::string v = r.value("verdict", "not_assessed");
    o.outcome = v == "passed"   ? stats::run_outcome::verdict::passed
                : v == "failed" ? stats::run_outcome::verdict::failed
                                : stats::run_outcome::verdict::error;
    if (o.outcome == stats::run_outcome::verdict::error) {
      const auto& e = r["execution"]["error"];
      const auto& g = r["grading"]["error"];
      o.error_message = e.is_string() ? e.get<std::string>()
                        : g.is_string() ? "grader: " + g.get<std::string>()
                                        : "not assessed";
    }
    if (r["timings"].contains("wall_ms")) o.wall_ms = r["timings"]["wall_ms"].get<double>();
    const auto& u = r["usage"];
    if (u["input_tokens"].is_number()) o.input_tokens = u["input_tokens"].get<uint64_t>();
    if (u["output_tokens"].is_number()) o.output_tokens = u["output_tokens"].get<uint64_t>();
    if (u["cost_usd"].is_number()) o.cost_usd = u["cost_usd"].get<double>();
    out.push_back(std::move(o));
  }
  return out;
}

std::string render_markdown(const stats::summary& s, const std::vector<json>& records,
                            const std::string& suite_name) {
  std::string md = fmt::format("# evalbox report: {}\n\n{} runs.\n\n", suite_name, s.runs);
  md += "## Candidates\n\n| candidate | pass@1 | 95% interval | fixtures (n) | trials | passes | errors |\n"
        "|---|---|---|---|---|---|---|\n";
  for (const auto& c : s.candidates)
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", md_cell(c.candidate),
                      pct(c.pass_at_1), ci_text(c.pass_at_1_ci), c.fixtures, c.trials, c.passes,
                      c.errors);
  md += "\nInfrastructure errors are not task failures: they are left out of every denominator.\n";

  std::set<std::string> fixtures, candidates;
  std::map<std::pair<std::string, std::string>, const stats::cell*> cells;
  for (const auto& c : s.cells) {
    fixtures.insert(c.fixture);
    candidates.insert(c.candidate);
    cells[{c.fixture, c.candidate}] = &c;
  }
  md += "\n## Fixtures × candidates (passes/n)\n\n| fixture |";
  for (const auto& c : candidates) md += " " + md_cell(c) + " |";
  md += "\n|---|";
  for (size_t i = 0; i < candidates.size(); ++i) md += "---|";
  md += "\n";
  for (const auto& f : fixtures) {
    md += "| " + md_cell(f) + " |";
    for (const auto& c : candidates) {
      auto it = cells.find({f, c});
      if (it == cells.end()) md += " – |";
      else
        md += fmt::format(" {}/{}{} |", it->second->passes, it->second->n,
                          it->second->errors ? fmt::format(" ({} err)", it->second->errors) : "");
    }
    md += "\n";
  }
  if (!s.comparisons.empty()) {
    md += "\n## Paired comparison\n\n| candidate | baseline | shared fixtures | mean difference | 95% interval | verdict |\n|---|---|---|---|---|---|\n";
    for (const auto& p : s.comparisons)
      md += fmt::format("| {} | {} | {} | {} | {} | {} |\n", md_cell(p.candidate), md_cell(p.baseline), p.n,
                        p.mean_difference ? fmt::format("{:+.1f} pts", *p.mean_difference * 100) : "n/a",
                        ci_text(p.ci), p.verdict);
  }
  if (!s.flaky.empty()) {
    md += "\n## Flaky fixtures\n\n";
    for (const auto& f : s.flaky) {
      std::string who;
      for (const auto& c : f.candidates) who += (who.empty() ? "" : ", ") + c;
      md += fmt::format("- {} (mixed outcomes for: {})\n", f.fixture, who);
    }
  }
  md += fmt::format("\n## Errors ({})\n\n", s.errors.size());
  if (s.errors.empty()) md += "None.\n";
  for (const auto& e : s.errors)
    md += fmt::format("- {} / {} #{}: {}\n", e.candidate, e.fixture, e.trial, md_cell(e.message));
  md += "\n## Failed checks\n\n";
  bool any = false;
  for (const auto& r : records) {
    if (r.value("verdict", "") != "failed") continue;
    any = true;
    std::string failed;
    for (const auto& c : r["grading"].value("checks", json::array()))
      if (!c.value("passed", false)) failed += (failed.empty() ? "" : ", ") + c.value("id", "");
    md += fmt::format("- {} / {} #{} (runs/{}): {}\n", r["candidate"].value("id", ""),
                      r["fixture"].value("id", ""), r.value("trial", 0), r.value("run_id", ""), failed);
  }
  if (!any) md += "None.\n";
  return md;
}

std::string render_junit(const std::vector<json>& records, const std::string& suite_name) {
  std::map<std::string, std::vector<const json*>> by_candidate;
  for (const auto& r : records) by_candidate[r["candidate"].value("id", "")].push_back(&r);
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x += fmt::format("<testsuites name=\"{}\">\n", xml_escape(suite_name));
  for (const auto& [cand, runs] : by_candidate) {
    int failures = 0, errors = 0;
    for (const auto* r : runs) {
      std::string v = r->value("verdict", "");
      if (v == "failed") ++failures;
      else if (v != "passed") ++errors;
    }
    x += fmt::format("  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\">\n",
                     xml_escape(cand), runs.size(), failures, errors);
    for (const auto* r : runs) {
      double secs = (*r)["timings"].value("wall_ms", 0.0) / 1000.0;
      x += fmt::format("    <testcase classname=\"{}\" name=\"{}#{}\" time=\"{:.3f}\">\n",
                       xml_escape(cand), xml_escape((*r)["fixture"].value("id", "")),
                       r->value("trial", 0), secs);
      std::string v = r->value("verdict", "");
      std::string checks = checks_text(*r);
      if (v == "failed") {
        x += fmt::format("      <failure message=\"task failed\">{}</failure>\n", xml_escape(checks));
      } else if (v != "passed") {
        const auto& e = (*r)["execution"]["error"];
        const auto& g = (*r)["grading"]["error"];
        std::string msg = e.is_string() ? e.get<std::string>() : g.is_string() ? g.get<std::string>() : "not assessed";
        x += fmt::format("      <error message=\"{}\">{}</error>\n", xml_escape(msg), xml_escape(checks));
      }
      x += "    </testcase>\n";
    }
    x += "  </testsuite>\n";
  }
  x += "</testsuites>\n";
  return x;
}

std::string render_terminal_summary(const stats::summary& s) {
  std::string out;
  for (const auto& c : s.candidates)
    out += fmt::format("  {:<20} pass@1 {:>6} {} over {} fixture(s), {} trial(s){}\n", c.candidate,
                       pct(c.pass_at_1), ci_text(c.pass_at_1_ci), c.fixtures, c.trials,
                       c.errors ? fmt::format(", {} error(s)", c.errors) : "");
  for (const auto& p : s.comparisons)
    out += fmt::format("  {} vs {}: {} (n = {})\n", p.candidate, p.baseline, p.verdict, p.n);
  for (const auto& f : s.flaky) out += fmt::format("  flaky: {}\n", f.fixture);
  return out;
}

result<stats::summary> write_reports(const std::filesystem::path& dir,
                                     const std::vector<json>& records,
                                     const std::string& suite_name,
                                     std::optional<std::string> baseline) {
  auto outcomes = outcomes_from_records(records);
  stats::options opts;
  opts.baseline = std::move(baseline);
  auto s = EB_TRY(stats::summarize(outcomes, opts));
  EB_TRY(write_file_atomic(dir / "summary.json", pretty_json(stats::to_json(s))));
  EB_TRY(write_file_atomic(dir / "report.md", render_markdown(s, records, suite_name)));
  EB_TRY(write_file_atomic(dir / "junit.xml", render_junit(records, suite_name)));
  return s;
}

}  // namespace evalbox::harness
