// report.md (see report.h): the summary as Markdown, one function per section in the order
// the report has them. Only the last section reads records back (each failed run's, once).
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <ostream>
#include <set>
#include <sstream>

#include "base/json.h"
#include "harness/report/report.h"

namespace evalbox::harness {
inline namespace report {

namespace {

using report_text::interval;
using report_text::percent;

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

// The title, the run count and what pass@1 and its interval mean.
void write_heading(std::ostream& out, const stats::summary& s, const std::string& suite_name) {
  out << fmt::format("# evalbox report: {}\n\n{} runs, {} infrastructure error(s).\n\n",
                     md_cell(suite_name), s.runs, s.errors.size());
  if (s.missing)
    out << fmt::format(
        "**Partial results: {} of the plan's {} runs are missing** (not run, or not "
        "merged): every number below is over the {} recorded runs only.\n\n",
        s.missing->missing, s.missing->planned, s.runs);
  if (const std::string note = report_text::grading_note(s); !note.empty())
    out << "**Grading:** " << note << "\n\n";
  out << fmt::format(
      "pass@1 is the mean over fixtures of per-fixture pass rates; its {:.0f}% interval accounts "
      "for how fixtures differ and does not collapse at 0 or 100% (docs/statistics.md), n = "
      "fixtures. Infrastructure errors are not task failures: "
      "they are left out of every denominator and listed under Errors.\n\n",
      s.settings.level * 100);
}

void write_candidates(std::ostream& out, const stats::summary& s) {
  out << "## Candidates\n\n"
         "| candidate | pass@1 | interval | n (fixtures) | trials | passes | errors | pooled rate "
         "(n = trials) |\n|---|---|---|---|---|---|---|---|\n";
  for (const auto& c : s.candidates)
    out << fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} {} |\n", md_cell(c.candidate),
                       percent(c.pass_at_1), interval(c.pass_at_1_ci), c.fixtures, c.trials,
                       c.passes, c.errors, percent(c.pooled_rate), interval(c.pooled_ci));
}

// pass@k only where every fixture has k trials (max_k), so each estimate is unbiased; nothing
// when no candidate has two trials of every fixture.
void write_pass_at_k(std::ostream& out, const stats::summary& s) {
  uint64_t max_k = 0;
  for (const auto& c : s.candidates) max_k = std::max(max_k, c.max_k);
  if (max_k <= 1) return;
  uint64_t shown = std::min<uint64_t>(max_k, 10);
  out << "\n## pass@k and pass^k\n\npass@k: at least one of k trials passes; pass^k: all k "
         "pass. Mean over fixtures (n = fixtures); shown for k up to the fewest trials any "
         "fixture has.\n\n| candidate | n |";
  for (uint64_t k = 1; k <= shown; ++k) out << fmt::format(" k={} |", k);
  out << "\n|---|---|";
  for (uint64_t k = 1; k <= shown; ++k) out << "---|";
  out << "\n";
  for (const auto& c : s.candidates) {
    out << fmt::format("| {} | {} |", md_cell(c.candidate), c.fixtures);
    for (uint64_t k = 1; k <= shown; ++k) {
      if (k > c.max_k) {
        out << " – |";
        continue;
      }
      out << fmt::format(" {} / {} |", percent(c.pass_at[k - 1].value),
                         percent(c.pass_hat[k - 1].value));
    }
    out << "\n";
  }
}

// One row per fixture, one column per candidate: passes/n, errors apart.
void write_cells(std::ostream& out, const stats::summary& s) {
  std::set<std::string> fixtures, candidates;
  std::map<std::pair<std::string, std::string>, const stats::cell*> cells;
  for (const auto& c : s.cells) {
    fixtures.insert(c.fixture);
    candidates.insert(c.candidate);
    cells[{c.fixture, c.candidate}] = &c;
  }
  out << "\n## Fixtures × candidates (passes/n, errors apart)\n\n| fixture |";
  for (const auto& c : candidates) out << " " + md_cell(c) + " |";
  out << "\n|---|";
  for (size_t i = 0; i < candidates.size(); ++i) out << "---|";
  out << "\n";
  for (const auto& f : fixtures) {
    out << "| " + md_cell(f) + " |";
    for (const auto& c : candidates) {
      auto it = cells.find({f, c});
      if (it == cells.end()) {
        out << " – |";
        continue;
      }
      const stats::cell& cl = *it->second;
      out << fmt::format(" {}/{}{} |", cl.passes, cl.n,
                         cl.errors ? fmt::format(" ({} err)", cl.errors) : "");
    }
    out << "\n";
  }
}

// The fixtures where a candidate and the baseline differ, and what they did not share.
void write_differences(std::ostream& out, const stats::paired_comparison& p) {
  std::string rows;
  for (const auto& d : p.differences) {
    if (d.difference == 0.0) continue;
    rows += fmt::format("| {} | {} (n={}) | {} (n={}) | {:+.1f} pts |\n", md_cell(d.fixture),
                        percent(d.candidate_rate), d.candidate_n, percent(d.baseline_rate),
                        d.baseline_n, d.difference * 100);
  }
  out << fmt::format("\n### {} vs {}: fixtures where they differ\n\n", md_cell(p.candidate),
                     md_cell(p.baseline));
  if (rows.empty()) {
    out << "None.\n";
  } else {
    out << fmt::format("| fixture | {} | {} | difference |\n|---|---|---|---|\n",
                       md_cell(p.candidate), md_cell(p.baseline));
    out << rows;
  }
  if (!p.candidate_only.empty() || !p.baseline_only.empty())
    out << fmt::format("\nNot compared (not shared): {} only for {}, {} only for {}.\n",
                       p.candidate_only.size(), md_cell(p.candidate), p.baseline_only.size(),
                       md_cell(p.baseline));
}

// Each candidate against the baseline; nothing without a baseline.
void write_comparisons(std::ostream& out, const stats::summary& s) {
  if (s.comparisons.empty()) return;
  out << "\n## Paired comparison\n\nOver shared fixtures (both candidates have n > 0). The "
         "verdict needs the paired interval to exclude 0 and both tests to reject.\n\n"
         "| candidate | baseline | n (shared fixtures) | mean difference | interval | sign-flip "
         "p "
         "| McNemar p | verdict |\n|---|---|---|---|---|---|---|---|\n";
  for (const auto& p : s.comparisons) {
    out << fmt::format(
        "| {} | {} | {} | {} | {} | {} | {} | {} |\n", md_cell(p.candidate), md_cell(p.baseline),
        p.n, p.mean_difference ? fmt::format("{:+.1f} pts", *p.mean_difference * 100) : "n/a",
        p.ci ? fmt::format("[{:+.1f}, {:+.1f}]", p.ci->lo * 100, p.ci->hi * 100) : "n/a",
        p_text(p.sign_flip_p),
        p.mcnemar
            ? fmt::format("{} (b={}, c={})", p_text(p.mcnemar->p_value), p.mcnemar->b, p.mcnemar->c)
            : "n/a",
        p.verdict);
  }
  for (const auto& p : s.comparisons) write_differences(out, p);
}

void write_flaky(std::ostream& out, const stats::summary& s) {
  out << fmt::format("\n## Flaky fixtures ({})\n\n", s.flaky.size());
  if (s.flaky.empty()) out << "None.\n";
  for (const auto& f : s.flaky) {
    std::string who;
    for (const auto& c : f.candidates) who += (who.empty() ? "" : ", ") + c;
    out << fmt::format("- {} (mixed outcomes for: {}){}\n", md_cell(f.fixture), md_cell(who),
                       f.oracle ? " — the oracle itself is unstable: fix the fixture" : "");
  }
}

void write_errors(std::ostream& out, const stats::summary& s) {
  out << fmt::format("\n## Errors ({})\n\nInfrastructure errors, not task failures.\n\n",
                     s.errors.size());
  if (s.errors.empty()) out << "None.\n";
  for (const auto& e : s.errors)
    out << fmt::format("- {} / {} #{}: {}\n", md_cell(e.candidate), md_cell(e.fixture), e.trial,
                       md_cell(e.message));
}

// Tokens, cost and wall time per candidate, then over every run.
void write_usage(std::ostream& out, const stats::summary& s) {
  out << "\n## Usage\n\nOver all runs, errored ones included. Unknown is unknown, never 0.\n\n"
         "| candidate | runs | input tokens | output tokens | cost (USD) | wall p50 | wall p90 | "
         "wall p99 | wall max |\n|---|---|---|---|---|---|---|---|---|\n";
  auto usage_row = [&](const std::string& who, const stats::usage& u) {
    out << fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", md_cell(who), u.runs,
                       tokens_text(u.input_tokens), tokens_text(u.output_tokens),
                       report_text::cost(u.cost), ms_text(u.wall_ms.p50), ms_text(u.wall_ms.p90),
                       ms_text(u.wall_ms.p99), ms_text(u.wall_ms.max));
  };
  for (const auto& c : s.candidates) usage_row(c.candidate, c.use);
  usage_row("all", s.overall);
  if (s.overall.gateway.runs > 0) {
    // Candidates whose model calls went through a gateway: exact usage and the calls' latency.
    out << "\n### Model gateway\n\nTokens and cost of gateway runs were counted by the run's "
           "model gateway from every response: exact, whatever the client reports. Latency: "
           "over the runs, each run's median time to first byte and median call length.\n\n"
           "| candidate | gateway runs | cost (USD, exact) | TTFB p50 | TTFB p90 | call p50 | call "
           "p90 | budget exhausted |\n|---|---|---|---|---|---|---|---|\n";
    for (const auto& c : s.candidates) {
      const stats::gateway_usage& g = c.use.gateway;
      if (g.runs == 0) continue;
      out << fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |\n", md_cell(c.candidate),
                         g.runs, report_text::cost(c.use.cost), ms_text(g.ttfb_ms.p50),
                         ms_text(g.ttfb_ms.p90), ms_text(g.call_ms.p50), ms_text(g.call_ms.p90),
                         g.budget_exhausted);
    }
  }
  if (s.overall.credentials.runs > 0) {
    // Runs that waited for a free lease of their credentials before they started.
    out << "\n### Credential wait\n\nRuns that waited for a free lease of their credentials "
           "before they started (a login serves one run at a time; a credential with "
           "max_concurrent N, N runs): over those runs.\n\n"
           "| candidate | runs that waited | total wait | wait p50 | longest wait |\n"
           "|---|---|---|---|---|\n";
    for (const auto& c : s.candidates) {
      const stats::credential_wait& w = c.use.credentials;
      if (w.runs == 0) continue;
      out << fmt::format("| {} | {} | {} | {} | {} |\n", md_cell(c.candidate), w.runs,
                         ms_text(w.wait_ms.total), ms_text(w.wait_ms.p50), ms_text(w.wait_ms.max));
    }
  }
  if (s.overall.judge.runs == 0) return;
  // The judges of judge checks: their own tokens and cost, never in the candidate's above.
  out << "\n### Judge usage\n\nThe judges of judge checks, over the judged runs; not included "
         "in the candidates' usage above.\n\n"
         "| candidate | judged runs | judge input tokens | judge output tokens | judge cost (USD) "
         "|\n|---|---|---|---|---|\n";
  auto judge_row = [&](const std::string& who, const stats::judge_usage& j) {
    out << fmt::format("| {} | {} | {} | {} | {} |\n", md_cell(who), j.runs,
                       tokens_text(j.input_tokens), tokens_text(j.output_tokens),
                       report_text::cost(j.cost));
  };
  for (const auto& c : s.candidates) judge_row(c.candidate, c.use.judge);
  judge_row("all", s.overall.judge);
}

