// The report writers: Markdown, JUnit, HTML and terminal renderers over evalbox.run.v1
// records — escaping, counts, unknown cost, infrastructure errors kept apart from failures,
// and the lazily rendered drill-down data embedded in report.html.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "base/fs.h"
#include "base/json.h"
#include "base/unique_fd.h"
#include "harness/report/compare.h"
#include "harness/report/report.h"

namespace evalbox::harness {
namespace {

// One record as `evalbox run` writes it; verdict "error" becomes an execution error.
json record(const std::string& candidate, const std::string& fixture, int trial,
            const std::string& verdict, std::optional<double> cost = std::nullopt) {
  std::string id = fmt::format(
      "{:016x}", std::hash<std::string>{}(fmt::format("{}/{}/{}", candidate, fixture, trial)));
  bool error = verdict == "error";
  json checks = json::array();
  if (!error) {
    checks.push_back({{"id", "hidden-tests"}, {"passed", verdict == "passed"}, {"detail", ""}});
    checks.push_back({{"id", "tests-untouched"}, {"passed", true}, {"detail", ""}});
  }
  return {{"schema", "evalbox.run.v1"},
          {"run_id", id},
          {"suite", "unit"},
          {"fixture", {{"id", fixture}}},
          {"candidate", {{"id", candidate}}},
          {"trial", trial},
          {"execution",
           {{"status", error ? "error" : "completed"},
            {"error", error ? json("sandbox: overlay mount failed: EINVAL") : json(nullptr)},
            {"error_kind", error ? json("sandbox") : json(nullptr)}}},
          {"grading",
           {{"status", error ? "skipped" : "completed"},
            {"checks", checks},
            {"score", verdict == "passed" ? 1.0 : 0.5},
            {"error", nullptr}}},
          {"verdict", error ? "not_assessed" : verdict},
          {"usage",
           {{"input_tokens", 100 + trial},
            {"output_tokens", 10},
            {"cost_usd", cost ? json(*cost) : json(nullptr)}}},
          {"timings", {{"wall_ms", 1000 + 10 * trial}}}};
}

// base: 2 fixtures × 3 trials; tuned the same with one infrastructure error.
std::vector<json> example() {
  std::vector<json> r;
  for (const char* f : {"alpha", "beta"}) {
    r.push_back(record("base", f, 0, "passed"));
    r.push_back(record("base", f, 1, "failed"));
    r.push_back(record("base", f, 2, "failed"));
  }
  r.push_back(record("tuned", "alpha", 0, "passed"));
  r.push_back(record("tuned", "alpha", 1, "passed"));
  r.push_back(record("tuned", "alpha", 2, "error"));
  r.push_back(record("tuned", "beta", 0, "passed"));
  r.push_back(record("tuned", "beta", 1, "failed"));
  r.push_back(record("tuned", "beta", 2, "passed"));
  return r;
}

stats::summary summarize(const std::vector<json>& records, std::optional<std::string> baseline) {
  auto s = summarize_records(records, std::move(baseline));
  EXPECT_TRUE(s) << s.error().message;
  return s ? *s : stats::summary{};
}

size_t occurrences(std::string_view text, std::string_view what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string_view::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

// The JSON embedded in report.html for the drill-downs.
json embedded_runs(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"evalbox-runs\">";
  size_t a = html.find(open);
  EXPECT_NE(a, std::string::npos);
  a += open.size();
  size_t b = html.find("</script>", a);
  auto j = parse_json(std::string_view(html).substr(a, b - a), "embedded runs");
  EXPECT_TRUE(j) << j.error().message;
  return j ? *j : json();
}

TEST(ReportOutcomes, NotAssessedIsAnErrorNotAFailure) {
  auto outcomes = outcomes_from_records(example());
  size_t errors = 0, failures = 0;
  for (const auto& o : outcomes) {
    errors += o.outcome == stats::run_outcome::verdict::error;
    failures += o.outcome == stats::run_outcome::verdict::failed;
  }
  EXPECT_EQ(errors, 1u);
  EXPECT_EQ(failures, 5u);
}

TEST(ReportMarkdown, ErrorsAreListedApartAndLeftOutOfTrials) {
  auto recs = example();
  std::string md = render_markdown(summarize(recs, "base"), recs, "unit");
  // tuned: 5 trials (the error is outside n), 4 passes, 1 error.
  EXPECT_NE(md.find("| tuned | 83.3% |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 2 | 5 | 4 | 1 |"), std::string::npos) << md;
  EXPECT_NE(md.find("## Errors (1)"), std::string::npos);
  EXPECT_NE(md.find("tuned / alpha #2: sandbox: overlay mount failed: EINVAL"), std::string::npos);
  EXPECT_NE(md.find("2/2 (1 err)"), std::string::npos) << md;
}

TEST(ReportMarkdown, ShowsPassAtKComparisonAndFlaky) {
  auto recs = example();
  std::string md = render_markdown(summarize(recs, "base"), recs, "unit");
  EXPECT_NE(md.find("## pass@k and pass^k"), std::string::npos);
  EXPECT_NE(md.find("## Paired comparison"), std::string::npos);
  EXPECT_NE(md.find("| tuned | base | 2 |"), std::string::npos) << md;
  EXPECT_NE(md.find("no detectable difference at this n"), std::string::npos);
  EXPECT_NE(md.find("- alpha (mixed outcomes for: base)"), std::string::npos) << md;
}

TEST(ReportMarkdown, UnknownCostIsUnknownNeverZero) {
  auto recs = example();
  std::string md = render_markdown(summarize(recs, std::nullopt), recs, "unit");
  EXPECT_NE(md.find("| base | 6 | "), std::string::npos);
  EXPECT_EQ(md.find("$0"), std::string::npos) << md;
  EXPECT_NE(md.find("| unknown |"), std::string::npos) << md;
}

TEST(ReportMarkdown, PartlyKnownCostSaysWhatItLeavesOut) {
  auto recs = example();
  recs[0] = record("base", "alpha", 0, "passed", 0.25);
  std::string md = render_markdown(summarize(recs, std::nullopt), recs, "unit");
  EXPECT_NE(md.find("≥ $0.2500 (5 run(s) unknown)"), std::string::npos) << md;
}

TEST(ReportMarkdown, EscapesTableCells) {
  auto recs = example();
  recs.push_back(record("a|b<i>", "alpha", 0, "passed"));
  std::string md = render_markdown(summarize(recs, std::nullopt), recs, "unit");
  EXPECT_NE(md.find("a\\|b&lt;i&gt;"), std::string::npos);
  EXPECT_EQ(md.find("<i>"), std::string::npos);
}

TEST(ReportJunit, ErrorsAreErrorsAndFailuresAreFailures) {
  auto recs = example();
  std::string x = render_junit(recs, "unit");
  EXPECT_EQ(occurrences(x, "<error "), 1u);
  EXPECT_EQ(occurrences(x, "<failure "), 5u);
  EXPECT_NE(x.find("<testsuites name=\"unit\" tests=\"12\" failures=\"5\" errors=\"1\">"),
            std::string::npos);
  EXPECT_NE(x.find("<testsuite name=\"tuned\" tests=\"6\" failures=\"1\" errors=\"1\">"),
            std::string::npos);
  EXPECT_NE(x.find("message=\"sandbox: overlay mount failed: EINVAL\" type=\"sandbox\""),
            std::string::npos);
  // The checks are in the failure's message and body.
  EXPECT_NE(x.find("message=\"failed checks: hidden-tests\""), std::string::npos);
  EXPECT_NE(x.find("FAIL hidden-tests\nPASS tests-untouched"), std::string::npos);
}

TEST(ReportJunit, EscapesNamesAndMessages) {
  std::vector<json> recs{record("c\"&<", "f'>", 0, "error")};
  recs[0]["execution"]["error"] = "bad <thing> & \"quote\"\x01";
  std::string x = render_junit(recs, "s<");
  EXPECT_NE(x.find("name=\"c&quot;&amp;&lt;\""), std::string::npos);
  EXPECT_NE(x.find("bad &lt;thing&gt; &amp; &quot;quote&quot; "), std::string::npos);
  EXPECT_EQ(x.find('\x01'), std::string::npos);
}

TEST(ReportTerminal, ListsVerdictErrorsAndFlaky) {
  auto recs = example();
  std::string t = render_terminal_summary(summarize(recs, "base"));
  EXPECT_NE(t.find("tuned"), std::string::npos);
  EXPECT_NE(t.find("1 error(s) not counted"), std::string::npos) << t;
  EXPECT_NE(t.find("tuned vs base: no detectable difference at this n"), std::string::npos) << t;
  EXPECT_NE(t.find("flaky: alpha"), std::string::npos) << t;
  EXPECT_NE(t.find("tuned / alpha #2: sandbox: overlay mount failed: EINVAL"), std::string::npos);
}

TEST(ReportTerminal, LongListsAreCutWithACount) {
  std::vector<json> recs;
  for (int f = 0; f < 30; ++f) {
    recs.push_back(record("c", fmt::format("f{:02}", f), 0, "passed"));
    recs.push_back(record("c", fmt::format("f{:02}", f), 1, "failed"));
    recs.push_back(record("c", fmt::format("f{:02}", f), 2, "error"));
  }
  std::string t = render_terminal_summary(summarize(recs, std::nullopt));
  EXPECT_EQ(occurrences(t, "  flaky: "), 10u) << t;
  EXPECT_NE(t.find("... and 20 more flaky fixture(s)"), std::string::npos);
  EXPECT_NE(t.find("30 infrastructure error(s), not counted as failures:"), std::string::npos);
  EXPECT_NE(t.find("... and 25 more (report.md lists them all)"), std::string::npos);
}

// timings.credential_wait_ms: a section in every format only when some run waited for a
// credential lease, with the candidates whose runs did.
TEST(ReportCredentialWait, ShownPerCandidateOnlyWhenARunWaited) {
  auto recs = example();
  for (auto& r : recs) r["timings"]["credential_wait_ms"] = 0;
  const auto none = summarize(recs, std::nullopt);
  EXPECT_EQ(render_markdown(none, recs, "unit").find("Credential wait"), std::string::npos);
  EXPECT_EQ(render_html(none, recs, "unit", "/nonexistent").find("table-credential-wait"),
            std::string::npos);
  EXPECT_EQ(render_terminal_summary(none).find("credential wait"), std::string::npos);

  recs[6]["timings"]["credential_wait_ms"] = 1500;  // tuned / alpha #0
  recs[7]["timings"]["credential_wait_ms"] = 500;   // tuned / alpha #1
  const auto s = summarize(recs, std::nullopt);
  const std::string md = render_markdown(s, recs, "unit");
  EXPECT_NE(md.find("### Credential wait"), std::string::npos) << md;
  EXPECT_NE(md.find("| tuned | 2 | 2.0s | "), std::string::npos) << md;
  EXPECT_NE(md.find(" | 1.5s |\n"), std::string::npos) << md;
  EXPECT_EQ(md.find("| base | 0 |"), std::string::npos) << "a candidate that never waited";
  const std::string h = render_html(s, recs, "unit", "/nonexistent");
  EXPECT_NE(h.find("<tr class=\"credential-wait\"><td>tuned</td><td class=\"num\">2</td>"
                   "<td class=\"num\">2000 ms</td>"),
            std::string::npos);
  EXPECT_EQ(occurrences(h, "<tr class=\"credential-wait\">"), 1u);
  const std::string t = render_terminal_summary(s);
  EXPECT_NE(t.find("credential wait: 2 run(s) waited, 2.0 s in all, longest 1.5 s"),
            std::string::npos)
      << t;
  EXPECT_EQ(occurrences(t, "credential wait:"), 1u) << t;
}

TEST(ReportHtml, ChartsHaveOneMarkPerCandidateAndCell) {
  auto recs = example();
  auto s = summarize(recs, "base");
  std::string h = render_html(s, recs, "unit", "/nonexistent");
  EXPECT_EQ(occurrences(h, "<rect class=\"bar\""), 2u);
  EXPECT_EQ(occurrences(h, "<line class=\"whisker\""), 2u + 1u);  // two bars, one comparison
  EXPECT_EQ(occurrences(h, "<rect class=\"heat\""), 4u);
  EXPECT_EQ(occurrences(h, "<circle class=\"diff-mean\""), 1u);
  EXPECT_EQ(occurrences(h, "<circle class=\"diff-fixture\""), 2u);
  EXPECT_NE(h.find("data-runs=\"12\" data-passed=\"6\" data-failed=\"5\" data-errors=\"1\""),
            std::string::npos);
  EXPECT_EQ(occurrences(h, "<tr class=\"error-row\">"), 1u);
}

TEST(ReportHtml, IsSelfContained) {
  auto recs = example();
  std::string h = render_html(summarize(recs, "base"), recs, "unit", "/nonexistent");
  EXPECT_EQ(h.find("src="), std::string::npos);
  EXPECT_EQ(h.find("href=\"http"), std::string::npos);
  EXPECT_EQ(h.find("@import"), std::string::npos);
  EXPECT_EQ(h.find("url("), std::string::npos);
  EXPECT_NE(h.find("default-src 'none'"), std::string::npos);
}

TEST(ReportHtml, UnknownCostIsUnknown) {
  auto recs = example();
  std::string h = render_html(summarize(recs, std::nullopt), recs, "unit", "/nonexistent");
  EXPECT_EQ(occurrences(h, "<td class=\"cost\">unknown</td>"), 3u);  // two candidates and all
  EXPECT_EQ(h.find("$0"), std::string::npos);
}

TEST(ReportHtml, EscapesNamesInMarkupAndData) {
  auto recs = example();
  recs.push_back(record("<img onerror=x>", "</script><script>alert(1)</script>", 0, "error"));
  recs.back()["execution"]["error"] = "<b>boom</b> & \u2028";
  std::string h = render_html(summarize(recs, std::nullopt), recs, "unit", "/nonexistent");
  EXPECT_EQ(h.find("<img onerror"), std::string::npos);
  EXPECT_EQ(h.find("<script>alert"), std::string::npos);
  EXPECT_EQ(h.find("<b>boom"), std::string::npos);
  EXPECT_NE(h.find("&lt;img onerror=x&gt;"), std::string::npos);
  // Exactly the two script blocks of the page, whatever the data holds.
  EXPECT_EQ(occurrences(h, "</script>"), 2u);
  json data = embedded_runs(h);
  bool found = false;
  for (const auto& r : data["runs"])
    if (r["c"] == "<img onerror=x>") {
      found = true;
      EXPECT_EQ(r["f"], "</script><script>alert(1)</script>");
      EXPECT_EQ(r["err"], "<b>boom</b> & \u2028");
    }
  EXPECT_TRUE(found);
}

// The run data is written string by string, without a JSON document: every string must come
// out exactly as script_json of the same JSON string (nlohmann's escaping, its replacement of
// bytes that are not UTF-8, and the <script> escapes).
TEST(ReportHtml, RunDataStringsAreEscapedAsTheJsonDocumentWould) {
  const std::vector<std::string> pieces = {"<",           ">",
                                           "&",           "</script>",
                                           "<!--",        "\u2028",
                                           "\u2029",      "\"",
                                           "\\",          std::string(1, '\0'),
                                           "\x01",        "\x1f",
                                           "\x7f",        "\b",
                                           "\f",          "\n",
                                           "\r",          "\t",
                                           "é",           "日本",
                                           "😀",           "plain ",
                                           "\xE2\x80",    "\xED\xA0\x80",
                                           "\xC0\xAF",    "\xF4\x90\x80\x80",
                                           "\xFF",        "\x80",
                                           "\xE2\x80\xA7"};
  std::vector<std::string> texts = {""};
  for (const auto& p : pieces) texts.push_back(p);
  std::srand(17);
  for (int n = 0; n < 3000; ++n) {
    std::string t;
    const int parts = std::rand() % 8;
    for (int k = 0; k < parts; ++k) {
      if (std::rand() % 3 == 0)
        t += static_cast<char>(std::rand() % 256);  // any byte
      else
        t += pieces[static_cast<size_t>(std::rand()) % pieces.size()];
    }
    texts.push_back(std::move(t));
  }
  size_t replaced = 0;
  for (const auto& t : texts) {
    std::string out = "prefix";
    report_text::append_script_string(out, t);
    const std::string expected = report_text::script_json(json(t));
    ASSERT_EQ(out, "prefix" + expected)
        << json(t).dump(-1, ' ', true, json::error_handler_t::replace);
    EXPECT_EQ(out.find("</"), std::string::npos);
    replaced += expected.find("\xEF\xBF\xBD") != std::string::npos;
  }
  EXPECT_GT(replaced, 100u);  // the texts that are not UTF-8 were tried too
}

TEST(ReportHtml, DrillDownDataIsEmbeddedForLazyRendering) {
  evalbox::temp_dir dir;
  auto recs = example();
  std::string id = recs[1]["run_id"];
  ASSERT_TRUE(make_dirs(dir.path() / "runs" / id));
  ASSERT_TRUE(write_file(dir.path() / "runs" / id / "workspace.diff",
                         "--- a/x\n+++ b/x\n-</script>\n+fixed\n"));
  ASSERT_TRUE(write_file(dir.path() / "runs" / id / "transcript.jsonl",
                         "{\"type\":\"header\"}\n{\"type\":\"summary\"}\n"));
  std::string h = render_html(summarize(recs, std::nullopt), recs, "unit", dir.path());
  // Drill-downs are built by the script when opened, not in the markup.
  EXPECT_EQ(h.find("<details"), std::string::npos);
  json data = embedded_runs(h);
  ASSERT_EQ(data["runs"].size(), recs.size());
  EXPECT_EQ(data["runs_per_page"], 100);
  const json* run = nullptr;
  for (const auto& r : data["runs"])
    if (r["id"] == id) run = &r;
  ASSERT_NE(run, nullptr);
  EXPECT_EQ((*run)["v"], "failed");
  EXPECT_EQ((*run)["diff"], "--- a/x\n+++ b/x\n-</script>\n+fixed\n");
  EXPECT_EQ((*run)["transcript"], "{\"type\":\"header\"}\n{\"type\":\"summary\"}\n");
  EXPECT_EQ((*run)["checks"].size(), 2u);
  EXPECT_EQ((*run)["checks"][0]["id"], "hidden-tests");
  EXPECT_EQ((*run)["checks"][0]["passed"], false);
  // A run without files says so (null), rather than pretending to an empty diff.
  EXPECT_TRUE(data["runs"][0]["diff"].is_null() || data["runs"][0]["id"] == id);
}

TEST(ReportHtml, LargeFilesAreCutWithAMarker) {
  evalbox::temp_dir dir;
  auto recs = example();
  std::string id = recs[0]["run_id"];
  ASSERT_TRUE(make_dirs(dir.path() / "runs" / id));
  std::string transcript;
  for (int i = 0; i < 100; ++i)
    transcript += fmt::format("{{\"type\":\"step\",\"index\":{}}}\n", i);
  ASSERT_TRUE(write_file(dir.path() / "runs" / id / "transcript.jsonl", transcript));
  ASSERT_TRUE(write_file(dir.path() / "runs" / id / "workspace.diff", std::string(5000, 'x')));
  html_options opt;
  opt.per_file_bytes = 1000;
  std::string h = render_html(summarize(recs, std::nullopt), recs, "unit", dir.path(), opt);
  json data = embedded_runs(h);
  const json& run = data["runs"][0];
  ASSERT_EQ(run["id"], id);
  std::string t = run["transcript"];
  std::string d = run["diff"];
  // Whole lines only, then the marker with the real size of what was left out.
  size_t marker = t.find("[evalbox: cut here, ");
  ASSERT_NE(marker, std::string::npos);
  EXPECT_LE(marker, 1000u);
  EXPECT_EQ(t[marker - 1], '\n');
  EXPECT_NE(t.find(fmt::format("bytes omitted; the whole file is runs/{}/transcript.jsonl", id)),
            std::string::npos);
  EXPECT_EQ(d.substr(0, 1000), std::string(1000, 'x'));
  EXPECT_NE(d.find("[evalbox: cut here, 4000 bytes omitted"), std::string::npos) << d;
}

TEST(ReportHtml, SpentBudgetEmbedsOnlyTheMarker) {
  evalbox::temp_dir dir;
  auto recs = example();
  for (int i = 0; i < 2; ++i) {
    std::string id = recs[static_cast<size_t>(i)]["run_id"];
    ASSERT_TRUE(make_dirs(dir.path() / "runs" / id));
    ASSERT_TRUE(write_file(dir.path() / "runs" / id / "workspace.diff", std::string(800, 'y')));
  }
  html_options opt;
  opt.total_bytes = 800;  // exactly the first file
  json data =
      embedded_runs(render_html(summarize(recs, std::nullopt), recs, "unit", dir.path(), opt));
  EXPECT_EQ(data["runs"][0]["diff"], std::string(800, 'y'));
  std::string second = data["runs"][1]["diff"];
  EXPECT_NE(second.find("size budget is spent"), std::string::npos) << second;
}

// Found by fuzzing (tests/fuzz/regressions/results_jsonl): a record whose check or execution
// is not an object, or whose "passed" is not a boolean, made every report throw (evalbox
// report ended in std::terminate). Records come from a file users hand over: such a check is
// shown as not passed, and the run's error falls back to "not assessed".
TEST(ReportRecords, MisshapenRecordsAreReportedNotFatal) {
  std::vector<json> records = example();
  records[0]["grading"]["checks"] = json::array({1, {{"id", "x"}, {"passed", "yes"}}, nullptr});
  records[1]["execution"] = "broken";
  records[1]["verdict"] = "not_assessed";
  records[2]["grading"] = json::array();
  auto s = summarize(records, "base");
  std::string md = render_markdown(s, records, "unit");
  EXPECT_NE(md.find("not assessed"), std::string::npos);
  EXPECT_FALSE(render_junit(records, "unit").empty());
  std::string html = render_html(s, records, "unit", "/nonexistent");
  json runs = embedded_runs(html);
  bool seen = false;
  for (const auto& run : runs["runs"]) {
    for (const auto& c : run["checks"]) {
      if (c["id"] == "x") {
        EXPECT_EQ(c["passed"], false);
        seen = true;
      }
    }
  }
  EXPECT_TRUE(seen);
}

TEST(ReportRecords, LatestRecordPerTrialWins) {
  auto recs = example();
  recs.push_back(record("base", "alpha", 1, "passed"));  // a rerun of a failed trial
  auto current = latest_records(recs);
  ASSERT_EQ(current.size(), 12u);
  auto s = summarize(current, std::nullopt);
  EXPECT_EQ(s.candidates[0].passes, 3u);
}

TEST(ReportWrite, WritesEveryFormatOrTheChosenOne) {
  evalbox::temp_dir dir;
  auto recs = example();
  ASSERT_TRUE(write_reports(dir.path(), recs, "unit", "base"));
  for (const char* f : {"summary.json", "report.md", "report.html", "junit.xml"})
    EXPECT_TRUE(std::filesystem::exists(dir.path() / f)) << f;
  evalbox::temp_dir only;
  const report_format html[] = {report_format::html};
  ASSERT_TRUE(write_reports(only.path(), recs, "unit", "base", html));
  EXPECT_TRUE(std::filesystem::exists(only.path() / "report.html"));
  EXPECT_FALSE(std::filesystem::exists(only.path() / "report.md"));
  auto summary = read_json_file(dir.path() / "summary.json");
  ASSERT_TRUE(summary);
  EXPECT_EQ((*summary)["schema"], "evalbox.summary.v1");
  EXPECT_EQ((*summary)["settings"]["baseline"], "base");
}

TEST(ReportWrite, MissingBaselineReportsWithoutComparison) {
  evalbox::temp_dir dir;
  auto s = write_reports(dir.path(), example(), "unit", "absent");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_TRUE(s->comparisons.empty());
}

// ---- reports from results.jsonl, one record at a time ----

// Writes `records` as results.jsonl lines into `dir`.
void write_results(const std::filesystem::path& dir, const std::vector<json>& records) {
  std::string text;
  for (const auto& r : records) text += canonical_json(r) + "\n";
  ASSERT_TRUE(write_file(dir / "results.jsonl", text));
}

// example() and two reruns: base/alpha#1 now passes, tuned/beta#2 now fails.
std::vector<json> with_reruns() {
  auto recs = example();
  recs.push_back(record("base", "alpha", 1, "passed"));
  recs.push_back(record("tuned", "beta", 2, "failed"));
  return recs;
}

TEST(ReportIndex, KeepsTheNewestRecordOfEachTrialInRecordOrder) {
  evalbox::temp_dir dir;
  auto recs = with_reruns();
  write_results(dir.path(), recs);
  auto runs = run_index::of_results(results_dir(dir.path()));
  ASSERT_TRUE(runs) << runs.error().message;
  auto current = latest_records(recs);
  ASSERT_EQ(runs->size(), current.size());
  for (size_t i = 0; i < current.size(); ++i) {
    EXPECT_EQ(runs->run_id(i), current[i]["run_id"]) << i;
    EXPECT_EQ(runs->outcome(i).candidate, current[i]["candidate"]["id"]) << i;
    // Read back (from what was set aside): what the renderers show of the record.
    auto back = runs->read(i);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(*back, detail_of(current[i])) << i;
    EXPECT_EQ(*back, detail_of(parse_record(canonical_json(current[i]), &report_fields()))) << i;
    const json& checks = current[i]["grading"]["checks"];
    ASSERT_EQ(back->checks.size(), checks.size()) << i;
    for (size_t k = 0; k < checks.size(); ++k) {
      EXPECT_EQ(back->checks[k].id, checks[k]["id"]) << i;
      EXPECT_EQ(back->checks[k].passed, checks[k]["passed"]) << i;
    }
  }
  EXPECT_EQ(runs->records_seen(), recs.size());
  EXPECT_EQ(runs->superseded(), 2u);
  EXPECT_EQ(runs->suite_name("fallback"), "unit");
  auto memory = run_index::of_records(recs, /*newest_only=*/true);
  EXPECT_EQ(memory.size(), current.size());
  EXPECT_EQ(memory.superseded(), 2u);
}

TEST(ReportIndex, VisitsEveryRecordSupersededOnesToo) {
  evalbox::temp_dir dir;
  write_results(dir.path(), with_reruns());
  size_t seen = 0;
  auto runs = run_index::of_results(results_dir(dir.path()), [&](const json&) -> status {
    ++seen;
    return {};
  });
  ASSERT_TRUE(runs);
  EXPECT_EQ(seen, 14u);
  auto empty = run_index::of_results(results_dir(dir.path() / "none"));
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->empty());
  EXPECT_EQ(empty->suite_name("fallback"), "fallback");
}

// The reports written from results.jsonl, a record read back at a time, are the reports of
// the newest records rendered in memory.
TEST(ReportIndex, ReportsFromTheFileAreTheReportsOfTheRecords) {
  evalbox::temp_dir dir;
  auto recs = with_reruns();
  std::string id = recs[2]["run_id"];
  ASSERT_TRUE(make_dirs(dir.path() / "runs" / id));
  ASSERT_TRUE(write_file(dir.path() / "runs" / id / "workspace.diff", "--- a\n+++ b\n"));
  write_results(dir.path(), recs);
  auto runs = run_index::of_results(results_dir(dir.path()));
  ASSERT_TRUE(runs);
  auto s = write_reports(dir.path(), *runs, "unit", "base");
  ASSERT_TRUE(s) << s.error().message;

  // As read from the file: numbers parsed from JSON, not as constructed above.
  auto all = results_dir(dir.path()).read_records();
  ASSERT_TRUE(all);
  auto current = latest_records(*all);
  auto expected = summarize(current, "base");
  auto file = [&](const char* name) {
    auto text = read_file(dir.path() / name);
    EXPECT_TRUE(text) << name;
    return text ? *text : std::string();
  };
  EXPECT_EQ(file("summary.json"), pretty_json(stats::to_json(expected)));
  EXPECT_EQ(file("report.md"), render_markdown(expected, current, "unit"));
  EXPECT_EQ(file("junit.xml"), render_junit(current, "unit"));
  EXPECT_EQ(file("report.html"), render_html(expected, current, "unit", dir.path()));
  EXPECT_NE(file("report.html").find("--- a\\n+++ b\\n"), std::string::npos);
  // No temporary file is left beside the reports.
  size_t entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 6u);  // results.jsonl, runs/ and the four reports
}

// results.jsonl of `dir` indexed with TMPDIR set to `tmpdir` (put back afterwards): where the
// index sets the fields it reads back aside.
result<run_index> index_with_tmpdir(const std::filesystem::path& dir,
                                    const std::filesystem::path& tmpdir) {
  const char* old = std::getenv("TMPDIR");
  const std::string saved = old ? old : "";
  ::setenv("TMPDIR", tmpdir.c_str(), 1);
  auto index = run_index::of_results(results_dir(dir));
  if (old)
    ::setenv("TMPDIR", saved.c_str(), 1);
  else
    ::unsetenv("TMPDIR");
  return index;
}

// results.jsonl of `dir` indexed while TMPDIR names no directory: nothing can be set aside, so
// runs are read back from results.jsonl.
result<run_index> index_without_a_temporary_directory(const std::filesystem::path& dir) {
  return index_with_tmpdir(dir, dir / "no-such-directory");
}

// The fields read back are set aside in a temporary file while indexing; without a usable
// temporary directory the index reads them from results.jsonl instead, with the same reports.
TEST(ReportIndex, ReadsBackTheSameWithOrWithoutATemporaryFile) {
  evalbox::temp_dir dir;
  auto recs = with_reruns();
  write_results(dir.path(), recs);
  auto report_of = [&](const run_index& runs) {
    std::ostringstream md, junit;
    auto s = summarize_runs(runs, std::string("base"));
    EXPECT_TRUE(s);
    EXPECT_TRUE(write_markdown(md, *s, runs, "unit"));
    EXPECT_TRUE(write_junit(junit, runs, "unit"));
    return md.str() + junit.str();
  };
  auto aside = run_index::of_results(results_dir(dir.path()));
  ASSERT_TRUE(aside) << aside.error().message;
  auto direct = index_without_a_temporary_directory(dir.path());
  ASSERT_TRUE(direct) << direct.error().message;
  const std::string expected = report_of(*direct);
  EXPECT_EQ(report_of(*aside), expected);
  for (size_t i = 0; i < aside->size(); ++i) EXPECT_EQ(*aside->read(i), *direct->read(i)) << i;
  // Set aside, the reports no longer need results.jsonl as it was.
  ASSERT_TRUE(write_file(dir.path() / "results.jsonl", ""));
  EXPECT_EQ(report_of(*aside), expected);
  EXPECT_FALSE(direct->read(0)) << "read back from a results.jsonl that was emptied";
}

// What was set aside is only a copy: an entry that no longer decodes (here, the whole temporary
// file overwritten behind the index's back) is read from results.jsonl, never shown damaged.
TEST(ReportIndex, ADamagedSetAsideEntryIsReadFromResultsJsonl) {
  evalbox::temp_dir dir, tmp;
  auto recs = with_reruns();
  write_results(dir.path(), recs);
  auto runs = index_with_tmpdir(dir.path(), tmp.path());
  ASSERT_TRUE(runs) << runs.error().message;
  ASSERT_TRUE(runs->reads_aside());
  // The spill: the one descriptor of this process open on a file under `tmp`.
  int damaged = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const auto target = std::filesystem::read_symlink(e.path(), ec).string();
    if (ec || target.rfind(tmp.path().string() + "/", 0) != 0) continue;
    unique_fd fd(::open(e.path().c_str(), O_WRONLY | O_CLOEXEC));
    ASSERT_TRUE(fd) << target;
    struct stat st {};
    ASSERT_EQ(::fstat(fd.get(), &st), 0);
    const std::string garbage(static_cast<size_t>(st.st_size), '\xff');
    ASSERT_EQ(::pwrite(fd.get(), garbage.data(), garbage.size(), 0),
              static_cast<ssize_t>(garbage.size()));
    ++damaged;
  }
  ASSERT_EQ(damaged, 1);
  const auto current = latest_records(recs);
  ASSERT_EQ(runs->size(), current.size());
  for (size_t i = 0; i < runs->size(); ++i) {
    auto back = runs->read(i);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(*back, detail_of(current[i])) << i;
  }
}

