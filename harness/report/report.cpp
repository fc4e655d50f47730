// Report writers (see report.h): summary.json, report.md, junit.xml, the terminal summary, and
// writing the chosen reports. report.html is html.cpp.
#include "harness/report/report.h"

#include "harness/report/svg.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>

#include "sandbox/base/fs.h"
#include "sandbox/base/log.h"

namespace evalbox::harness {

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

std::string count(const std::optional<double>& v) {
  return v ? fmt::format("{:.0f}", *v) : std::string("unknown");
}

std::string error_message_of(const json& r) {
  const json& e = r.contains("execution") ? r["execution"].value("error", json()) : json();
  const json& g = r.contains("grading") ? r["grading"].value("error", json()) : json();
  if (e.is_string()) return e.get<std::string>();
  if (g.is_string()) return "grader: " + g.get<std::string>();
  return "not assessed";
}

}  // namespace report_text

namespace {

using report_text::interval;
using report_text::percent;

// XML text and attributes escape exactly like the SVG labels (svg.h).
std::string xml_escape(std::string_view s) { return svg::escape(s); }

// A Markdown table cell: no pipes or newlines, and no HTML a renderer would interpret.
std::string md_cell(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '|')
      out += "\\|";
    else if (c == '\n' || c == '\r')
      out += ' ';
    else if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else
      out += c;
  }
  return out;
}

const json& field(const json& j, const char* key) {
  static const json null_value;
  return j.is_object() && j.contains(key) ? j[key] : null_value;
}

std::string str(const json& j, const char* key) {
  const json& v = field(j, key);
  return v.is_string() ? v.get<std::string>() : std::string();
}

std::string candidate_of(const json& r) { return str(field(r, "candidate"), "id"); }
std::string fixture_of(const json& r) { return str(field(r, "fixture"), "id"); }
int trial_of(const json& r) {
  const json& t = field(r, "trial");
  return t.is_number_integer() ? t.get<int>() : 0;
}

std::string checks_text(const json& run) {
  std::string out;
  const json& checks = field(field(run, "grading"), "checks");
  if (!checks.is_array()) return out;
  for (const auto& c : checks) {
    std::string detail = str(c, "detail");
    out += fmt::format("{} {}{}\n", c.value("passed", false) ? "PASS" : "FAIL", str(c, "id"),
                       detail.empty() ? "" : ": " + detail);
  }
  return out;
}

std::string failed_check_ids(const json& run) {
  std::string failed;
  const json& checks = field(field(run, "grading"), "checks");
  if (!checks.is_array()) return failed;
  for (const auto& c : checks)
    if (!c.value("passed", false)) failed += (failed.empty() ? "" : ", ") + str(c, "id");
  return failed;
}

std::string ms_text(const std::optional<double>& ms) {
  if (!ms) return "unknown";
  if (*ms >= 1000) return fmt::format("{:.1f}s", *ms / 1000);
  return fmt::format("{:.0f}ms", *ms);
}

std::string tokens_text(const stats::distribution& d) {
  if (d.n == 0) return "unknown";
  std::string t = fmt::format("{:.0f} (p50 {:.0f}, max {:.0f})", *d.total, *d.p50, *d.max);
  if (d.missing) t += fmt::format(", {} run(s) unknown", d.missing);
  return t;
}

