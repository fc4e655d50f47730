// Report writers (see report.h): summary.json, report.md, junit.xml, the terminal summary, and
// writing the chosen reports. report.html is html.cpp.
#include "harness/report/report.h"

#include "harness/report/svg.h"

#include <fmt/ranges.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <map>
#include <ostream>
#include <set>
#include <sstream>

#include "sandbox/base/fs.h"
#include "sandbox/base/log.h"
#include "sandbox/base/unique_fd.h"

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
  const json& e = field(field(r, "execution"), "error");  // any shape: records come from disk
  const json& g = field(field(r, "grading"), "error");
  if (e.is_string()) return e.get<std::string>();
  if (g.is_string()) return "grader: " + g.get<std::string>();
  return "not assessed";
}


const json& field(const json& j, const char* key) {
  static const json null_value;
  return j.is_object() && j.contains(key) ? j[key] : null_value;
}

std::string str(const json& j, const char* key) {
  const json& v = field(j, key);
  return v.is_string() ? v.get<std::string>() : std::string();
}

bool passed(const json& check) {
  const json& v = field(check, "passed");
  return v.is_boolean() && v.get<bool>();
}

}  // namespace report_text

namespace {

using report_text::field;
using report_text::str;

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
    out += fmt::format("{} {}{}\n", report_text::passed(c) ? "PASS" : "FAIL", str(c, "id"),
                       detail.empty() ? "" : ": " + detail);
  }
  return out;
}