// The reports parse only the fields they show (report_fields); records of every odd shape a
// results.jsonl may hold report exactly as their whole records rendered in memory do.
TEST(ReportIndex, OddRecordsReportAsTheirWholeRecordsDo) {
  evalbox::temp_dir dir;
  const char* head = R"({"schema":"evalbox.run.v1","suite":"odd","candidate":{"id":"c"},)";
  std::vector<std::string> lines = {
      // checks of every shape, a detail that is not a string, a score that is a string
      R"("fixture":{"id":"f1"},"trial":1,"run_id":"r1","verdict":"failed","grading":{"checks":)"
      R"([1,{"id":["x"],"passed":"yes"},{"id":"b","passed":false,"detail":{"a":1}},)"
      R"({"id":"c","passed":false,"detail":"why"}],"score":"0.5"},"timings":{"wall_ms":"fast"}})",
      // errors as objects and arrays, an error kind that is a number
      R"("fixture":{"id":"f2"},"trial":1,"run_id":"r2","verdict":"not_assessed","execution":)"
      R"({"status":"error","error":{"why":"x"},"error_kind":7},"grading":{"error":["g"]}})",
      R"("fixture":{"id":"f3"},"trial":1,"run_id":"r3","verdict":"error","execution":"boom",)"
      R"("grading":{"status":"error","error":"grader broke","checks":{"id":"x"}}})",
      // repeated keys: the last one counts, in the index and in every renderer
      R"("fixture":{"id":"f4"},"trial":1,"run_id":"r4","verdict":"passed","verdict":"failed",)"
      R"("grading":{"checks":[{"id":"a","passed":true}]},"grading":{"checks":[{"id":"z"}]}})",
      // usage and judge usage of odd types, extra fields everywhere
      R"("fixture":{"id":"f5","digest":"d"},"trial":2,"run_id":"r5","verdict":"passed",)"
      R"("usage":{"input_tokens":-1,"output_tokens":1.5,"cost_usd":"1"},"judge_usage":[],)"
      R"("agent":{"mechanisms":{"x":[[[]]]}},"grading":{"checks":[{"id":"ok","passed":true,)"
      R"("detail":"","weight":2}],"score":1}})",
      R"("fixture":{"id":"f6"},"trial":1,"run_id":"r6","verdict":"passed","judge_usage":)"
      R"({"input_tokens":3,"output_tokens":4,"cost_usd":0.25}})",
  };
  std::string text;
  for (const auto& l : lines) text += head + l + "\n";
  ASSERT_TRUE(write_file(dir.path() / "results.jsonl", text));
  auto runs = run_index::of_results(results_dir(dir.path()));
  ASSERT_TRUE(runs) << runs.error().message;
  ASSERT_EQ(runs->size(), lines.size());
  auto s = write_reports(dir.path(), *runs, "odd", std::nullopt);
  ASSERT_TRUE(s) << s.error().message;

  auto all = results_dir(dir.path()).read_records();
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), lines.size());
  auto current = latest_records(*all);
  auto expected = summarize(current, std::nullopt);
  auto file = [&](const char* name) {
    auto t = read_file(dir.path() / name);
    EXPECT_TRUE(t) << name;
    return t ? *t : std::string();
  };
  EXPECT_EQ(file("summary.json"), pretty_json(stats::to_json(expected)));
  EXPECT_EQ(file("report.md"), render_markdown(expected, current, "odd"));
  EXPECT_EQ(file("junit.xml"), render_junit(current, "odd"));
  EXPECT_EQ(file("report.html"), render_html(expected, current, "odd", dir.path()));
  // What the odd shapes render as: the last verdict, and the reasons that are text.
  EXPECT_NE(file("report.md").find("c / f4 #1 (runs/r4): z"), std::string::npos);
  EXPECT_NE(file("junit.xml").find("grader: grader broke"), std::string::npos);
}

