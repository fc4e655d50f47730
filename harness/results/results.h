// The results directory: runs/<run_id>/{run.json, transcript.jsonl, native/, workspace.diff},
// results.jsonl (one line per finished run, appended and fsynced), and the reports written
// from results.jsonl alone (summary.json, report.md, junit.xml). docs/results.md documents the
// evalbox.run.v1 record every line of results.jsonl carries.
#pragma once

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "sandbox/base/error.h"
#include "sandbox/base/json.h"

namespace evalbox::harness {

inline constexpr std::string_view run_schema = "evalbox.run.v1";

class results_dir {
 public:
  explicit results_dir(std::filesystem::path root) : root_(std::move(root)) {}
  [[nodiscard]] const std::filesystem::path& root() const noexcept { return root_; }
  [[nodiscard]] std::filesystem::path run_dir(const std::string& run_id) const;
  [[nodiscard]] std::filesystem::path results_file() const { return root_ / "results.jsonl"; }

  status create() const;
  // Every complete record in results.jsonl (a torn last line from a crash is skipped).
  [[nodiscard]] result<std::vector<json>> read_records() const;
  // Run ids already recorded (for resume).
  [[nodiscard]] result<std::set<std::string>> recorded_ids() const;
  // Writes runs/<id>/run.json atomically, then appends the record to results.jsonl (fsynced).
  status record(const json& run) const;

 private:
  std::filesystem::path root_;
};

}  // namespace evalbox::harness
