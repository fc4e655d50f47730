// The runner: executes a planned run matrix with N workers. Each run: prepare → setup →
// agent (and follow-up) → transcript → snapshot and diff → grading in fresh sandboxes →
// result recorded (fsynced) → teardown. Resumable (recorded runs are skipped), retries
// infrastructure errors, never runs two sessions on one credential lease at once, and stops
// cleanly when asked (running sandboxes are killed, unfinished runs are not recorded).
//
// Parts: runner.cpp (the workers), scheduler.h (which run starts when, and its attempts),
// execute.h (one attempt as named phases), run_json.h (the run.json record).
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "harness/agent/adapter.h"
#include "harness/config/spec.h"
#include "harness/plan/plan.h"
#include "sandbox/base/error.h"
#include "sandbox/launch/launcher.h"
#include "sandbox/preparer/preparer.h"

namespace evalbox::harness {

struct progress {
  int total = 0;  // runs in this invocation (excluding already recorded ones)
  int done = 0;
  int passed = 0;
  int failed = 0;
  int errors = 0;  // execution or grader errors
  double elapsed_s = 0;
  std::string last;  // "fixture/candidate#trial: verdict"
};

struct runner_options {
  std::filesystem::path results_dir;
  int concurrency = 1;
  int retries = 0;  // extra attempts for infrastructure errors, with backoff
  bool resume = true;
  sandbox::preparer_options sandbox;
  // Never visible to agents besides the results dir and graders (e.g. the host home).
  std::vector<std::filesystem::path> protected_roots;
  // Set from a signal-handling thread: stop scheduling, kill running sandboxes.
  sandbox::cancel_token* cancel = nullptr;
  std::function<void(const progress&)> on_progress;
};

struct run_totals {
  int planned = 0;
  int skipped = 0;  // already recorded (resume)
  int passed = 0;
  int failed = 0;
  int execution_errors = 0;
  int grader_errors = 0;
};

result<run_totals> run_suite(const suite_spec& suite, const std::vector<run_spec>& runs,
                             const adapter_registry& adapters, const runner_options& options);

// The environment every launch starts from (PATH with /evalbox/bin first, HOME, TMPDIR, ...).
std::map<std::string, std::string> base_environment();

}  // namespace evalbox::harness