// Memory stays O(runs × a small entry) because no renderer needs more than the record of the
// run it is writing: junit.xml and report.html read each run's record once, report.md only
// those of failed runs, summary.json none.
TEST(ReportIndex, EachReportReadsARunsRecordAtMostOnce) {
  evalbox::temp_dir dir;
  auto recs = with_reruns();
  write_results(dir.path(), recs);
  auto runs = run_index::of_results(results_dir(dir.path()));
  ASSERT_TRUE(runs);
  const size_t n = runs->size();
  size_t failed = 0;
  for (const auto& o : runs->outcomes()) failed += o.outcome == stats::run_outcome::verdict::failed;
  ASSERT_EQ(n, 12u);
  ASSERT_EQ(failed, 5u);
  auto reads_for = [&](report_format f) {
    size_t before = runs->reads();
    const report_format only[] = {f};
    EXPECT_TRUE(write_reports(dir.path(), *runs, "unit", std::nullopt, only));
    return runs->reads() - before;
  };
  EXPECT_EQ(reads_for(report_format::json), 0u);
  EXPECT_EQ(reads_for(report_format::md), failed);
  EXPECT_EQ(reads_for(report_format::junit), n);
  EXPECT_EQ(reads_for(report_format::html), n);
}

TEST(ReportIndex, ARecordThatCannotBeReadBackFailsTheReportNotTheProcess) {
  evalbox::temp_dir dir;
  write_results(dir.path(), example());
  auto runs = index_without_a_temporary_directory(dir.path());
  ASSERT_TRUE(runs);
  // results.jsonl replaced (not appended to) after indexing: the locations no longer hold runs.
  ASSERT_TRUE(write_file(dir.path() / "results.jsonl", std::string(100, 'x')));
  const report_format junit[] = {report_format::junit};
  auto s = write_reports(dir.path(), *runs, "unit", std::nullopt, junit);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("write junit.xml"), std::string::npos) << s.error().message;
}

