// Report writers: summary.json, report.md, report.html and junit.xml, computed from the records
// of results.jsonl alone (so merged shard results report exactly like one process's), and the
// short terminal summary `evalbox run` ends with. docs/report.md describes every report.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "harness/report/stats.h"
#include "sandbox/base/error.h"
#include "sandbox/base/json.h"

namespace evalbox::harness {

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

// The suite named by the records (the first record's "suite"), or `fallback` when none says.
std::string suite_name_of(const std::vector<json>& records, std::string fallback);

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
};

// report.html: one self-contained file. `results_dir` is read for runs/<id>/workspace.diff and
// runs/<id>/transcript.jsonl (missing files are shown as missing, not as errors).
std::string render_html(const stats::summary& s, const std::vector<json>& records,
                        const std::string& suite_name, const std::filesystem::path& results_dir,
                        const html_options& options = {});

// The statistics of `records` (a baseline that has no runs is dropped with a warning rather
// than failing the whole report).
result<stats::summary> summarize_records(const std::vector<json>& records,
                                         std::optional<std::string> baseline);

// Writes the given reports into `dir` (atomically, each), from latest_records(records).
result<stats::summary> write_reports(const std::filesystem::path& dir,
                                     const std::vector<json>& records,
                                     const std::string& suite_name,
                                     std::optional<std::string> baseline,
                                     std::span<const report_format> formats);

// Writes every report into `dir`.
inline result<stats::summary> write_reports(const std::filesystem::path& dir,
                                            const std::vector<json>& records,
                                            const std::string& suite_name,
                                            std::optional<std::string> baseline) {
  return write_reports(dir, records, suite_name, std::move(baseline), all_report_formats);
}

// Shared by the renderers.
namespace report_text {
std::string percent(std::optional<double> v);                    // "62.5%" or "n/a"
std::string interval(const std::optional<stats::interval>& ci);  // "[48.1, 74.9]" or "n/a"
std::string cost(const stats::cost_total& c);       // "unknown", "$1.20", "≥ $1.20 (3 unknown)"
std::string count(const std::optional<double>& v);  // "1234" or "unknown"
std::string error_message_of(const json& record);   // why a run is an error
}  // namespace report_text

}  // namespace evalbox::harness