// The one section that needs the records: each failed run's failed checks, read back in turn.
status write_failed_checks(std::ostream& out, const run_index& runs) {
  out << "\n## Failed checks\n\n";
  bool any = false;
  for (size_t i = 0; i < runs.size(); ++i) {
    const stats::run_outcome& o = runs.outcome(i);
    if (o.outcome != stats::run_outcome::verdict::failed) continue;
    any = true;
    const run_detail r = EB_TRY(runs.read(i));
    out << fmt::format("- {} / {} #{} (runs/{}): {}\n", md_cell(o.candidate), md_cell(o.fixture),
                       o.trial, md_cell(runs.run_id(i)), md_cell(report_text::failed_check_ids(r)));
  }
  if (!any) out << "None.\n";
  return {};
}

}  // namespace

status write_markdown(std::ostream& out, const stats::summary& s, const run_index& runs,
                      const std::string& suite_name) {
  write_heading(out, s, suite_name);
  write_candidates(out, s);
  write_pass_at_k(out, s);
  write_cells(out, s);
  write_comparisons(out, s);
  write_flaky(out, s);
  write_errors(out, s);
  write_usage(out, s);
  return write_failed_checks(out, runs);
}

std::string render_markdown(const stats::summary& s, const std::vector<json>& records,
                            const std::string& suite_name) {
  std::ostringstream out;
  // Records in memory: reading them back cannot fail.
  (void)write_markdown(out, s, run_index::of_records(records), suite_name);
  return std::move(out).str();
}

}  // namespace report
}  // namespace evalbox::harness
