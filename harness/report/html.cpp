// report.html (see report.h): one self-contained page. The summary, charts and tables are
// rendered here, in C++; the per-run drill-downs (checks, workspace diff, transcript steps) are
// embedded as JSON in a <script type="application/json"> block and turned into DOM by a small
// inline script only when a run is opened, so a report of 10,000 runs loads quickly.
//
// Escaping: everything from a record or a run's files reaches the page either through
// svg::escape (HTML text and attributes) or through script_json (JSON inside <script>, where
// "</script>" or "<!--" in a diff would otherwise end the block). The inline script builds
// nodes with textContent only, never innerHTML.
#include <fcntl.h>
#include <fmt/format.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <iterator>
#include <map>
#include <ostream>
#include <set>
#include <sstream>
#include <string_view>
#include <tuple>

#include "base/fs.h"
#include "base/json.h"
#include "base/json_checks.h"
#include "base/unique_fd.h"
#include "harness/report/report.h"
#include "harness/report/svg.h"
#include "sandbox/sys/beneath.h"

namespace evalbox::harness {
inline namespace report {

namespace report_text {

// "<", ">" and "&" only occur inside JSON strings, where \u escapes mean the same; U+2028/U+2029
// are escaped for old JavaScript parsers.
std::string script_json(const json& j) {
  std::string raw = j.dump(-1, ' ', false, json::error_handler_t::replace);
  std::string out;
  out.reserve(raw.size() + raw.size() / 16);
  for (size_t i = 0; i < raw.size(); ++i) {
    char c = raw[i];
    if (c == '<')
      out += "\\u003c";
    else if (c == '>')
      out += "\\u003e";
    else if (c == '&')
      out += "\\u0026";
    else if (c == '\xE2' && i + 2 < raw.size() && raw[i + 1] == '\x80' &&
             (raw[i + 2] == '\xA8' || raw[i + 2] == '\xA9')) {
      out += raw[i + 2] == '\xA8' ? "\\u2028" : "\\u2029";
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

void append_script_string(std::string& out, std::string_view s) {
  // What nlohmann's dump escapes (ensure_ascii off), and what script_json adds.
  static constexpr auto plain = [] {
    std::array<bool, 256> p{};
    for (int c = 0x20; c < 0x80; ++c) p[c] = true;
    for (char c : {'"', '\\', '<', '>', '&'}) p[static_cast<unsigned char>(c)] = false;
    return p;
  }();
  const size_t start = out.size();
  out += '"';
  size_t i = 0;
  while (i < s.size()) {
    size_t run = i;
    while (run < s.size() && plain[static_cast<unsigned char>(s[run])]) ++run;
    out.append(s.data() + i, run - i);
    i = run;
    if (i == s.size()) break;
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const size_t n = utf8_sequence_length(s.substr(i));
      if (n == 0) {  // not UTF-8: nlohmann's replacement characters, as script_json writes them
        out.resize(start);
        out += script_json(json(std::string(s)));
        return;
      }
      if (n == 3 && c == 0xE2 && s[i + 1] == '\x80' && (s[i + 2] == '\xA8' || s[i + 2] == '\xA9'))
        out += s[i + 2] == '\xA8' ? "\\u2028" : "\\u2029";
      else
        out.append(s.data() + i, n);
      i += n;
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '<':
        out += "\\u003c";
        break;
      case '>':
        out += "\\u003e";
        break;
      case '&':
        out += "\\u0026";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out += fmt::format("\\u{:04x}", c);  // the other control characters
    }
    ++i;
  }
  out += '"';
}

}  // namespace report_text

namespace {

using report_text::append_script_string;
using report_text::interval;
using report_text::percent;
using report_text::script_json;
using svg::escape;

// The first `cap` bytes of `text` (of `total` in the whole file), cut at the last newline
// before the cap when `at_line` (a transcript keeps whole JSON lines) and never inside a UTF-8
// sequence, with a marker saying what was left out.
std::string cap_text(std::string text, uint64_t total, size_t cap, bool at_line,
                     std::string_view file) {
  if (total <= cap && text.size() == total) return text;
  size_t cut = std::min(cap, text.size());
  if (at_line) {
    size_t nl = cut == 0 ? std::string::npos : text.rfind('\n', cut - 1);
    cut = nl == std::string::npos ? 0 : nl + 1;
  }
  while (cut > 0 && cut < text.size() && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80)
    --cut;
  text.resize(cut);
  if (!text.empty() && text.back() != '\n') text += '\n';
  text += fmt::format("[evalbox: cut here, {} bytes omitted; the whole file is {}]\n", total - cut,
                      file);
  return text;
}

std::string unreadable(const std::string& rel) {
  return fmt::format("[evalbox: unreadable: {}]\n", rel);
}

// The directories runs/ of the runs embedded (one, or one per shard a merge reads from), each
// opened once: a run's file is then one openat2 beneath it, "<id>/<name>" with no symbolic
// link followed anywhere (RESOLVE_NO_SYMLINKS), instead of opening the run's directory first.
class runs_dirs {
 public:
  // -1 when `dir` cannot be opened (the caller takes the slower way, which says why).
  int fd_of(const std::filesystem::path& dir) {
    if (dir == last_) return last_fd_;
    auto it = fds_.find(dir);
    if (it == fds_.end())
      it = fds_.emplace(dir, unique_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)))
               .first;
    last_ = dir;
    last_fd_ = it->second ? it->second.get() : -1;
    return last_fd_;
  }

 private:
  std::map<std::filesystem::path, unique_fd> fds_;
  std::filesystem::path last_;
  int last_fd_ = -1;
};

// A run's directory, for the files embedded from it. Neither it nor its files are followed if
// they are symbolic links: a report shows what the run left, never a file a link points to
// elsewhere (a report is read by people the results directory was not written by).
class run_files {
 public:
  run_files(const std::filesystem::path& results_dir, const std::string& run_id,
            const html_options& opt, runs_dirs& dirs)
      : id_(run_id) {
    // Run ids are hex digests; anything else is not followed into the file system.
    if (run_id.empty() || run_id.find_first_of("/\\") != std::string::npos || run_id[0] == '.')
      return;
    dir_ = opt.run_dir ? opt.run_dir(run_id) : results_dir / "runs" / run_id;
    if (dir_.empty()) return;
    valid_ = true;
    runs_fd_ = dirs.fd_of(dir_.parent_path());
  }

  // runs/<id>/<name> for embedding, within the per-file cap and the remaining budget; none
  // when the run has no such file. One openat2 and one fstat per file (a report of 100,000 runs
  // embeds 200,000 of them); a FIFO or device planted there is not waited on (O_NONBLOCK) and
  // not read (not a regular file).
  std::optional<std::string> embed(const char* name, bool at_line, const html_options& opt,
                                   size_t& budget) {
    if (!valid_) return std::nullopt;
    const std::string rel = fmt::format("runs/{}/{}", id_, name);
    auto [fd, found] = open_file(name);
    if (!fd) return found == lookup::absent ? std::nullopt : std::optional(unreadable(rel));
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return unreadable(rel);
    if (!S_ISREG(st.st_mode)) return std::nullopt;
    const auto size = static_cast<uint64_t>(st.st_size);
    if (budget == 0)
      return fmt::format("[evalbox: not embedded: the report's size budget is spent; see {}]\n",
                         rel);
    size_t cap = std::min(opt.per_file_bytes, budget);
    std::string head(static_cast<size_t>(std::min<uint64_t>(size, cap)), '\0');
    size_t got = 0;
    while (got < head.size()) {
      ssize_t n = ::pread(fd.get(), head.data() + got, head.size() - got, static_cast<off_t>(got));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return unreadable(rel);  // an error, or the file shrank while it was read
      got += static_cast<size_t>(n);
    }
    std::string text = cap_text(std::move(head), size, cap, at_line, rel);
    budget -= std::min(budget, text.size());
    return text;
  }

 private:
  enum class lookup { opened, absent, unreadable };

  // The file, opened without following a link. Absent: no such file, or the run's directory
  // is missing, not a directory or a link. Unreadable: any other failure (a link in the file's
  // place among them).
  std::pair<unique_fd, lookup> open_file(const char* name) {
    if (runs_fd_ >= 0) {
      const std::string path = fmt::format("{}/{}", dir_.filename().string(), name);
      unique_fd fd(
          sys::open_beneath(runs_fd_, path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK,
                            RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS));
      if (fd) return {std::move(fd), lookup::opened};
      if (errno == ENOENT || errno == ENOTDIR) return {unique_fd(), lookup::absent};
      // ELOOP (whether the directory or the file is the link decides what is shown), an
      // openat2 the kernel lacks, or another error: the directory, then the file.
    }
    if (!dir_fd_ && dir_errno_ == 0) {
      dir_fd_.reset(::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!dir_fd_) dir_errno_ = errno;
    }
    if (!dir_fd_)
      return {unique_fd(), dir_errno_ == ENOENT || dir_errno_ == ENOTDIR || dir_errno_ == ELOOP
                               ? lookup::absent
                               : lookup::unreadable};
    unique_fd fd(
        ::openat(dir_fd_.get(), name, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW));
    if (fd) return {std::move(fd), lookup::opened};
    return {unique_fd(), errno == ENOENT || errno == ENOTDIR ? lookup::absent : lookup::unreadable};
  }

  std::string id_;
  std::filesystem::path dir_;
  bool valid_ = false;
  int runs_fd_ = -1;
  unique_fd dir_fd_;
  int dir_errno_ = 0;
};

// The stylesheet and the drill-down script: assets/report.css and assets/report.js, embedded
// at build time (cmake/embed_asset.cmake) as report_css and report_js. The script writes the
// counts it computes from the embedded data into the DOM (#js-count-*, data-* on #runs) so
// that a browser test can compare them with the expected ones.
#include "report_css.inc"
#include "report_js.inc"

// <head>: nothing may be fetched (the page works from file:// with the network off).
void write_head(std::ostream& h, const std::string& suite_name) {
  h << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  h << "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
       "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n";
  h << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  h << fmt::format("<title>evalbox report: {}</title>\n<style>\n{}</style>\n</head>\n<body>\n",
                   escape(suite_name), report_css);
}

// The title and the totals, errors apart from failures.
void write_totals(std::ostream& h, const stats::summary& s, const std::string& suite_name) {
  uint64_t passed = 0, failed = 0;
  for (const auto& c : s.cells) {
    passed += c.passes;
    failed += c.n - c.passes;
  }
  h << fmt::format("<h1>evalbox report: {}</h1>\n", escape(suite_name));
  h << fmt::format(
      "<p id=\"totals\" data-runs=\"{0}\" data-passed=\"{1}\" data-failed=\"{2}\" "
      "data-errors=\"{3}\">{0} runs: <span class=\"passed\">{1} passed</span>, "
      "<span class=\"failed\">{2} failed</span>, <span class=\"error\">{3} infrastructure "
      "error(s)</span> (not task failures: left out of every denominator).</p>\n",
      s.runs, passed, failed, s.errors.size());
  if (s.missing)
    h << fmt::format(
        "<p id=\"missing\" class=\"error\" data-missing=\"{0}\" "
        "data-planned=\"{1}\"><strong>Partial "
        "results: {0} of the plan's {1} runs are missing</strong> (not run, or not merged): every "
        "number here is over the {2} recorded runs only.</p>\n",
        s.missing->missing, s.missing->planned, s.runs);
  if (const std::string note = report_text::grading_note(s); !note.empty())
    h << fmt::format("<p id=\"grading\" data-regraded=\"{}\"><strong>Grading:</strong> {}</p>\n",
                     s.grading.regraded, escape(note));
}

// pass@1 with its interval as a chart, then the table with pass@k.
void write_candidates(std::ostream& h, const stats::summary& s) {
  h << fmt::format(
      "<h2 id=\"candidates\">pass@1 by candidate</h2>\n<p class=\"note\">Mean over fixtures of "
      "per-fixture pass rates; whiskers are {:.0f}% intervals that account for how fixtures "
      "differ (docs/statistics.md); n = "
      "fixtures with at least one non-error trial.</p>\n",
      s.settings.level * 100);
  std::vector<svg::bar> bars;
  for (const auto& c : s.candidates)
    bars.push_back(
        {c.candidate, c.pass_at_1, c.pass_at_1_ci,
         fmt::format("{} {} n={}", percent(c.pass_at_1), interval(c.pass_at_1_ci), c.fixtures)});
  h << "<div class=\"scroll\">" + svg::bar_chart("chart-pass-at-1", bars) + "</div>\n";
  h << "<table id=\"table-candidates\"><tr><th>candidate</th><th>pass@1</th><th>interval</th>"
       "<th>n (fixtures)</th><th>trials</th><th>passes</th><th>errors</th><th>pooled rate (n = "
       "trials)</th><th>pass@k / pass^k</th></tr>\n";
  for (const auto& c : s.candidates) {
    std::string ks;
    for (size_t k = 0; k < c.pass_at.size() && k < 5; ++k)
      ks += fmt::format("{}k={}: {} / {}", ks.empty() ? "" : "; ", c.pass_at[k].k,
                        percent(c.pass_at[k].value), percent(c.pass_hat[k].value));
    h << fmt::format(
        "<tr class=\"candidate\"><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
        "<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
        "<td class=\"num\">{}</td><td class=\"num\">{} {}</td><td>{}</td></tr>\n",
        escape(c.candidate), percent(c.pass_at_1), interval(c.pass_at_1_ci), c.fixtures, c.trials,
        c.passes, c.errors, percent(c.pooled_rate), interval(c.pooled_ci),
        ks.empty() ? "n/a" : escape(ks));
  }
  h << "</table>\n";
}

// Fixtures × candidates as a heatmap of pass rates.
void write_heatmap(std::ostream& h, const stats::summary& s) {
  std::vector<std::string> fixtures, candidates;
  {
    std::set<std::string> fs, cs;
    for (const auto& c : s.cells) {
      fs.insert(c.fixture);
      cs.insert(c.candidate);
    }
    fixtures.assign(fs.begin(), fs.end());
    candidates.assign(cs.begin(), cs.end());
  }
  // Each cell is made as it is drawn: there is one per candidate and fixture.
  auto heat = [&](size_t i) {
    const stats::cell& c = s.cells[i];
    size_t r = std::lower_bound(fixtures.begin(), fixtures.end(), c.fixture) - fixtures.begin();
    size_t col =
        std::lower_bound(candidates.begin(), candidates.end(), c.candidate) - candidates.begin();
    std::string text = fmt::format("{}/{}", c.passes, c.n);
    if (c.errors) text += fmt::format(" +{}e", c.errors);
    return svg::heat_cell{
        r, col, c.rate, text,
        fmt::format("{} on {}: {} passed of n={} ({}), {} infrastructure error(s)", c.candidate,
                    c.fixture, c.passes, c.n, percent(c.rate), c.errors)};
  };
  h << "<h2 id=\"heatmap\">Fixtures × candidates</h2>\n<p class=\"note\">passes/n per cell "
       "(n = non-error trials); +Ne = infrastructure errors, outside n; grey = every trial "
       "errored.</p>\n";
  h << "<div class=\"scroll\">";
  svg::heatmap(h, "chart-heatmap", fixtures, candidates, s.cells.size(), heat);
  h << "</div>\n";
}

// Each candidate against the baseline: per-fixture differences as a chart, then the tests.
void write_comparison(std::ostream& h, const stats::summary& s) {
  h << "<h2 id=\"comparison\">Paired comparison</h2>\n";
  if (s.comparisons.empty()) {
    h << "<p class=\"note\">No baseline candidate: nothing to compare (set <code>baseline</code> "
         "in the suite, or use <code>evalbox compare</code>).</p>\n";
    return;
  }
  std::vector<svg::difference_row> rows;
  for (const auto& p : s.comparisons) {
    svg::difference_row r{fmt::format("{} vs {}", p.candidate, p.baseline),
                          p.mean_difference,
                          p.ci,
                          {},
                          fmt::format("{} (n={})", p.verdict, p.n)};
    for (const auto& d : p.differences) r.fixtures.emplace_back(d.fixture, d.difference);
    rows.push_back(std::move(r));
  }
  h << "<p class=\"note\">Per shared fixture, candidate rate − baseline rate (small dots), "
       "their mean (red) and its paired interval, in percentage points.</p>\n";
  h << "<div class=\"scroll\">" + svg::difference_chart("chart-paired", rows) + "</div>\n";
  h << "<table id=\"table-comparisons\"><tr><th>candidate</th><th>baseline</th><th>n (shared "
       "fixtures)</th><th>mean difference</th><th>interval</th><th>sign-flip p</th>"
       "<th>McNemar</th><th>verdict</th></tr>\n";
  for (const auto& p : s.comparisons) {
    h << fmt::format(
        "<tr class=\"comparison\"><td>{}</td><td>{}</td><td class=\"num\">{}</td>"
        "<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
        "<td>{}</td><td><b>{}</b></td></tr>\n",
        escape(p.candidate), escape(p.baseline), p.n,
        p.mean_difference ? fmt::format("{:+.1f} pts", *p.mean_difference * 100) : "n/a",
        p.ci ? fmt::format("[{:+.1f}, {:+.1f}]", p.ci->lo * 100, p.ci->hi * 100) : "n/a",
        p.sign_flip_p ? fmt::format("{:.4f}", *p.sign_flip_p) : "n/a",
        p.mcnemar
            ? fmt::format("p={:.4f} (b={}, c={})", p.mcnemar->p_value, p.mcnemar->b, p.mcnemar->c)
            : "n/a (not single-trial)",
        escape(p.verdict));
  }
  h << "</table>\n";
}

void write_flaky(std::ostream& h, const stats::summary& s) {
  h << fmt::format("<h2 id=\"flaky\">Flaky fixtures ({})</h2>\n", s.flaky.size());
  if (s.flaky.empty()) {
    h << "<p>None: no candidate had both a pass and a failure on one fixture.</p>\n";
    return;
  }
  h << "<table id=\"table-flaky\"><tr><th>fixture</th><th>mixed outcomes for</th>"
       "<th>oracle unstable</th></tr>\n";
  for (const auto& f : s.flaky) {
    std::string who;
    for (const auto& c : f.candidates) who += (who.empty() ? "" : ", ") + c;
    h << fmt::format("<tr class=\"flaky\"><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                     escape(f.fixture), escape(who),
                     f.oracle ? "<b>yes: fix the fixture</b>" : "no");
  }
  h << "</table>\n";
}

// Infrastructure errors, each linked to its run's drill-down.
void write_errors(std::ostream& h, const stats::summary& s, const run_index& runs) {
  // The run of each error (the newest of its trial), for the links into the drill-downs.
  std::map<std::tuple<std::string, std::string, int>, std::string> run_ids;
  for (const auto& e : s.errors) run_ids[{e.candidate, e.fixture, e.trial}];
  if (!run_ids.empty())
    for (size_t i = 0; i < runs.size(); ++i) {
      const stats::run_outcome& o = runs.outcome(i);
      auto it = run_ids.find({o.candidate, o.fixture, o.trial});
      if (it != run_ids.end()) it->second = runs.run_id(i);
    }
  h << fmt::format("<h2 id=\"errors\">Infrastructure errors ({})</h2>\n", s.errors.size());
  if (s.errors.empty()) {
    h << "<p>None.</p>\n";
    return;
  }
  h << "<p class=\"note\">Runs that could not be carried out or graded. They are not task "
       "failures and are left out of every rate above.</p>\n<table id=\"table-errors\"><tr>"
       "<th>candidate</th><th>fixture</th><th>trial</th><th>message</th><th>run</th></tr>\n";
  for (const auto& e : s.errors) {
    std::string id = run_ids[{e.candidate, e.fixture, e.trial}];
    h << fmt::format(
        "<tr class=\"error-row\"><td>{}</td><td>{}</td><td class=\"num\">{}</td>"
        "<td><pre>{}</pre></td><td><a href=\"#run={}\">{}</a></td></tr>\n",
        escape(e.candidate), escape(e.fixture), e.trial, escape(e.message), escape(id), escape(id));
  }
  h << "</table>\n";
}

// Tokens, cost and wall time per candidate, then over every run.
void write_usage(std::ostream& h, const stats::summary& s) {
  auto tokens = [](const stats::distribution& d) {
    if (d.n == 0) return std::string("unknown");
    std::string t = fmt::format("{:.0f} (p50 {:.0f}, p90 {:.0f}, max {:.0f})", *d.total, *d.p50,
                                *d.p90, *d.max);
    if (d.missing) t += fmt::format("; {} run(s) unknown", d.missing);
    return t;
  };
  auto secs = [](const std::optional<double>& ms) {
    return ms ? fmt::format("{:.2f}s", *ms / 1000) : std::string("unknown");
  };
  h << "<h2 id=\"usage\">Usage</h2>\n<p class=\"note\">Over all runs, errored ones included. A "
       "value no run reported is shown as unknown, never as 0.</p>\n<table id=\"table-usage\">"
       "<tr><th>candidate</th><th>runs</th><th>input tokens</th><th>output tokens</th>"
       "<th>cost (USD)</th><th>wall p50</th><th>p90</th><th>p99</th><th>max</th></tr>\n";
  auto usage_row = [&](const std::string& who, const stats::usage& u) {
    h << fmt::format(
        "<tr class=\"usage\"><td>{}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td>"
        "<td class=\"cost\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
        "<td class=\"num\">{}</td><td class=\"num\">{}</td></tr>\n",
        escape(who), u.runs, tokens(u.input_tokens), tokens(u.output_tokens),
        escape(report_text::cost(u.cost)), secs(u.wall_ms.p50), secs(u.wall_ms.p90),
        secs(u.wall_ms.p99), secs(u.wall_ms.max));
  };
  for (const auto& c : s.candidates) usage_row(c.candidate, c.use);
  usage_row("all", s.overall);
  h << "</table>\n";
  if (s.overall.gateway.runs > 0) {
    auto ms = [](const std::optional<double>& v) {
      return v ? fmt::format("{:.0f} ms", *v) : std::string("unknown");
    };
    h << "<h3 id=\"gateway-usage\">Model gateway</h3>\n<p class=\"note\">Tokens and cost of "
         "gateway runs were counted by the run's model gateway from every response: exact. "
         "Latency: over the runs, each run's median time to first byte and median call "
         "length.</p>\n<table id=\"table-gateway\"><tr><th>candidate</th><th>gateway runs</th>"
         "<th>cost (USD, exact)</th><th>TTFB p50</th><th>TTFB p90</th><th>call p50</th>"
         "<th>call p90</th><th>budget exhausted</th></tr>\n";
    for (const auto& c : s.candidates) {
      const stats::gateway_usage& g = c.use.gateway;
      if (g.runs == 0) continue;
      h << fmt::format(
          "<tr class=\"gateway\"><td>{}</td><td class=\"num\">{}</td><td class=\"cost\">{}</td>"
          "<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
          "<td class=\"num\">{}</td><td class=\"num\">{}</td></tr>\n",
          escape(c.candidate), g.runs, escape(report_text::cost(c.use.cost)), ms(g.ttfb_ms.p50),
          ms(g.ttfb_ms.p90), ms(g.call_ms.p50), ms(g.call_ms.p90), g.budget_exhausted);
    }
    h << "</table>\n";
  }
  if (s.overall.credentials.runs > 0) {
    auto ms = [](const std::optional<double>& v) {
      return v ? fmt::format("{:.0f} ms", *v) : std::string("unknown");
    };
    h << "<h3 id=\"credential-wait\">Credential wait</h3>\n<p class=\"note\">Runs that waited "
         "for a free lease of their credentials before they started (a login serves one run "
         "at a time; a credential with max_concurrent N, N runs): over those runs.</p>\n"
         "<table id=\"table-credential-wait\"><tr><th>candidate</th><th>runs that waited</th>"
         "<th>total wait</th><th>wait p50</th><th>longest wait</th></tr>\n";
    for (const auto& c : s.candidates) {
      const stats::credential_wait& w = c.use.credentials;
      if (w.runs == 0) continue;
      h << fmt::format(
          "<tr class=\"credential-wait\"><td>{}</td><td class=\"num\">{}</td>"
          "<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>\n",
          escape(c.candidate), w.runs, ms(w.wait_ms.total), ms(w.wait_ms.p50), ms(w.wait_ms.max));
    }
    h << "</table>\n";
  }
  if (s.overall.judge.runs == 0) return;
  // The judges of judge checks: their own tokens and cost, never in the candidate's above.
  h << "<h3 id=\"judge-usage\">Judge usage</h3>\n<p class=\"note\">The judges of judge "
       "checks, over the judged runs; not included in the candidates' usage above.</p>\n"
       "<table id=\"table-judge-usage\"><tr><th>candidate</th><th>judged runs</th>"
       "<th>judge input tokens</th><th>judge output tokens</th><th>judge cost (USD)</th></tr>\n";
  auto judge_row = [&](const std::string& who, const stats::judge_usage& j) {
    h << fmt::format(
        "<tr class=\"judge-usage\"><td>{}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td>"
        "<td class=\"cost\">{}</td></tr>\n",
        escape(who), j.runs, tokens(j.input_tokens), tokens(j.output_tokens),
        escape(report_text::cost(j.cost)));
  };
  for (const auto& c : s.candidates) judge_row(c.candidate, c.use.judge);
  judge_row("all", s.overall.judge);
  h << "</table>\n";
}

// One run's drill-down data: its checks, and its workspace diff and transcript within the
// embedding budget, appended to `out` as JSON for the page's script. Written field by field in
// the order (and with the bytes) script_json of the same JSON object would give:
// {"c","checks":[{"detail","id","passed"}],"diff","err","f","id","score","t","transcript","v",
// "wall"}.
void append_run_data(std::string& out, const stats::run_outcome& o, const std::string& id,
                     const run_detail& r, const std::filesystem::path& results_dir,
                     const html_options& opt, runs_dirs& dirs, size_t& budget) {
  using verdict = stats::run_outcome::verdict;
  run_files files(results_dir, id, opt, dirs);
  auto text_or_null = [&](const std::optional<std::string>& t) {
    if (t)
      append_script_string(out, *t);
    else
      out += "null";
  };
  auto number = [&](const std::string& text) { out += text.empty() ? "null" : text; };
  out += "{\"c\":";
  append_script_string(out, o.candidate);
  out += ",\"checks\":[";
  for (size_t k = 0; k < r.checks.size(); ++k) {
    const run_detail::check& c = r.checks[k];
    out += k ? ",{\"detail\":" : "{\"detail\":";
    append_script_string(out, c.detail);
    out += ",\"id\":";
    append_script_string(out, c.id);
    out += c.passed ? ",\"passed\":true}" : ",\"passed\":false}";
  }
  out += "],\"diff\":";
  text_or_null(files.embed("workspace.diff", false, opt, budget));
  out += ",\"err\":";
  text_or_null(o.outcome == verdict::error ? std::optional(o.error_message) : std::nullopt);
  out += ",\"f\":";
  append_script_string(out, o.fixture);
  out += ",\"id\":";
  append_script_string(out, id);
  out += ",\"score\":";
  number(r.score);
  fmt::format_to(std::back_inserter(out), ",\"t\":{},\"transcript\":", o.trial);
  text_or_null(files.embed("transcript.jsonl", true, opt, budget));
  out += o.outcome == verdict::passed   ? ",\"v\":\"passed\",\"wall\":"
         : o.outcome == verdict::failed ? ",\"v\":\"failed\",\"wall\":"
                                        : ",\"v\":\"error\",\"wall\":";
  number(r.wall_ms);
  out += '}';
}

// The runs' controls, and their data for the lazy drill-downs, in candidate, fixture, trial
// order. Written one run at a time, each record read back, its files embedded and its JSON
// written before the next: the same bytes as dumping {"runs": [...], "runs_per_page": n} whole.
status write_runs(std::ostream& h, const run_index& runs, const std::filesystem::path& results_dir,
                  const html_options& opt) {
  h << fmt::format(
      "<h2 id=\"runs-heading\">Runs</h2>\n<p class=\"note\">Each run's checks, workspace diff "
      "and transcript steps, collapsed until opened. Embedded files are cut at {} KiB each "
      "(marked where cut); the whole files are under runs/&lt;id&gt;/.</p>\n",
      opt.per_file_bytes / 1024);
  h << "<div id=\"runs\"><p>Counted by the page: <span id=\"js-count-runs\">?</span> runs, "
       "<span id=\"js-count-passed\">?</span> passed, <span id=\"js-count-failed\">?</span> "
       "failed, <span id=\"js-count-error\">?</span> errors.</p>\n"
       "<div id=\"runs-controls\"><input id=\"run-filter\" type=\"search\" "
       "placeholder=\"filter: candidate, fixture or run id\" size=\"40\">"
       "<select id=\"run-verdict\"><option value=\"\">all verdicts</option>"
       "<option value=\"passed\">passed</option><option value=\"failed\">failed</option>"
       "<option value=\"error\">error</option></select>"
       "<button id=\"runs-prev\" type=\"button\">‹ previous</button>"
       "<button id=\"runs-next\" type=\"button\">next ›</button> <span id=\"runs-status\">"
       "</span></div>\n<noscript><p>The run drill-downs need JavaScript; everything above does "
       "not.</p></noscript>\n<div id=\"runs-list\"></div></div>\n";
  // 4 bytes a run, sorted in place (ties in record order, as a stable sort would leave them).
  std::vector<uint32_t> sorted(runs.size());
  for (size_t i = 0; i < sorted.size(); ++i) sorted[i] = static_cast<uint32_t>(i);
  std::sort(sorted.begin(), sorted.end(), [&](uint32_t a, uint32_t b) {
    const stats::run_outcome& x = runs.outcome(a);
    const stats::run_outcome& y = runs.outcome(b);
    return std::tie(x.candidate, x.fixture, x.trial, a) <
           std::tie(y.candidate, y.fixture, y.trial, b);
  });
  // Keys of a JSON object are sorted: "runs" comes before "runs_per_page".
  h << "<script type=\"application/json\" id=\"evalbox-runs\">{\"runs\":[";
  size_t budget = opt.total_bytes;
  runs_dirs dirs;
  std::string data;
  for (size_t n = 0; n < sorted.size(); ++n) {
    const size_t i = sorted[n];
    const run_detail r = EB_TRY(runs.read(i));
    data.clear();
    if (n > 0) data += ',';
    append_run_data(data, runs.outcome(i), runs.run_id(i), r, results_dir, opt, dirs, budget);
    h << data;
  }
  h << fmt::format("],\"runs_per_page\":{}}}</script>\n", std::max<size_t>(1, opt.runs_per_page));
  return {};
}

}  // namespace

status write_html(std::ostream& h, const stats::summary& s, const run_index& runs,
                  const std::string& suite_name, const std::filesystem::path& results_dir,
                  const html_options& opt) {
  write_head(h, suite_name);
  write_totals(h, s, suite_name);
  write_candidates(h, s);
  write_heatmap(h, s);
  write_comparison(h, s);
  write_flaky(h, s);
  write_errors(h, s, runs);
  write_usage(h, s);
  EB_TRY(write_runs(h, runs, results_dir, opt));
  h << "<script>\n" << report_js << "</script>\n</body>\n</html>\n";
  return {};
}

std::string render_html(const stats::summary& s, const std::vector<json>& records,
                        const std::string& suite_name, const std::filesystem::path& results_dir,
                        const html_options& opt) {
  std::ostringstream out;
  // Records in memory: reading them back cannot fail.
  (void)write_html(out, s, run_index::of_records(records), suite_name, results_dir, opt);
  return std::move(out).str();
}

}  // namespace report
}  // namespace evalbox::harness