std::string failed_check_ids(const json& run) {
  std::string failed;
  const json& checks = field(field(run, "grading"), "checks");
  if (!checks.is_array()) return failed;
  for (const auto& c : checks)
    if (!report_text::passed(c)) failed += (failed.empty() ? "" : ", ") + str(c, "id");
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

// The statistics' view of one record.
stats::run_outcome outcome_of(const json& r) {
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
  return o;
}

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

// An ostream buffer over a file descriptor: 64 KiB writes; the first failed write is kept.
class fd_streambuf final : public std::streambuf {
 public:
  explicit fd_streambuf(int fd) : fd_(fd) { setp(buf_.data(), buf_.data() + buf_.size()); }
  [[nodiscard]] int failed_errno() const noexcept { return errno_; }

 protected:
  int_type overflow(int_type c) override {
    if (!flush()) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  int sync() override { return flush() ? 0 : -1; }

 private:
  bool flush() {
    const char* p = pbase();
    size_t n = static_cast<size_t>(pptr() - pbase());
    while (n > 0) {
      ssize_t w = ::write(fd_, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) {
        errno_ = errno;
        return false;
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
    setp(buf_.data(), buf_.data() + buf_.size());
    return true;
  }

  int fd_;
  int errno_ = 0;
  std::array<char, 64 * 1024> buf_;
};

// write_file_atomic for text written as it is rendered: a temporary sibling, fsynced and
// renamed over `path`, then the directory fsynced. A reader sees the old or the new report,
// never a torn one, and the report is never held in memory whole.
status write_file_streamed(const std::filesystem::path& path,
                           const std::function<status(std::ostream&)>& render) {
  std::filesystem::path tmp = path;
  tmp += ".tmp-" + random_suffix();
  unique_fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (!fd) return sys_error(errno, "create {}", tmp.string());
  auto discard = [&](error e) -> status {
    ::unlink(tmp.c_str());
    return std::unexpected(std::move(e));
  };
  {
    auto buf = std::make_unique<fd_streambuf>(fd.get());
    std::ostream out(buf.get());
    if (auto s = render(out); !s) return discard(std::move(s).error());
    out.flush();
    if (!out) return discard(sys_error(buf->failed_errno(), "write {}", tmp.string()).error());
  }
  if (::fsync(fd.get()) != 0) return discard(sys_error(errno, "fsync {}", tmp.string()).error());
  fd.reset();
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    return discard(sys_error(errno, "rename {} -> {}", tmp.string(), path.string()).error());
  std::filesystem::path parent = path.parent_path().empty() ? "." : path.parent_path();
  unique_fd dir(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) return sys_error(errno, "open {}", parent.string());
  if (::fsync(dir.get()) != 0) return sys_error(errno, "fsync {}", parent.string());
  return {};
}

}  // namespace

// Indexes records one at a time: each becomes a compact entry, and an entry of the same
// (candidate, fixture, trial) seen before is marked superseded (latest_records' rule).
class run_index::builder {
 public:
  builder(run_index& index, bool newest_only)
      : index_(index), newest_only_(newest_only), newest_(trial_less{&index.outcomes_}) {}

  void add(const json& record, record_location where) {
    ++index_.seen_;
    if (index_.suite_.empty()) index_.suite_ = str(record, "suite");
    index_.outcomes_.push_back(outcome_of(record));
    index_.run_ids_.push_back(str(record, "run_id"));
    index_.where_.push_back(where);
    superseded_.push_back(false);
    if (!newest_only_) return;
    const size_t i = index_.outcomes_.size() - 1;
    auto [it, inserted] = newest_.insert(i);
    if (inserted) return;
    superseded_[*it] = true;
    auto node = newest_.extract(it);
    node.value() = i;  // the same trial, so the same place in the set
    newest_.insert(std::move(node));
  }

  // Drops the superseded entries, keeping record order.
  void finish() {
    newest_.clear();
    size_t kept = 0;
    for (size_t i = 0; i < superseded_.size(); ++i) {
      if (superseded_[i]) continue;
      if (kept != i) {
        index_.outcomes_[kept] = std::move(index_.outcomes_[i]);
        index_.run_ids_[kept] = std::move(index_.run_ids_[i]);
        index_.where_[kept] = index_.where_[i];
      }
      ++kept;
    }
    index_.outcomes_.resize(kept);
    index_.run_ids_.resize(kept);
    index_.where_.resize(kept);
    superseded_.clear();
  }

 private:
  // Orders entry positions by the trial they record.
  struct trial_less {
    const std::vector<stats::run_outcome>* outcomes;
    bool operator()(size_t a, size_t b) const {
      const auto& x = (*outcomes)[a];
      const auto& y = (*outcomes)[b];
      return std::tie(x.candidate, x.fixture, x.trial) < std::tie(y.candidate, y.fixture, y.trial);
    }
  };

  run_index& index_;
  bool newest_only_;
  std::set<size_t, trial_less> newest_;  // the newest entry of each trial so far
  std::vector<bool> superseded_;
};

result<run_index> run_index::of_results(const results_dir& dir, const record_visitor& visit) {
  run_index index;
  builder b(index, /*newest_only=*/true);
  auto add = [&](const json& record, record_location where) -> status {
    if (visit) EB_TRY(visit(record));
    b.add(record, where);
    return {};
  };
  EB_TRY(dir.for_each_record(add));
  b.finish();
  if (!index.empty()) index.reader_ = EB_TRY(record_reader::open(dir.results_file()));
  return index;
}

run_index run_index::of_records(std::span<const json> records, bool newest_only) {
  run_index index;
  builder b(index, newest_only);
  for (size_t i = 0; i < records.size(); ++i) b.add(records[i], {i, 0});
  b.finish();
  index.memory_ = records;
  return index;
}

std::string run_index::suite_name(std::string fallback) const {
  return suite_.empty() ? fallback : suite_;
}

result<json> run_index::read(size_t run) const {
  ++reads_;
  if (reader_) return reader_->read(where_[run]);
  return memory_[static_cast<size_t>(where_[run].offset)];
}

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
  for (const auto& r : records) out.push_back(outcome_of(r));
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

status write_markdown(std::ostream& out, const stats::summary& s, const run_index& runs,
                      const std::string& suite_name) {
  out << fmt::format("# evalbox report: {}\n\n{} runs, {} infrastructure error(s).\n\n",
                     md_cell(suite_name), s.runs, s.errors.size());
  if (s.missing)
    out << fmt::format(
        "**Partial results: {} of the plan's {} runs are missing** (not run, or not "
        "merged): every number below is over the {} recorded runs only.\n\n",
        s.missing->missing, s.missing->planned, s.runs);
  out << fmt::format(
      "pass@1 is the mean over fixtures of per-fixture pass rates; its {:.0f}% interval is a "
      "fixture-clustered bootstrap, n = fixtures. Infrastructure errors are not task failures: "
      "they are left out of every denominator and listed under Errors.\n\n",
      s.settings.level * 100);
  out << "## Candidates\n\n"
         "| candidate | pass@1 | interval | n (fixtures) | trials | passes | errors | pooled rate "
         "(n = trials) |\n|---|---|---|---|---|---|---|---|\n";
  for (const auto& c : s.candidates)
    out << fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} {} |\n", md_cell(c.candidate),
                       percent(c.pass_at_1), interval(c.pass_at_1_ci), c.fixtures, c.trials,
                       c.passes, c.errors, percent(c.pooled_rate), interval(c.pooled_ci));

  // pass@k only where every fixture has k trials (max_k), so each estimate is unbiased.
  uint64_t max_k = 0;
  for (const auto& c : s.candidates) max_k = std::max(max_k, c.max_k);
  if (max_k > 1) {
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

  if (!s.comparisons.empty()) {
    out << "\n## Paired comparison\n\nOver shared fixtures (both candidates have n > 0). The "
           "verdict needs the bootstrap interval to exclude 0 and both tests to reject.\n\n"
           "| candidate | baseline | n (shared fixtures) | mean difference | interval | sign-flip "
           "p "
           "| McNemar p | verdict |\n|---|---|---|---|---|---|---|---|\n";
    for (const auto& p : s.comparisons) {
      out << fmt::format(
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
  }

  out << fmt::format("\n## Flaky fixtures ({})\n\n", s.flaky.size());
  if (s.flaky.empty()) out << "None.\n";
  for (const auto& f : s.flaky) {
    std::string who;
    for (const auto& c : f.candidates) who += (who.empty() ? "" : ", ") + c;
    out << fmt::format("- {} (mixed outcomes for: {}){}\n", md_cell(f.fixture), md_cell(who),
                       f.oracle ? " — the oracle itself is unstable: fix the fixture" : "");
  }

  out << fmt::format("\n## Errors ({})\n\nInfrastructure errors, not task failures.\n\n",
                     s.errors.size());
  if (s.errors.empty()) out << "None.\n";
  for (const auto& e : s.errors)
    out << fmt::format("- {} / {} #{}: {}\n", md_cell(e.candidate), md_cell(e.fixture), e.trial,
                       md_cell(e.message));

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

  out << "\n## Failed checks\n\n";
  // The one part that needs the records: each failed run's failed checks, read back in turn.
  bool any = false;
  for (size_t i = 0; i < runs.size(); ++i) {
    const stats::run_outcome& o = runs.outcome(i);
    if (o.outcome != stats::run_outcome::verdict::failed) continue;
    any = true;
    json r = EB_TRY(runs.read(i));
    out << fmt::format("- {} / {} #{} (runs/{}): {}\n", md_cell(o.candidate), md_cell(o.fixture),
                       o.trial, md_cell(runs.run_id(i)), md_cell(failed_check_ids(r)));
  }
  if (!any) out << "None.\n";
  return {};
}

std::string render_markdown(const stats::summary& s, const std::vector<json>& records,
                            const std::string& suite_name) {
  std::ostringstream out;
  // Records in memory: reading them back cannot fail.
  (void)write_markdown(out, s, run_index::of_records(records), suite_name);
  return std::move(out).str();
}

status write_junit(std::ostream& out, const run_index& runs, const std::string& suite_name) {
  using verdict = stats::run_outcome::verdict;
  // The totals head the file, so they come from the index; each testcase then reads its record.
  std::map<std::string, std::vector<size_t>> by_candidate;
  size_t total_failures = 0, total_errors = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    const stats::run_outcome& o = runs.outcome(i);
    by_candidate[o.candidate].push_back(i);
    total_failures += o.outcome == verdict::failed;
    total_errors += o.outcome == verdict::error;
  }
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out << fmt::format("<testsuites name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\">\n",
                     xml_escape(suite_name), runs.size(), total_failures, total_errors);
  for (const auto& [cand, members] : by_candidate) {
    size_t failures = 0, errors = 0;
    for (size_t i : members) {
      failures += runs.outcome(i).outcome == verdict::failed;
      errors += runs.outcome(i).outcome == verdict::error;
    }
    out << fmt::format("  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\">\n",
                       xml_escape(cand), members.size(), failures, errors);
    for (size_t i : members) {
      const json r = EB_TRY(runs.read(i));
      const stats::run_outcome& o = runs.outcome(i);
      const json& wall = field(field(r, "timings"), "wall_ms");
      double secs = wall.is_number() ? wall.get<double>() / 1000.0 : 0.0;
      out << fmt::format("    <testcase classname=\"{}\" name=\"{}#{}\" time=\"{:.3f}\">\n",
                         xml_escape(cand), xml_escape(o.fixture), o.trial, secs);
      std::string checks = checks_text(r);
      if (o.outcome == verdict::failed) {
        // A task failure: the agent ran and its work did not pass the checks.
        out << fmt::format("      <failure message=\"{}\" type=\"task\">{}</failure>\n",
                           xml_escape("failed checks: " + failed_check_ids(r)), xml_escape(checks));
      } else if (o.outcome == verdict::error) {
        // The run could not be carried out or graded: never a task failure.
        std::string kind = str(field(r, "execution"), "error_kind");
        if (kind.empty() && str(field(r, "grading"), "status") == "error") kind = "grader";
        std::string msg = report_text::error_message_of(r);
        out << fmt::format("      <error message=\"{}\" type=\"{}\">{}</error>\n", xml_escape(msg),
                           xml_escape(kind.empty() ? "infrastructure" : kind),
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
                     std::span<const report_format> formats) {
  for (report_format f : formats) {
    auto render = [&](std::ostream& out) -> status {
      switch (f) {
        case report_format::json:
          stats::write_json(out, s);
          return {};
        case report_format::md:
          return write_markdown(out, s, runs, suite_name);
        case report_format::html:
          return write_html(out, s, runs, suite_name, dir);
        case report_format::junit:
          return write_junit(out, runs, suite_name);
      }
      return {};
    };
    EB_TRY_CTX(write_file_streamed(dir / report_file_name(f), render),
               fmt::format("write {}", report_file_name(f)));
  }
  return {};
}

result<stats::summary> write_reports(const std::filesystem::path& dir,
                                     const std::vector<json>& records,
                                     const std::string& suite_name,
                                     std::optional<std::string> baseline,
                                     std::span<const report_format> formats) {
  return write_reports(dir, run_index::of_records(records, /*newest_only=*/true), suite_name,
                       std::move(baseline), formats);
}

}  // namespace evalbox::harness
