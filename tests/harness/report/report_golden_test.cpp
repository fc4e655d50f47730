// The bytes of every report (summary.json, report.md, report.html, junit.xml and the terminal
// summary) for one fixed results directory must equal the golden files in golden/. The records
// are chosen to reach every section: a baseline comparison, pass@k, flaky fixtures (the oracle
// among them), execution and grader errors, a rerun that supersedes a record, partly known cost,
// and hostile names and files (Markdown pipes, markup, "</script>", U+2028, a file too large to
// embed whole). Regenerate deliberately with EVALBOX_UPDATE_GOLDEN=1 and review the diff.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "base/fs.h"
#include "base/json.h"
#include "harness/report/report.h"
#include "harness/results/results.h"
#include "tests/support/golden.h"

namespace evalbox::harness {
namespace {

namespace fs = std::filesystem;

const fs::path golden_dir = fs::path(EVALBOX_SOURCE_DIR) / "tests/harness/report/golden";

struct run {
  std::string candidate;
  std::string fixture;
  int trial = 0;
  char result = 'P';  // P passed, F failed, E execution error, G grader error
  std::optional<double> cost;
  bool tokens = true;
};

// A stable hex run id (what `evalbox run` derives from the digests).
std::string run_id_of(const run& r, int rerun) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : fmt::format("{}/{}/{}/{}", r.candidate, r.fixture, r.trial, rerun)) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return fmt::format("{:016x}", h);
}

// One evalbox.run.v1 record as `evalbox run` writes it.
json record(const run& r, int rerun = 0) {
  const bool exec_error = r.result == 'E', grader_error = r.result == 'G';
  json checks = json::array();
  if (!exec_error && !grader_error) {
    checks.push_back({{"id", "hidden-tests"},
                      {"kind", "shell"},
                      {"weight", 1},
                      {"passed", r.result == 'P'},
                      {"detail", r.result == 'P' ? "" : "exit 1: AssertionError | <b>x</b>"}});
    checks.push_back({{"id", "tests-untouched"},
                      {"kind", "git"},
                      {"weight", 1},
                      {"passed", true},
                      {"detail", ""}});
  }
  json execution = {{"status", exec_error ? "error" : "completed"},
                    {"error", exec_error ? json("codex exited with status 1: Error: bad "
                                                "config.toml\nsecond line | with a pipe")
                                         : json(nullptr)},
                    {"error_kind", exec_error ? json("agent") : json(nullptr)},
                    {"outcome", "exited"},
                    {"exit_code", exec_error ? 1 : 0}};
  json grading = {
      {"status", grader_error ? "error"
                 : exec_error ? "skipped"
                              : "completed"},
      {"checks", checks},
      {"score", exec_error || grader_error ? json(nullptr) : json(r.result == 'P' ? 1.0 : 0.5)},
      {"threshold", 1.0},
      {"error", grader_error ? json("grading sandbox: ENOSPC") : json(nullptr)}};
  // Unsigned, as JSON read back from a file has them.
  const auto t = static_cast<uint64_t>(r.trial);
  json usage = {{"input_tokens", r.tokens ? json(uint64_t{1200} + 7 * t) : json(nullptr)},
                {"output_tokens", r.tokens ? json(uint64_t{340} + t) : json(nullptr)},
                {"cost_usd", r.cost ? json(*r.cost) : json(nullptr)}};
  json timings = {{"wall_ms", 900 + 137 * r.trial + static_cast<int>(r.fixture.size())}};
  // tuned leases one login: its later trials waited for it.
  if (r.candidate == "tuned") timings["credential_wait_ms"] = uint64_t{250} * t;
  return {{"schema", "evalbox.run.v1"},
          {"run_id", run_id_of(r, rerun)},
          {"suite", "golden <suite> & co"},
          {"fixture", {{"id", r.fixture}, {"digest", "f0"}}},
          {"candidate", {{"id", r.candidate}, {"adapter", "command"}, {"digest", "c0"}}},
          {"trial", r.trial},
          {"attempts", 1},
          {"execution", execution},
          {"grading", grading},
          {"verdict", r.result == 'P'   ? "passed"
                      : r.result == 'F' ? "failed"
                                        : "not_assessed"},
          {"usage", usage},
          {"timings", timings}};
}