// ---- compare ----

// `fixtures` fixtures, one trial each; `passing` of them pass (the first ones).
std::vector<json> single_trials(const std::string& candidate, int fixtures, int passing,
                                int offset = 0) {
  std::vector<json> r;
  for (int f = 0; f < fixtures; ++f)
    r.push_back(record(candidate, fmt::format("f{:02}", (f + offset) % fixtures), 0,
                       f < passing ? "passed" : "failed"));
  return r;
}

TEST(ReportCompare, ClearImprovementAcrossDirectoriesIsBetter) {
  compare_request req;
  req.baseline_records = single_trials("agent", 30, 5);
  req.candidate_records = single_trials("agent", 30, 25);
  req.baseline_label = "A";
  req.candidate_label = "B";
  auto r = compare_results(req);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->comparisons.size(), 1u);
  const auto& p = r->comparisons[0];
  EXPECT_EQ(p.verdict, stats::verdict_better);
  EXPECT_EQ(p.n, 30u);
  ASSERT_TRUE(p.mcnemar);
  EXPECT_EQ(p.mcnemar->b, 20u);
  EXPECT_EQ(p.mcnemar->c, 0u);
  std::string table = render_compare_table(*r);
  EXPECT_NE(table.find("agent (B) vs agent (A): better"), std::string::npos) << table;
  EXPECT_NE(table.find("exact McNemar p"), std::string::npos);
  EXPECT_EQ(compare_to_json(*r)["schema"], "evalbox.compare.v1");
  EXPECT_EQ(compare_to_json(*r)["comparisons"][0]["verdict"], "better");
}

