// One attempt at one run, as the ordered phases the runner takes it through:
//
//   plan     the adapter turns the fixture and candidate into an agent plan
//   request  the plan becomes a sandbox session request (make_session_request)
//   prepare  the preparer materializes the session (workspace, home, leases, cgroup)
//   setup    the fixture's setup commands, in the session, without credentials or network
//   agent    the agent's launch, and its follow-up when the fixture has one
//   record   the normalized transcript (transcript.jsonl) and usage; the agent's own errors
//   diff     what the agent changed, as workspace.diff (never fails the run)
//   grade    the fixture's checks, shell checks in fresh sandboxes with /grader mounted
//
// The result is a run_state (run_json.h); the worker (runner.cpp) writes it as run.json and
// only then tears the session down. Internal to harness/runner; public for its tests.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "harness/agent/adapter.h"
#include "harness/config/spec.h"
#include "harness/plan/plan.h"
#include "harness/results/results.h"
#include "harness/runner/run_json.h"
#include "harness/runner/runner.h"
#include "sandbox/base/error.h"
#include "sandbox/preparer/preparer.h"
#include "sandbox/spec/request.h"

namespace evalbox::harness {

// What the session request of one attempt is made from.
struct request_inputs {
  const fixture_spec& fixture;
  const candidate_spec& candidate;
  const agent_plan& plan;
  const limits_spec& suite_limits;  // the suite's defaults, under the fixture's own
  std::string session_id;           // names the run directory and cgroups (host-wide)
  // Never visible to the agent: the options' roots and the results root.
  std::vector<std::filesystem::path> protected_roots;
  std::string bin_digest;  // tree digest of the fixture's bin/, when it has one
};

// The phase "request": the plan's argv, environment (the base environment, then the plan's,
// then the candidate's), home (with the candidate's home_files read in), leases, bundles
// (the fixture's bin/ at /evalbox/bin), limits and network, and the roots the agent must never
// see — the grader files always, the fixture's solution unless the plan runs it. An error
// when a home file cannot be read.
result<sandbox::session_request> make_session_request(const request_inputs& in);

// Until when the preparer accepts the request: an hour plus four times the wall limit from
// now, room for the setup, agent, follow-up and grading launches of one attempt.
std::chrono::system_clock::time_point authorized_until(const sandbox::resource_limits& limits);

// What every attempt of a suite shares.
struct execution_context {
  const suite_spec& suite;
  const adapter_registry& adapters;
  const runner_options& options;
  sandbox::preparer& preparer;
  const results_dir& results;
  const std::vector<std::string>& bin_digests;  // per fixture; empty without bin/
};

// Runs attempt number `attempt` (0-based) of `r` through the phases above. The prepared
// session is left in `session` (when preparation got that far) so that the caller records the
// result before the sandbox is torn down.
run_state execute_attempt(const execution_context& x, const run_spec& r, int attempt,
                          std::optional<sandbox::prepared_session>& session);

}  // namespace evalbox::harness