std::string p_text(const std::optional<double>& p) {
  if (!p) return "n/a";
  return *p < 0.0001 ? std::string("< 0.0001") : fmt::format("{:.4f}", *p);
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

std::vector<stats::run_outcome> outcomes_from_records(const std::vector<json>& records) {
  std::vector<stats::run_outcome> out;
  out.reserve(records.size());
  for (const auto& r : records) {
    stats::run_outcome o;
    o.candidate = candidate_of(r);
    o.fixture = fixture_of(r);
    o.trial = trial_of(r);
    // Only "passed" and "failed" say anything about the task; anything else (not_assessed, a
    // missing verdict) is an infrastructure error, outside every denominator.
    std::string v = str(r, "verdict");
    o.outcome = v == "passed"   ? stats::run_outcome::verdict::passed
                : v == "failed" ? stats::run_outcome::verdict::failed
                                : stats::run_outcome::verdict::error;
    if (o.outcome == stats::run_outcome::verdict::error)
      o.error_message = report_text::error_message_of(r);
    const json& wall = field(field(r, "timings"), "wall_ms");
    if (wall.is_number()) o.wall_ms = wall.get<double>();
    const json& u = field(r, "usage");
    if (field(u, "input_tokens").is_number_unsigned())
      o.input_tokens = u["input_tokens"].get<uint64_t>();
    if (field(u, "output_tokens").is_number_unsigned())
      o.output_tokens = u["output_tokens"].get<uint64_t>();
    if (field(u, "cost_usd").is_number()) o.cost_usd = u["cost_usd"].get<double>();
    out.push_back(std::move(o));
  }
  return out;
}

std::vector<json> latest_records(const std::vector<json>& records) {
  std::map<std::tuple<std::string, std::string, int>, size_t> last;
  for (size_t i = 0; i < records.size(); ++i)
    last[{candidate_of(records[i]), fixture_of(records[i]), trial_of(records[i])}] = i;
  if (last.size() == records.size()) return records;
  std::vector<bool> keep(records.size(), false);
  for (const auto& [key, i] : last) keep[i] = true;
  std::vector<json> out;
  out.reserve(last.size());
  for (size_t i = 0; i < records.size(); ++i)
    if (keep[i]) out.push_back(records[i]);
  return out;
}

std::string suite_name_of(const std::vector<json>& records, std::string fallback) {
  for (const auto& r : records) {
    std::string s = str(r, "suite");
    if (!s.empty()) return s;
  }
  return fallback;
}

std::string render_markdown(const stats::summary& s, const std::vector<json>& records,
                            const std::string& suite_name) {
  std::string md = fmt::format("# evalbox report: {}\n\n{} runs, {} infrastructure error(s).\n\n",
                               md_cell(suite_name), s.runs, s.errors.size());
  md += fmt::format(
      "pass@1 is the mean over fixtures of per-fixture pass rates; its {:.0f}% interval is a "
      "fixture-clustered bootstrap, n = fixtures. Infrastructure errors are not task failures: "
      "they are left out of every denominator and listed under Errors.\n\n",
      s.settings.level * 100);
  md +=
      "## Candidates\n\n"
      "| candidate | pass@1 | interval | n (fixtures) | trials | passes | errors | pooled rate "
      "(n = trials) |\n|---|---|---|---|---|---|---|---|\n";
  for (const auto& c : s.candidates)
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} {} |\n", md_cell(c.candidate),
                      percent(c.pass_at_1), interval(c.pass_at_1_ci), c.fixtures, c.trials,
                      c.passes, c.errors, percent(c.pooled_rate), interval(c.pooled_ci));

  // pass@k only where every fixture has k trials (max_k), so each estimate is unbiased.
  uint64_t max_k = 0;
  for (const auto& c : s.candidates) max_k = std::max(max_k, c.max_k);
  if (max_k > 1) {
    uint64_t shown = std::min<uint64_t>(max_k, 10);
    md +=
        "\n## pass@k and pass^k\n\npass@k: at least one of k trials passes; pass^k: all k "
        "pass. Mean over fixtures (n = fixtures); shown for k up to the fewest trials any "
        "fixture has.\n\n| candidate | n |";
    for (uint64_t k = 1; k <= shown; ++k) md += fmt::format(" k={} |", k);
    md += "\n|---|---|";
    for (uint64_t k = 1; k <= shown; ++k) md += "---|";
    md += "\n";
    for (const auto& c : s.candidates) {
      md += fmt::format("| {} | {} |", md_cell(c.candidate), c.fixtures);
      for (uint64_t k = 1; k <= shown; ++k) {
        if (k > c.max_k) {
          md += " – |";
          continue;
        }
        md += fmt::format(" {} / {} |", percent(c.pass_at[k - 1].value),
                          percent(c.pass_hat[k - 1].value));
      }
      md += "\n";
    }
  }

  std::set<std::string> fixtures, candidates;
  std::map<std::pair<std::string, std::string>, const stats::cell*> cells;
  for (const auto& c : s.cells) {
    fixtures.insert(c.fixture);
    candidates.insert(c.candidate);
    cells[{c.fixture, c.candidate}] = &c;
  }
  md += "\n## Fixtures × candidates (passes/n, errors apart)\n\n| fixture |";
  for (const auto& c : candidates) md += " " + md_cell(c) + " |";
  md += "\n|---|";
  for (size_t i = 0; i < candidates.size(); ++i) md += "---|";
  md += "\n";
  for (const auto& f : fixtures) {
    md += "| " + md_cell(f) + " |";
    for (const auto& c : candidates) {
      auto it = cells.find({f, c});
      if (it == cells.end()) {
        md += " – |";
        continue;
      }
      const stats::cell& cl = *it->second;
      md += fmt::format(" {}/{}{} |", cl.passes, cl.n,
                        cl.errors ? fmt::format(" ({} err)", cl.errors) : "");
    }
    md += "\n";
  }

  if (!s.comparisons.empty()) {
    md +=
        "\n## Paired comparison\n\nOver shared fixtures (both candidates have n > 0). The "
        "verdict needs the bootstrap interval to exclude 0 and both tests to reject.\n\n"
        "| candidate | baseline | n (shared fixtures) | mean difference | interval | sign-flip p "
        "| McNemar p | verdict |\n|---|---|---|---|---|---|---|---|\n";
    for (const auto& p : s.comparisons) {
      md += fmt::format(
          "| {} | {} | {} | {} | {} | {} | {} | {} |\n", md_cell(p.candidate), md_cell(p.baseline),
          p.n, p.mean_difference ? fmt::format("{:+.1f} pts", *p.mean_difference * 100) : "n/a",
          p.ci ? fmt::format("[{:+.1f}, {:+.1f}]", p.ci->lo * 100, p.ci->hi * 100) : "n/a",
          p_text(p.sign_flip_p),
          p.mcnemar ? fmt::format("{} (b={}, c={})", p_text(p.mcnemar->p_value), p.mcnemar->b,
                                  p.mcnemar->c)
                    : "n/a",
          p.verdict);
    }
    for (const auto& p : s.comparisons) {
      std::string rows;
      for (const auto& d : p.differences) {
        if (d.difference == 0.0) continue;
        rows += fmt::format("| {} | {} (n={}) | {} (n={}) | {:+.1f} pts |\n", md_cell(d.fixture),
                            percent(d.candidate_rate), d.candidate_n, percent(d.baseline_rate),
                            d.baseline_n, d.difference * 100);
      }
      md += fmt::format("\n### {} vs {}: fixtures where they differ\n\n", md_cell(p.candidate),
                        md_cell(p.baseline));
      if (rows.empty()) {
        md += "None.\n";
      } else {
        md += fmt::format("| fixture | {} | {} | difference |\n|---|---|---|---|\n",
                          md_cell(p.candidate), md_cell(p.baseline));
        md += rows;
      }
      if (!p.candidate_only.empty() || !p.baseline_only.empty())
        md += fmt::format("\nNot compared (not shared): {} only for {}, {} only for {}.\n",
                          p.candidate_only.size(), md_cell(p.candidate), p.baseline_only.size(),
                          md_cell(p.baseline));
    }
  }

  md += fmt::format("\n## Flaky fixtures ({})\n\n", s.flaky.size());
  if (s.flaky.empty()) md += "None.\n";
  for (const auto& f : s.flaky) {
    std::string who;
    for (const auto& c : f.candidates) who += (who.empty() ? "" : ", ") + c;
    md += fmt::format("- {} (mixed outcomes for: {}){}\n", md_cell(f.fixture), md_cell(who),
                      f.oracle ? " — the oracle itself is unstable: fix the fixture" : "");
  }

  md += fmt::format("\n## Errors ({})\n\nInfrastructure errors, not task failures.\n\n",
                    s.errors.size());
  if (s.errors.empty()) md += "None.\n";
  for (const auto& e : s.errors)
    md += fmt::format("- {} / {} #{}: {}\n", md_cell(e.candidate), md_cell(e.fixture), e.trial,
                      md_cell(e.message));

  md +=
      "\n## Usage\n\nOver all runs, errored ones included. Unknown is unknown, never 0.\n\n"
      "| candidate | runs | input tokens | output tokens | cost (USD) | wall p50 | wall p90 | "
      "wall p99 | wall max |\n|---|---|---|---|---|---|---|---|---|\n";
  auto usage_row = [&](const std::string& who, const stats::usage& u) {
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", md_cell(who), u.runs,
                      tokens_text(u.input_tokens), tokens_text(u.output_tokens),
                      report_text::cost(u.cost), ms_text(u.wall_ms.p50), ms_text(u.wall_ms.p90),
                      ms_text(u.wall_ms.p99), ms_text(u.wall_ms.max));
  };
  for (const auto& c : s.candidates) usage_row(c.candidate, c.use);
  usage_row("all", s.overall);

  md += "\n## Failed checks\n\n";
  bool any = false;
  for (const auto& r : records) {
    if (str(r, "verdict") != "failed") continue;
    any = true;
    md += fmt::format("- {} / {} #{} (runs/{}): {}\n", md_cell(candidate_of(r)),
                      md_cell(fixture_of(r)), trial_of(r), md_cell(str(r, "run_id")),
                      md_cell(failed_check_ids(r)));
  }
  if (!any) md += "None.\n";
  return md;
}

