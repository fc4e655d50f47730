// Reading how a run ended from its record (see record.h).
#include "harness/results/record.h"

#include "base/json.h"
#include "base/json_get.h"

namespace evalbox::harness {
inline namespace results {

std::string_view to_string(run_ending e) noexcept {
  switch (e) {
    case run_ending::passed:
      return "passed";
    case run_ending::task_failed:
      return "task_failed";
    case run_ending::grader_error:
      return "grader_error";
    case run_ending::execution_error:
      return "execution_error";
  }
  return "task_failed";
}

bool recorded_run::assessed() const noexcept {
  return (ending == run_ending::passed || ending == run_ending::task_failed) &&
         verdict != "not_assessed";
}

recorded_run read_recorded_run(const json& record) {
  recorded_run r;
  r.run_id = json_value_or(record, "run_id", "");
  r.fixture_id = json_value_or(json_member(record, "fixture"), "id", "");
  r.candidate_id = json_value_or(json_member(record, "candidate"), "id", "");
  r.trial = json_value_or(record, "trial", 0);
  r.verdict = json_value_or(record, "verdict", "");
  const json& execution = json_member(record, "execution");
  const json& grading = json_member(record, "grading");
  if (json_value_or(execution, "status", "") == "error")
    r.ending = run_ending::execution_error;
  else if (json_value_or(grading, "status", "") == "error")
    r.ending = run_ending::grader_error;
  else if (r.verdict == "passed")
    r.ending = run_ending::passed;
  else
    r.ending = run_ending::task_failed;
  r.error = json_value_or(execution, "error", "");
  if (r.error.empty()) r.error = json_value_or(grading, "error", "");
  const json& checks = json_member(grading, "checks");
  if (checks.is_array()) {
    r.checks.reserve(checks.size());
    for (const auto& c : checks)
      r.checks.push_back({json_value_or(c, "id", ""), json_value_or(c, "passed", false),
                          json_value_or(c, "detail", "")});
  }
  return r;
}

void ending_tally::add(run_ending e) noexcept {
  execution_error |= e == run_ending::execution_error;
  grader_error |= e == run_ending::grader_error;
  task_failed |= e == run_ending::task_failed;
}

run_ending ending_tally::worst() const noexcept {
  if (execution_error) return run_ending::execution_error;
  if (grader_error) return run_ending::grader_error;
  if (task_failed) return run_ending::task_failed;
  return run_ending::passed;
}

}  // namespace results
}  // namespace evalbox::harness
