// One attempt at one run, as the ordered phases the runner takes it through:
//
//   plan     the adapter turns the fixture and candidate into an agent plan
//   request  the plan becomes a sandbox session request (request.h)
//   prepare  the preparer materializes the session (workspace, home, leases, cgroup)
//   setup    the fixture's setup commands, in the session, without credentials or network
//   agent    the agent's launch, and its follow-up when the fixture has one
//   record   the normalized transcript (transcript.jsonl) and usage; the agent's own errors
//   diff     what the agent changed, as workspace.diff (never fails the run)
//   grade    the fixture's checks, shell checks in fresh sandboxes with /grader mounted
//
// The result is a attempt_state (run_json.h); the worker (runner.cpp) writes it as run.json and
// only then tears the session down. Internal to harness/runner; public for its tests.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "harness/agent/adapter.h"
#include "harness/config/spec.h"
#include "harness/gateway/rate_limit.h"
#include "harness/plan/plan.h"
#include "harness/results/results.h"
#include "harness/runner/request.h"
#include "harness/runner/run_json.h"
#include "harness/runner/runner.h"
#include "sandbox/prepare/preparer.h"
#include "sandbox/spec/request.h"

namespace evalbox::harness {
inline namespace runner {

// What every attempt of a suite shares.
struct execution_context {
  const suite_spec& suite;
  const adapter_registry& adapters;
  const runner_options& options;
  sandbox::preparer& preparer;
  const results_dir& results;
  const std::vector<std::string>& bin_digests;  // per fixture; empty without bin/
  // Per fixture: its environment's image, resolved once per suite; unset without one.
  const std::vector<std::optional<sandbox::image_summary>>& images;
  // Per fixture: its bundles as the bundle store holds them, verified once per suite; null
  // when no fixture has one.
  const std::vector<std::vector<sandbox::bundle>>* bundles = nullptr;
  // Per fixture: its caches as stored, warmed once per suite (caches.h); null when no fixture
  // has one.
  const std::vector<std::vector<cache_use>>* caches = nullptr;
  // Per credential handle with a requests_per_minute: the rate every run's model gateway in
  // front of it shares; null when none has one.
  const std::map<std::string, std::shared_ptr<gateway::request_rate>>* rates = nullptr;
};

// Runs attempt number `attempt` (0-based) of `r` through the phases above. The prepared
// session is left in `session` (when preparation got that far) so that the caller records the
// result before the sandbox is torn down.
attempt_state execute_attempt(const execution_context& x, const run_spec& r, int attempt,
                              std::optional<sandbox::prepared_session>& session);

// Grades run `r` again from the final state it kept (harness/results/final_state.h) with the
// fixture's current checks: a fresh session of the fixture (no setup, no agent, no credential
// lease), the kept trees written back as layers and stacked over it, the checks as in a run
// (shell, tests and verifier checks in sandboxes over that stack, the run's transcript and
// workspace.diff as they were). The grading's files go to runs/<run_id>/gradings/<digest>/.
// An execution error says why it could not: no state kept, a damaged one, the sandbox.
attempt_state regrade_attempt(const execution_context& x, const run_spec& r,
                              std::optional<sandbox::prepared_session>& session);

}  // namespace runner
}  // namespace evalbox::harness