std::string render_junit(const std::vector<json>& records, const std::string& suite_name) {
  std::map<std::string, std::vector<const json*>> by_candidate;
  for (const auto& r : records) by_candidate[candidate_of(r)].push_back(&r);
  size_t total_failures = 0, total_errors = 0;
  std::string body;
  for (const auto& [cand, runs] : by_candidate) {
    size_t failures = 0, errors = 0;
    std::string cases;
    for (const auto* r : runs) {
      std::string v = str(*r, "verdict");
      const json& wall = field(field(*r, "timings"), "wall_ms");
      double secs = wall.is_number() ? wall.get<double>() / 1000.0 : 0.0;
      cases += fmt::format("    <testcase classname=\"{}\" name=\"{}#{}\" time=\"{:.3f}\">\n",
                           xml_escape(cand), xml_escape(fixture_of(*r)), trial_of(*r), secs);
      std::string checks = checks_text(*r);
      if (v == "failed") {
        // A task failure: the agent ran and its work did not pass the checks.
        ++failures;
        cases +=
            fmt::format("      <failure message=\"{}\" type=\"task\">{}</failure>\n",
                        xml_escape("failed checks: " + failed_check_ids(*r)), xml_escape(checks));
      } else if (v != "passed") {
        // The run could not be carried out or graded: never a task failure.
        ++errors;
        std::string kind = str(field(*r, "execution"), "error_kind");
        if (kind.empty() && str(field(*r, "grading"), "status") == "error") kind = "grader";
        std::string msg = report_text::error_message_of(*r);
        cases += fmt::format("      <error message=\"{}\" type=\"{}\">{}</error>\n",
                             xml_escape(msg), xml_escape(kind.empty() ? "infrastructure" : kind),
                             xml_escape(msg + "\n" + checks));
      } else if (!checks.empty()) {
        cases += fmt::format("      <system-out>{}</system-out>\n", xml_escape(checks));
      }
      cases += "    </testcase>\n";
    }
    body += fmt::format("  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\">\n",
                        xml_escape(cand), runs.size(), failures, errors);
    body += cases;
    body += "  </testsuite>\n";
    total_failures += failures;
    total_errors += errors;
  }
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x += fmt::format("<testsuites name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\">\n",
                   xml_escape(suite_name), records.size(), total_failures, total_errors);
  x += body;
  x += "</testsuites>\n";
  return x;
}

