// Report writers: summary.json, report.md and junit.xml, computed from the records of
// results.jsonl alone (so merged shard results report exactly like one process's), and the
// short terminal summary `evalbox run` ends with.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "harness/report/stats.h"
#include "sandbox/base/error.h"
#include "sandbox/base/json.h"

namespace evalbox::harness {

// The statistics' view of evalbox.run.v1 records.
std::vector<stats::run_outcome> outcomes_from_records(const std::vector<json>& records);

std::string render_markdown(const stats::summary& s, const std::vector<json>& records,
                            const std::string& suite_name);
std::string render_junit(const std::vector<json>& records, const std::string& suite_name);
std::string render_terminal_summary(const stats::summary& s);

// Writes summary.json, report.md and junit.xml into `dir` (atomically, each).
result<stats::summary> write_reports(const std::filesystem::path& dir,
                                     const std::vector<json>& records,
                                     const std::string& suite_name,
                                     std::optional<std::string> baseline);

}  // namespace evalbox::harness
