// How one run ended, as its record (evalbox.run.v1, docs/results.md) says: the one reading of a
// record's execution, grading and verdict fields, for every command and library that acts on
// how runs ended (the exit status of a run, the trust of a fixture, a shell session's verdict).
// Records come from disk and other versions: a field that is missing or of another type reads
// as absent, never as an error and never as a pass.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/json_fwd.h"

namespace evalbox::harness {
inline namespace results {

// How a recorded run ended, in the order a summary of many runs ranks them (an execution
// error outweighs a grader error, which outweighs a failed task).
enum class run_ending {
  passed,           // graded, every check passed
  task_failed,      // graded, and the verdict is not a pass
  grader_error,     // carried out, but could not be graded
  execution_error,  // could not be carried out (the agent or the host failed)
};

std::string_view to_string(run_ending e) noexcept;

struct recorded_check {
  std::string id;
  bool passed = false;
  std::string detail;
};

struct recorded_run {
  std::string run_id;
  std::string fixture_id;
  std::string candidate_id;
  int trial = 0;
  // As recorded: "passed", "failed", "not_assessed", or "" when the record has none.
  std::string verdict;
  run_ending ending = run_ending::task_failed;
  // Why it could not be carried out or graded: the execution's error, else the grading's
  // ("" when neither says).
  std::string error;
  std::vector<recorded_check> checks;

  // Graded and judged, pass or fail: neither error status, and a verdict other than
  // not_assessed.
  [[nodiscard]] bool assessed() const noexcept;
};

// The run a record describes. Never fails: see the top of this file.
recorded_run read_recorded_run(const json& record);

// The worst of the endings seen, for the exit status of a set of runs: execution errors first,
// then grader errors, then failed tasks.
struct ending_tally {
  bool execution_error = false;
  bool grader_error = false;
  bool task_failed = false;

  void add(run_ending e) noexcept;
  [[nodiscard]] run_ending worst() const noexcept;
};

}  // namespace results
}  // namespace evalbox::harness
