// Grading: evaluates a fixture's checks against what the agent left behind and computes the
// verdict. file, git and transcript checks are evaluated here, reading the workspace views
// with lookup_beneath (symlinks never lead out of the tree); shell checks are delegated to a
// callback that runs them in a fresh sandbox (the runner provides it).
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "harness/config/spec.h"
#include "harness/transcript/transcript.h"
#include "sandbox/base/error.h"
#include "sandbox/base/json_fwd.h"

namespace evalbox::harness {

struct check_result {
  std::string id;
  check_kind kind = check_kind::shell;
  double weight = 1;
  bool passed = false;
  std::string detail;  // why it failed (or what it saw), one line
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

struct grading_inputs {
  const fixture_spec& fixture;
  const transcript& transcript_;
  std::filesystem::path before;  // the workspace as it was after setup (read-only view)
  std::filesystem::path after;   // the workspace as the agent left it (read-only view)
  shell_check_runner run_shell;
};

struct grading_result {
  bool ok = true;  // false: a grader failed (status "error"), verdict not_assessed
  std::string error;
  std::vector<check_result> checks;
  double score = 0;     // weighted share of passing checks
  bool passed = false;  // score >= threshold (and ok)

  [[nodiscard]] json to_json(double threshold) const;
};

grading_result grade(const grading_inputs& in);

// Individual evaluators, exposed for tests.
check_result evaluate_file_check(const check_spec& c, const std::filesystem::path& after);
check_result evaluate_git_check(const check_spec& c, const std::filesystem::path& before,
                                const std::filesystem::path& after);
check_result evaluate_transcript_check(const check_spec& c, const transcript& t);

}  // namespace evalbox::harness
