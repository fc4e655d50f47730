// The runner: executes a planned run matrix with N workers. Each run: prepare → setup →
// agent (and follow-up) → transcript → snapshot and diff → grading in fresh sandboxes →
// result recorded (fsynced) → teardown. Resumable (recorded runs are skipped), retries
// infrastructure errors, never runs more sessions on a credential than its max_concurrent
// (one, for a login) at once, records how long each run waited for its credentials, and stops
// cleanly when asked (running sandboxes are killed, unfinished runs are not recorded).
//
// Parts: runner.cpp (the workers), scheduler.h (which run starts when, and its attempts),
// execute.h (one attempt as named phases), run_json.h (the run.json record).
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "harness/agent/adapter.h"
#include "harness/config/spec.h"
#include "harness/gateway/model_cache.h"
#include "harness/plan/plan.h"
#include "harness/results/final_state.h"
#include "harness/runner/caches.h"
#include "harness/runner/keep_workspace.h"
#include "sandbox/launch/launcher.h"
#include "sandbox/live/stack.h"
#include "sandbox/prepare/preparer.h"

namespace evalbox::harness {
inline namespace runner {

struct execution_context;  // execute.h
struct attempt_state;      // run_json.h

// One attempt at a run (execute.h's execute_attempt). Tests put attempts that need no sandbox
// in its place, to drive the runner's scheduling, retries, records and tally without root.
using attempt_function = std::function<attempt_state(const execution_context&, const run_spec&, int,
                                                     std::optional<sandbox::prepared_session>&)>;

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
  // Never visible to agents besides the results dir and graders; run_suite adds the host
  // user's home (protected_roots_for).
  std::vector<std::filesystem::path> protected_roots;
  bool protect_host_home = true;
  // Set from a signal-handling thread: stop scheduling, kill running sandboxes.
  sandbox::cancel_token* cancel = nullptr;
  std::function<void(const progress&)> on_progress;
  // Lines worth saying while nothing else moves (an image unpacked on its first use); unset:
  // logged at level info.
  std::function<void(const std::string&)> on_notice;
  // Which runs keep their final workspace under runs/<run_id>/workspace (keep_workspace.h),
  // each at most keep_workspace_bytes of files.
  keep_policy keep_workspaces = keep_policy::none;
  uint64_t keep_workspace_bytes = default_keep_bytes;
  // Every graded run keeps its final state for `evalbox regrade` (harness/results/
  // final_state.h), up to this many bytes of files; 0: none is kept.
  uint64_t final_state_bytes = default_final_state_bytes;
  // --model-cache: every gateway run answers from, and records into, this directory
  // (harness/gateway/model_cache.h), as the mode says; empty: none.
  std::filesystem::path model_cache_dir;
  gateway::cache_mode model_cache_mode = gateway::cache_mode::replay_or_record;
  // A recorded run whose grading is not its fixture's current one (grading_digest: a check,
  // a grader file or a judge changed) is graded again from its kept final state on resume
  // (regrade_attempt), not kept as it was and not run again. `regrade_all`: every recorded run
  // is. `regrade_only` (evalbox regrade): runs not yet recorded are not started.
  bool regrade_all = false;
  bool regrade_only = false;
  // Set for a person's session instead of an agent (`evalbox fixture shell`, `evalbox runs
  // shell`): the agent's launch — the candidate's home, leases, environment, limits and
  // network, after the setup — is this launch of a shell at the caller's terminal; no
  // transcript is read; the diff and the grading follow as for any run.
  std::function<result<sandbox::run_record>(const sandbox::prepared_session&,
                                            sandbox::launch_options)>
      interactive;
  bool interactive_grader = false;  // the grader at /grader (read-only) in that launch too
  // With `interactive`: given, before it is called, what grades a state of the run's sandbox as
  // the run's own grading would (a session's `grade`, harness/session) — shell, tests and
  // verifier checks in sandboxes over `stack` with uppers of their own, file and git checks on
  // its workspace (a read-only view of the stack), transcript checks on the commands in
  // `commands` (a session's transcript.jsonl). It returns the grading (run.json's) with the
  // verdict, and lives as long as the call of `interactive`.
  using state_grader = std::function<result<json>(const sandbox::layer_stack& stack,
                                                  const std::filesystem::path& commands)>;
  std::function<void(state_grader)> on_state_grader;
  // The workspace every run starts from instead of its fixture's (evalbox runs shell: a copy
  // of a kept workspace; the directory itself is never written).
  std::filesystem::path workspace_override;
  // A test hook, never for real runs (docs/reliability.md): "check-throw:<id>" makes grading
  // check <id> throw, as a bug in an evaluator would (grading_inputs::fault). The binary sets it
  // from EVALBOX_FAULT, for the end-to-end tests.
  std::string grading_fault;
  attempt_function attempt;  // unset: execute_attempt
};

struct run_totals {
  int planned = 0;
  int skipped = 0;  // already recorded (resume)
  int passed = 0;
  int failed = 0;
  int execution_errors = 0;
  int grader_errors = 0;
  int regraded = 0;          // of the counts above, graded again from a kept state
  int verdicts_changed = 0;  // of those, how many verdicts the new grading changed
  int regrade_errors = 0;    // could not be graded again (the error is logged): kept as they were
  // Recorded under another grading but without a kept state (older results, over the cap):
  // their verdicts stay the old grading's. Their ids, for the caller to name.
  std::vector<std::string> stale;
  int not_run = 0;  // regrade_only: planned runs the results do not hold
  // The suite's suite_budget was reached (in words): `budget_unstarted` planned runs were not
  // started; a later `evalbox run` resumes them.
  std::optional<std::string> suite_budget_spent;
  int budget_unstarted = 0;
};

result<run_totals> run_suite(const suite_spec& suite, const std::vector<run_spec>& runs,
                             const adapter_registry& adapters, const runner_options& options);

// Each fixture's image (suite.fixtures' order) for the fixtures `used` says true of, resolved
// once per reference — imported when the store lacks it (minutes for a large one: said through
// `say`, stopped by `cancel` with no partial layer kept) or only checked; nothing for the other
// fixtures and for those on the host's root. An image that cannot be resolved is an error that
// names the fixture and where its image is written.
result<std::vector<std::optional<sandbox::image_summary>>> resolve_fixture_images(
    const suite_spec& suite, const std::vector<bool>& used, sandbox::preparer& preparer,
    const std::atomic<bool>* cancel, const std::function<void(const std::string&)>& say);

// `evalbox cache warm`: the caches named `only` (every cache when empty) of the fixtures that
// name one, in their images, warmed where the store lacks them (all of them again with
// `force`), with the protected roots a run of the suite would have (options' results_dir,
// sandbox, cancel and on_notice are used). An `only` name that neither a fixture nor the suite
// declares is a not_found error listing the names declared; a suite that declares none warms
// nothing.
result<suite_caches> warm_suite(const suite_spec& suite, const runner_options& options,
                                const std::set<std::string>& only, bool force);

// The roots no session of the suite may see, besides the results directory and the graders:
// `options.protected_roots` and `host_home` (when protect_host_home), less every root that holds
// the results directory, the suite file, a fixture or the workspace override — a home that
// holds them cannot be protected wholesale.
std::vector<std::filesystem::path> protected_roots_for(
    const suite_spec& suite, const runner_options& options,
    const std::optional<std::filesystem::path>& host_home);

// The invoking user's home: $HOME, unless it is unset, empty or "/".
std::optional<std::filesystem::path> host_home();

// The environment every launch starts from (PATH with /evalbox/bin first, HOME, TMPDIR, ...).
std::map<std::string, std::string> base_environment();

}  // namespace runner
}  // namespace evalbox::harness
