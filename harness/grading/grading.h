// Grading: evaluates a fixture's checks against what the agent left behind and computes the
// verdict. file, git and transcript checks are evaluated here, reading the workspace views
// with lookup_beneath (symlinks never lead out of the tree); shell checks are delegated to a
// callback that runs them in a fresh sandbox (the runner provides it).
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/json_fwd.h"
#include "harness/config/spec.h"
#include "harness/grading/test_report.h"
#include "harness/judge/answer.h"
#include "harness/judge/prompt.h"
#include "harness/transcripts/transcript.h"

namespace evalbox::harness {
inline namespace grading {

struct check_result {
  std::string id;
  check_kind kind = check_kind::shell;
  double weight = 1;
  bool passed = false;
  std::string detail;  // why it failed (or what it saw), one line
  // Partial credit in 0..1 (a Harbor verifier's reward, a tests check's tests_grade::score):
  // counts instead of passed's 0 or 1.
  std::optional<double> score;
  std::map<std::string, double> rewards;  // a verifier's numbers, as it wrote them
  // Set when the check could not be evaluated (a shell check's sandbox failed, an evaluator
  // threw): the run's grading is then an error, not a failed check.
  std::string error;
  std::optional<tests_grade> tests;  // tests checks: each listed test's status
  std::string patch;                 // tests checks: "applied", "failed" or "none" (no patch)
  // judge checks: the record (judge, model, nonce, every vote's raw answer, tally, reasons,
  // usage) and the tokens its requests used.
  json judge = nullptr;
  usage judge_tokens;
  std::string judge_model;
  int judge_requests = 0;
};

// What a shell check's sandbox did: passed on exit 0. An infrastructure failure is an error
// of the callback (result<> unexpected), which makes grading status "error".
struct shell_check_outcome {
  bool exited = true;
  int exit_code = 0;
  std::string outcome;  // "exited", "timed_out", ...
  std::string output;   // the tail of its stdout+stderr
};

using shell_check_runner = std::function<result<shell_check_outcome>(const check_spec&)>;

// What a Harbor task's verifier (tests/test.sh) reported: its reward file's numbers. A verifier
// that wrote no reward, an unreadable one or timed out is an error of the callback (a grader
// error, not a failed task).
struct verifier_outcome {
  std::map<std::string, double> rewards;  // reward.txt: {"reward": x}; reward.json: as named
  std::string source;                     // "reward.txt" or "reward.json"
};

using verifier_runner = std::function<result<verifier_outcome>(const check_spec&)>;

// A verifier's reward from the files it left in /logs/verifier (nullopt: the file is not there):
// reward.txt holds one number; else reward.json is an object of numbers (`{"reward": 0.75}`, or
// several named ones). Neither, an empty object, or anything that does not parse is an error
// saying what was found.
result<verifier_outcome> read_reward(const std::optional<std::string>& reward_txt,
                                     const std::optional<std::string>& reward_json);

// The reward a run is judged by: `reward` when the verifier named one, else the mean of the
// numbers it wrote. Requires a non-empty map.
double run_reward(const std::map<std::string, double>& rewards);
// What a tests check's sandbox produced: whether the patch applied, and the report's text
// (the command's output for pytest, the XML file for junit), read bounded by the runner.
// An infrastructure failure is an error of the callback, as for shell checks.
struct tests_check_outcome {
  bool patch_applied = true;  // true also when the check has no patch
  std::string patch_output;   // git apply's output's tail when it did not apply
  bool exited = true;
  int exit_code = 0;
  std::string outcome;       // "exited", "timed_out", ...
  std::string report;        // the report's text
  std::string report_error;  // the report could not be read (absent, too large): why
};

using tests_check_runner = std::function<result<tests_check_outcome>(const check_spec&)>;

// Sends one prompt to a judge and returns its answer (harness/judge/client.h: ask_judge). An
// error (the judge could not be reached, kept failing) is a grader error.
using judge_asker = std::function<result<judge_exchange>(const judge_spec&, const judge_prompt&)>;

struct grading_inputs {
  const fixture_spec& fixture;
  const transcript& run_transcript;  // what the agent did
  std::filesystem::path before;      // the workspace as it was after setup (read-only view)
  std::filesystem::path after;       // the workspace as the agent left it (read-only view)
  shell_check_runner run_shell;
  verifier_runner run_verifier = {};  // Harbor tasks only
  tests_check_runner run_tests = {};
  // Judge checks: the suite's judges and prices (null: none), the asker, and the workspace's
  // diff as the runner wrote it (bounded again per piece of evidence).
  const std::map<std::string, judge_spec>* judges = nullptr;
  judge_asker ask_judge = {};
  std::string diff;
  const std::map<std::string, price_spec>* prices = nullptr;
  // A test hook, never for real runs (docs/reliability.md): "check-throw:<id>" makes
  // evaluating check <id> throw, as a bug in an evaluator would; "": no fault. The runner passes
  // runner_options::grading_fault, which the binary reads from EVALBOX_FAULT.
  std::string fault;
};

struct grading_result {
  bool ok = true;  // false: a grader failed (status "error"), verdict not_assessed
  std::string error;
  std::vector<check_result> checks;
  double score = 0;     // weighted share of passing checks
  bool passed = false;  // score >= threshold (and ok)
  // Harbor tasks: what the verifier reported and the reward the run is judged by.
  std::map<std::string, double> rewards;
  std::optional<double> reward;
  // Judge checks: the judge's own usage and cost, kept apart from the candidate's. Cost is
  // priced per check from the suite's prices by the judge's model; unknown (null) when any
  // judge check's tokens or price are.
  bool judged = false;
  usage judge_tokens;
  std::optional<double> judge_cost_usd;
  int judge_requests = 0;

  [[nodiscard]] json to_json(double threshold) const;
  // run.json's judge_usage: {input_tokens, output_tokens, cached_input_tokens,
  // reasoning_tokens, cost_usd, cost_source, requests, models}; null when nothing was judged.
  [[nodiscard]] json judge_usage_json() const;
};

// Every check, each evaluated on its own: an error or exception in one makes the result's
// status "error" with its message (ok false) and grading goes on with the next.
grading_result grade(const grading_inputs& in);

// Individual evaluators, exposed for tests.
check_result evaluate_file_check(const check_spec& c, const std::filesystem::path& after);
check_result evaluate_git_check(const check_spec& c, const std::filesystem::path& before,
                                const std::filesystem::path& after);
check_result evaluate_transcript_check(const check_spec& c, const transcript& t);
check_result evaluate_tests_check(const check_spec& c, const tests_check_outcome& out);
// The evidence a judge check asks for, each piece bounded by the judge's max_evidence_bytes.
std::vector<evidence_item> gather_evidence(const judge_check& j, const grading_inputs& in,
                                           size_t max_bytes);
check_result evaluate_judge_check(const check_spec& c, const grading_inputs& in);

}  // namespace grading
}  // namespace evalbox::harness