TEST(ReportCompare, ClearRegressionIsWorse) {
  compare_request req;
  req.baseline_records = single_trials("agent", 30, 25);
  req.candidate_records = single_trials("agent", 30, 5);
  auto r = compare_results(req);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->comparisons[0].verdict, stats::verdict_worse);
}

TEST(ReportCompare, SameRateOnDifferentFixturesIsNoDetectableDifference) {
  compare_request req;
  req.baseline_records = single_trials("agent", 20, 10);
  req.candidate_records = single_trials("agent", 20, 10, 5);  // passes a shifted half
  auto r = compare_results(req);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->comparisons[0].verdict, stats::verdict_no_difference);
  EXPECT_EQ(r->comparisons[0].mcnemar->b, 5u);
  EXPECT_EQ(r->comparisons[0].mcnemar->c, 5u);
}

TEST(ReportCompare, NamedCandidatesWithinOneDirectory) {
  auto recs = single_trials("new", 30, 24);
  auto old = single_trials("old", 30, 6);
  recs.insert(recs.end(), old.begin(), old.end());
  compare_request req;
  req.baseline_records = recs;
  req.candidate_records = recs;
  req.candidate = "new";
  req.baseline = "old";
  auto r = compare_results(req);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->comparisons[0].candidate, "new");
  EXPECT_EQ(r->comparisons[0].baseline, "old");
  EXPECT_EQ(r->comparisons[0].verdict, stats::verdict_better);
}