// oracle, base (the baseline) and tuned on three fixtures, three trials each, and a candidate
// whose name needs escaping everywhere; then two reruns that supersede earlier records.
std::vector<json> records() {
  std::vector<json> out;
  auto add = [&](const std::string& candidate, const std::string& fixture, std::string_view rs,
                 std::optional<double> cost = std::nullopt, bool tokens = true) {
    for (size_t t = 0; t < rs.size(); ++t)
      out.push_back(record({candidate, fixture, static_cast<int>(t), rs[t], cost, tokens}));
  };
  add("oracle", "add-flag", "PPP", std::nullopt, false);
  add("oracle", "fix-parser", "PFP", std::nullopt, false);  // an unstable oracle
  add("oracle", "rename|api", "PPP", std::nullopt, false);
  add("base", "add-flag", "PFF", 0.25);
  add("base", "fix-parser", "FFF", 0.5);
  add("base", "rename|api", "PPG");
  add("tuned", "add-flag", "PPE", 0.125);
  add("tuned", "fix-parser", "PFP");
  add("tuned", "rename|api", "PPP", 0.0625);
  add("<script>alert(1)</script>", "add-flag", "FE");
  // Reruns: base/add-flag#1 now passes, tuned/fix-parser#2 now fails.
  out.push_back(record({"base", "add-flag", 1, 'P', 0.25}, 1));
  out.push_back(record({"tuned", "fix-parser", 2, 'F'}, 1));
  return out;
}

// The run files report.html embeds: a diff with markup and U+2028, a transcript that tries to
// end the script block, and one transcript larger than the per-file cap.
void write_run_files(const fs::path& dir, const std::vector<json>& recs) {
  auto put = [&](const json& r, const char* name, const std::string& text) {
    fs::path d = dir / "runs" / r["run_id"].get<std::string>();
    ASSERT_TRUE(make_dirs(d));
    ASSERT_TRUE(write_file(d / name, text));
  };
  put(recs[0], "workspace.diff",
      "--- a/flag.py\n+++ b/flag.py\n@@ -1 +1 @@\n-x = 1 </script><!--\n+x = 2 \xE2\x80\xA8 "
      "&amp;\n");
  put(recs[0], "transcript.jsonl",
      "{\"type\":\"header\",\"agent\":\"oracle\",\"model\":\"</script>\"}\n"
      "{\"type\":\"step\",\"index\":0,\"source\":\"agent\",\"message\":\"<!-- hi -->\"}\n");
  std::string big;
  for (int i = 0; big.size() < 20 * 1024; ++i)
    big += fmt::format(
        "{{\"type\":\"step\",\"index\":{},\"source\":\"agent\",\"message\":\"line "
        "{} é\"}}\n",
        i, i);
  put(recs[12], "transcript.jsonl", big);
  put(recs[12], "workspace.diff", "");
}

// Writes results.jsonl the way `evalbox run` does (run.json, then the appended line).
void record_all(const fs::path& dir, const std::vector<json>& recs) {
  results_dir results(dir);
  ASSERT_TRUE(results.create());
  for (const auto& r : recs) {
    ASSERT_TRUE(make_dirs(results.run_dir(r["run_id"].get<std::string>())));
    ASSERT_TRUE(results.record(r));
  }
}

std::string file(const fs::path& p) {
  auto text = read_file(p);
  EXPECT_TRUE(text) << p;
  return text ? *text : std::string();
}

TEST(ReportGolden, EveryReportFromResultsJsonlMatchesItsGoldenFile) {
  temp_dir dir("evalbox-report-golden");
  auto recs = records();
  record_all(dir.path(), recs);
  write_run_files(dir.path(), recs);
  auto runs = run_index::of_results(results_dir(dir.path()));
  ASSERT_TRUE(runs) << runs.error().message;
  auto s = write_reports(dir.path(), *runs, runs->suite_name("fallback"), "base");
  ASSERT_TRUE(s) << s.error().message;
  for (const char* name : {"summary.json", "report.md", "report.html", "junit.xml"})
    evalbox::testing::expect_golden(file(dir.path() / name), golden_dir / name);
  evalbox::testing::expect_golden(render_terminal_summary(*s), golden_dir / "terminal.txt");
}

// Records in memory (what `evalbox compare` and tests render) give the same bytes.
TEST(ReportGolden, RecordsInMemoryGiveTheSameBytes) {
  temp_dir dir("evalbox-report-golden");
  auto recs = records();
  write_run_files(dir.path(), recs);
  ASSERT_TRUE(write_reports(dir.path(), recs, "golden <suite> & co", "base"));
  for (const char* name : {"summary.json", "report.md", "report.html", "junit.xml"})
    EXPECT_EQ(file(dir.path() / name), file(golden_dir / name)) << name;
}

// A small embedding budget: files cut at 64 bytes, then only markers; two runs per page.
TEST(ReportGolden, HtmlWithASpentBudgetMatchesItsGoldenFile) {
  temp_dir dir("evalbox-report-golden");
  auto recs = latest_records(records());
  write_run_files(dir.path(), records());
  auto s = summarize_records(recs, "base");
  ASSERT_TRUE(s) << s.error().message;
  html_options opt;
  opt.per_file_bytes = 64;
  opt.total_bytes = 200;
  opt.runs_per_page = 2;
  evalbox::testing::expect_golden(render_html(*s, recs, "budget", dir.path(), opt),
                                  golden_dir / "report-budget.html");
}

}  // namespace
}  // namespace evalbox::harness
