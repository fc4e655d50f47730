// `evalbox compare`: the paired comparison of candidates across two results directories that
// share fixtures, or of two candidates within one, computed from results.jsonl records alone
// with the same statistics as the reports (stats::compare), and rendered as a table or JSON.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/json.h"
#include "harness/report/report.h"
#include "harness/report/stats.h"
#include "harness/results/results.h"

namespace evalbox::harness {
inline namespace report {

// Who is compared with whom, and how the result is labelled.
struct compare_settings {
  std::string baseline_label;   // "A" / the directory, for the table
  std::string candidate_label;  // "B"
  // Both set: that candidate (candidate side) against that baseline (baseline side). Only one
  // set: that candidate id on both sides. Neither: every candidate id present on both sides.
  std::optional<std::string> candidate;
  std::optional<std::string> baseline;
  stats::options options;
};

// One side of a comparison as it is computed: the outcome of the newest record of each trial
// (latest_records) and the fixture digests that every record carries.
struct compare_side {
  std::vector<stats::run_outcome> outcomes;
  std::map<std::string, std::set<std::string>> fixture_digests;  // fixture id → its digests

  static compare_side of_records(const std::vector<json>& records);
  // results.jsonl of `dir`, read one record at a time; with `grading`, the records it selects
  // only (an older grading of the runs: compare --grading).
  static result<compare_side> of_results(const results_dir& dir,
                                         const grading_selection* grading = nullptr);
};

struct compare_request : compare_settings {
  // Records of the baseline side (results A) and of the candidate side (results B); for a
  // comparison within one results directory both are the same records.
  std::vector<json> baseline_records;
  std::vector<json> candidate_records;
};

struct compare_result {
  std::string baseline_label, candidate_label;
  std::vector<stats::paired_comparison> comparisons;
  // Fixture ids whose fixture digest differs between the two sides: the "same" fixture was
  // edited between the runs, so its difference mixes the candidates' change with the fixture's.
  std::vector<std::string> changed_fixtures;
};

// Fails when a named candidate has no runs on its side, when nothing is shared, or on records
// the statistics reject (duplicate trials).
result<compare_result> compare_results(const compare_request& request);
// The same over sides already read (within one results directory, the same side twice).
result<compare_result> compare_results(const compare_side& baseline_side,
                                       const compare_side& candidate_side,
                                       const compare_settings& settings);

// A table per comparison: verdict, mean difference with its interval, the tests, and every
// shared fixture's rates and difference.
std::string render_compare_table(const compare_result& r);
// schema evalbox.compare.v1: {schema, baseline_results, candidate_results, changed_fixtures,
// comparisons}, each comparison exactly as in summary.json.
json compare_to_json(const compare_result& r);

}  // namespace report
}  // namespace evalbox::harness