std::string render_terminal_summary(const stats::summary& s) {
  std::string out;
  for (const auto& c : s.candidates)
    out += fmt::format("  {:<20} pass@1 {:>6} {} over {} fixture(s), {} trial(s){}\n", c.candidate,
                       percent(c.pass_at_1), interval(c.pass_at_1_ci), c.fixtures, c.trials,
                       c.errors ? fmt::format(", {} error(s) not counted", c.errors) : "");
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
  auto outcomes = outcomes_from_records(records);
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

result<stats::summary> write_reports(const std::filesystem::path& dir,
                                     const std::vector<json>& records,
                                     const std::string& suite_name,
                                     std::optional<std::string> baseline,
                                     std::span<const report_format> formats) {
  const std::vector<json> current = latest_records(records);
  if (current.size() != records.size())
    log::info(
        "reports: {} superseded record(s) ignored (a later record has the same candidate, "
        "fixture and trial)",
        records.size() - current.size());
  auto s = EB_TRY(summarize_records(current, std::move(baseline)));
  for (report_format f : formats) {
    std::string text;
    switch (f) {
      case report_format::json:
        text = pretty_json(stats::to_json(s));
        break;
      case report_format::md:
        text = render_markdown(s, current, suite_name);
        break;
      case report_format::html:
        text = render_html(s, current, suite_name, dir);
        break;
      case report_format::junit:
        text = render_junit(current, suite_name);
        break;
    }
    EB_TRY_CTX(write_file_atomic(dir / report_file_name(f), text),
               fmt::format("write {}", report_file_name(f)));
  }
  return s;
}

}  // namespace evalbox::harness