TEST(ReportCompare, WarnsAboutFixturesThatChangedBetweenTheRuns) {
  compare_request req;
  req.baseline_records = single_trials("agent", 4, 2);
  req.candidate_records = single_trials("agent", 4, 2);
  for (auto& r : req.baseline_records) r["fixture"]["digest"] = "d1";
  for (auto& r : req.candidate_records) r["fixture"]["digest"] = "d1";
  req.candidate_records[1]["fixture"]["digest"] = "d2";
  req.baseline_label = "A";
  req.candidate_label = "B";
  auto r = compare_results(req);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->changed_fixtures, std::vector<std::string>{"f01"});
  EXPECT_NE(render_compare_table(*r).find("warning: 1 fixture(s) differ between A and B"),
            std::string::npos);
  EXPECT_EQ(compare_to_json(*r)["changed_fixtures"], json::array({"f01"}));
}

TEST(ReportCompare, UnknownCandidateIsAnError) {
  compare_request req;
  req.baseline_records = single_trials("a", 3, 1);
  req.candidate_records = req.baseline_records;
  req.candidate = "missing";
  req.baseline = "a";
  EXPECT_FALSE(compare_results(req));
}

TEST(ReportCompare, NoCommonCandidateIsAnError) {
  compare_request req;
  req.baseline_records = single_trials("a", 3, 1);
  req.candidate_records = single_trials("b", 3, 1);
  EXPECT_FALSE(compare_results(req));
}

}  // namespace
}  // namespace evalbox::harness
