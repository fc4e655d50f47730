// Report writers: summary.json, report.md, report.html and junit.xml, computed from the records
// of results.jsonl alone (so merged shard results report exactly like one process's), and the
// short terminal summary `evalbox run` ends with. docs/report.md describes every report.
//
// Where each part lives: run_index.cpp (the index), markdown.cpp, junit.cpp and html.cpp (with
// assets/, embedded at build time) the renderers, report.cpp what they share and
// write_reports; the statistics are stats.h.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/json_fwd.h"
#include "harness/report/stats.h"
#include "harness/results/results.h"

namespace evalbox::harness {
inline namespace report {

enum class report_format { json, md, html, junit };

inline constexpr report_format all_report_formats[] = {report_format::json, report_format::md,
                                                       report_format::html, report_format::junit};

// "md" | "html" | "json" | "junit" → the format; nullopt for anything else.
std::optional<report_format> parse_report_format(std::string_view name);
// The file each format is written to: summary.json, report.md, report.html, junit.xml.
std::string_view report_file_name(report_format f);

// The statistics' view of evalbox.run.v1 records.
std::vector<stats::run_outcome> outcomes_from_records(const std::vector<json>& records);

// One record per (candidate, fixture, trial): the last one in results.jsonl. A rerun
// (--no-resume) or a changed fixture appends new records for the same trial; the newest wins.
std::vector<json> latest_records(const std::vector<json>& records);

// The runs a report is written from, without their records: for each run the compact outcome
// the statistics need, its run id, and where its full record is. Renderers read one record
// back at a time (read) while they write that run, so writing reports takes memory in
// proportion to runs × this small entry, not to the records themselves.
// Which records show an older grading of the runs (report --grading, compare --grading):
// "original" — each run as its own run graded it, before any regrade — or grading digests
// (run.json's grading.digest; each fixture's runs have their own).
struct grading_selection {
  bool original = false;
  std::vector<std::string> digests;  // whole digests
  [[nodiscard]] bool empty() const { return !original && digests.empty(); }
  // Whether `record` (holding report_fields()) is one of them.
  [[nodiscard]] bool selects(const json& record) const;
  // "original", or the digests' first 12 digits joined by "+": a directory name.
  [[nodiscard]] std::string label() const;
};
// `given`: "original", or digests as whole or by their first 8+ hex digits, each naming one
// digest among the records of `dir`. invalid_argument errors list the digests there are.
result<grading_selection> select_gradings(const results_dir& dir,
                                          std::span<const std::string> given);

// The fields of a record the reports read (run_index.cpp lists them): a run_index built from
// results.jsonl parses only these, and its visitor and read() see records holding only these.
const record_fields& report_fields();

// What the renderers show of a run beyond its outcome (run_index::read), from the record's
// report_fields(): typed, so that reading a run back builds no JSON document.
struct run_detail {
  struct check {
    std::string id;       // "" when the record's is not a string
    bool passed = false;  // report_text::passed
    std::string detail;   // "" when the record's is not a string
    friend bool operator==(const check&, const check&) = default;
  };
  std::vector<check> checks;  // grading.checks in order (none when it is not an array)
  // grading.score and timings.wall_ms as JSON text (nlohmann's digits: an integer stays one),
  // or "" when the field is missing or not a number.
  std::string score;
  std::string wall_ms;
  // execution.error_kind, else "grader" when grading.status is "error", else "".
  std::string error_kind;
  friend bool operator==(const run_detail&, const run_detail&) = default;
};

// The detail of a record holding (at least) report_fields().
run_detail detail_of(const json& record);

class run_index {
 public:
  // Called with each record while results.jsonl is indexed (superseded ones too), holding
  // report_fields() only.
  using record_visitor = std::function<status(const json& record)>;

  // results.jsonl of `dir` in one pass, keeping the newest record of each (candidate,
  // fixture, trial) (latest_records). `visit`, when set, sees every record on the way.
  // With `grading`, only the records it selects are indexed: the newest of each trial among
  // them (report --grading); `visit` still sees every record.
  static result<run_index> of_results(const results_dir& dir, const record_visitor& visit = {},
                                      const grading_selection* grading = nullptr);
  // An index built from records handed over one at a time in results.jsonl's order, each with
  // its place in `results_file`: once finished, the index of_results gives of the complete
  // file. A merge indexes the lines it appends as it goes rather than lexing them all again;
  // until the file is complete, the index's read() is safe only when reads_aside().
  class incremental {
   public:
    explicit incremental(std::filesystem::path results_file);
    incremental(incremental&&) noexcept;
    ~incremental();
    // A record holding report_fields() (as for_each_record with them gives it).
    status add(const json& record, record_location where);
    // A line of results.jsonl, parsed as for_each_record does (no record: skipped).
    status add_line(std::string_view line, record_location where);
    result<run_index> finish() &&;

   private:
    struct state;
    std::unique_ptr<state> s_;
  };
  // Records already in memory, which must outlive the index: every one of them as given, or
  // with `newest_only` the newest of each trial, as from results.jsonl.
  static run_index of_records(std::span<const json> records, bool newest_only = false);

  [[nodiscard]] size_t size() const noexcept { return outcomes_.size(); }
  [[nodiscard]] bool empty() const noexcept { return outcomes_.empty(); }
  // In record order; what stats::summarize takes.
  [[nodiscard]] std::span<const stats::run_outcome> outcomes() const noexcept { return outcomes_; }
  [[nodiscard]] const stats::run_outcome& outcome(size_t run) const { return outcomes_[run]; }
  [[nodiscard]] const std::string& run_id(size_t run) const { return run_ids_[run]; }
  // Records seen, and how many of them a newer record of the same trial superseded.
  [[nodiscard]] size_t records_seen() const noexcept { return seen_; }
  [[nodiscard]] size_t superseded() const noexcept { return seen_ - outcomes_.size(); }
  // The first record's "suite" (superseded records included), or `fallback`.
  [[nodiscard]] std::string suite_name(std::string fallback) const;

  // The detail of `run`, read back: from what was set aside while indexing, else from
  // results.jsonl (report_fields() only), or from the record in memory.
  [[nodiscard]] result<run_detail> read(size_t run) const;
  // Whether read() reads the fields set aside while indexing, not results.jsonl.
  [[nodiscard]] bool reads_aside() const noexcept { return aside_reader_.has_value(); }
  // How many records read() has returned: each renderer reads a run's record at most once.
  [[nodiscard]] size_t reads() const noexcept { return reads_.n.load(); }

 private:
  class builder;  // indexes records one at a time, newest per trial (report.cpp)
  run_index() = default;

  std::vector<stats::run_outcome> outcomes_;
  std::vector<std::string> run_ids_;
  std::vector<record_location> where_;  // in results.jsonl; for records in memory, offset = index
  // The run_detail of each run, set aside while indexing (record_spill, encoded in
  // run_index.cpp) so that reading a run back decodes a few hundred bytes, not its record;
  // empty when they could not be.
  std::vector<record_location> aside_;
  std::optional<record_spill::reader> aside_reader_;
  size_t seen_ = 0;
  std::string suite_;
  std::span<const json> memory_;  // the records in memory; empty when read from reader_
  std::optional<record_reader> reader_;
  // Renderers may read at once (write_reports renders report.html beside the others).
  struct counter {
    counter() = default;
    counter(const counter& o) : n(o.n.load()) {}
    counter& operator=(const counter& o) {
      n = o.n.load();
      return *this;
    }
    std::atomic<size_t> n{0};
  };
  mutable counter reads_;
};

// The statistics of the indexed runs (a baseline that has no runs is dropped with a warning
// rather than failing the whole report).
result<stats::summary> summarize_runs(const run_index& runs, std::optional<std::string> baseline);

// The renderers write to a stream as they go: one record of the index is in memory at a time.
status write_markdown(std::ostream& out, const stats::summary& s, const run_index& runs,
                      const std::string& suite_name);
status write_junit(std::ostream& out, const run_index& runs, const std::string& suite_name);

std::string render_markdown(const stats::summary& s, const std::vector<json>& records,
                            const std::string& suite_name);
std::string render_junit(const std::vector<json>& records, const std::string& suite_name);
std::string render_terminal_summary(const stats::summary& s);

// What report.html embeds of each run's files, so that a report of 10,000 runs stays small
// enough for a browser: each file is cut at `per_file_bytes` (at a line boundary for
// transcripts, a UTF-8 boundary otherwise) with a marker naming the file, and once
// `total_bytes` have been embedded the rest are replaced by the marker alone.
struct html_options {
  size_t per_file_bytes = 16 * 1024;
  size_t total_bytes = 48u << 20;
  size_t runs_per_page = 100;  // rows of the run table the inline script renders at a time
  // Where a run's files are read from, if not `results_dir`/runs/<id> (a merge renders its
  // report while the run directories are still being brought in: it reads the shards' own).
  // An empty path: the run has no directory.
  std::function<std::filesystem::path(const std::string& run_id)> run_dir;
};

// report.html: one self-contained file. `results_dir` is read for runs/<id>/workspace.diff and
// runs/<id>/transcript.jsonl (missing files are shown as missing, not as errors; symbolic links
// are not followed, and are shown as unreadable).
status write_html(std::ostream& out, const stats::summary& s, const run_index& runs,
                  const std::string& suite_name, const std::filesystem::path& results_dir,
                  const html_options& options = {});
std::string render_html(const stats::summary& s, const std::vector<json>& records,
                        const std::string& suite_name, const std::filesystem::path& results_dir,
                        const html_options& options = {});

// The statistics of `records` (a baseline that has no runs is dropped with a warning rather
// than failing the whole report).
result<stats::summary> summarize_records(const std::vector<json>& records,
                                         std::optional<std::string> baseline);

// Writes the given reports into `dir` (atomically, each, streamed into a temporary file that
// replaces the old one), from the indexed runs.
result<stats::summary> write_reports(const std::filesystem::path& dir, const run_index& runs,
                                     const std::string& suite_name,
                                     std::optional<std::string> baseline,
                                     std::span<const report_format> formats = all_report_formats);

// The same with the summary already made (e.g. a partial merge's, which says what is missing),
// and report.html's options.
status write_reports(const std::filesystem::path& dir, const stats::summary& s,
                     const run_index& runs, const std::string& suite_name,
                     std::span<const report_format> formats = all_report_formats,
                     const html_options& html = {});

// The same from records in memory, of which latest_records(records) are reported.
result<stats::summary> write_reports(const std::filesystem::path& dir,
                                     const std::vector<json>& records,
                                     const std::string& suite_name,
                                     std::optional<std::string> baseline,
                                     std::span<const report_format> formats = all_report_formats);

// Shared by the renderers.
namespace report_text {
std::string percent(std::optional<double> v);                    // "62.5%" or "n/a"
std::string interval(const std::optional<stats::interval>& ci);  // "[48.1, 74.9]" or "n/a"
std::string cost(const stats::cost_total& c);      // "unknown", "$1.20", "≥ $1.20 (3 unknown)"
std::string error_message_of(const json& record);  // why a run is an error
// Which gradings the verdicts come from, when that is worth saying (some were graded again,
// more than one grading, an older grading shown): one sentence, else "".
std::string grading_note(const stats::summary& s);
std::string failed_check_ids(const run_detail& run);  // "a, b": the checks the run failed
bool passed(const json& check);  // a check's "passed" is true (any other value: not passed)
// JSON that can sit inside an HTML <script> block: j.dump() (bytes that are not UTF-8 replaced)
// with "<", ">", "&", U+2028 and U+2029 escaped, so that "</script>" or "<!--" in a diff cannot
// end the block.
std::string script_json(const json& j);
// script_json(json(s)) appended to `out`, without building the JSON value.
void append_script_string(std::string& out, std::string_view s);
}  // namespace report_text

}  // namespace report
}  // namespace evalbox::harness
