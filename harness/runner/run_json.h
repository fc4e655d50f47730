// run.json, the evalbox.run.v1 record (docs/results.md): how one attempt at a run ended, as
// typed state the executor fills in (attempt_state), and the record the runner writes from it.
// The states are enums everywhere else; their strings exist only here, at the JSON edge.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "base/json.h"
#include "harness/config/spec.h"
#include "harness/plan/plan.h"
#include "harness/transcripts/transcript.h"

namespace evalbox::harness {
inline namespace runner {

// Why a run could not be carried out (execution.error_kind).
enum class run_error_kind {
  setup,    // the fixture's setup commands failed
  sandbox,  // preparing or launching a sandbox failed
  host,     // the results directory (or another host resource) failed
  agent,    // the agent failed: its client's error, an upstream model failure, a signal
  adapter,  // the adapter could not plan the run or read what the agent left
};
std::string_view to_string(run_error_kind kind) noexcept;

// What the run says about the task (verdict). not_assessed: the run could not be carried out
// or graded, which is never a task failure.
enum class run_verdict { passed, failed, not_assessed };
std::string_view to_string(run_verdict verdict) noexcept;

// How one attempt at a run ended, before it becomes run.json.
struct attempt_state {
  std::optional<run_error_kind> error_kind;  // set: execution.status is "error"
  std::string error;                         // scrubbed of registered secrets
  json records = json::object();             // launch label -> its evalbox.run-record.v1
  std::string session_id;                    // the sandbox session (run dir, cgroups)
  json environment = nullptr;  // the image the run's root came from; null: the host's root
  json caches = nullptr;       // [cache_use::to_json]; null: the fixture has no caches
  json grading = nullptr;      // grading_result::to_json; null: not graded
  run_verdict verdict = run_verdict::not_assessed;
  json usage = nullptr;           // usage_json(); null when the client reported none
  json judge_usage = nullptr;     // grading_result::judge_usage_json(); null: nothing judged
  json timings = json::object();  // "<phase>_ms" -> milliseconds
  // With --keep-workspaces, for a run the policy keeps: where its final workspace is (or why
  // it is not there). null: not asked for, and run.json has no kept_workspace.
  json kept_workspace = nullptr;
  // What the run kept of its final state to be graded again (harness/results/final_state.h);
  // null: nothing (the run ended before its grading, or the state was over the cap).
  json final_state = nullptr;
  // The run's model gateway (docs/agents.md): its upstream, budget, totals and record; null for
  // a candidate without one. `budget_exhausted`: the budget it reached, when it did (the run's
  // outcome is then budget_exhausted, a task failure graded as the agent left it).
  json gateway = nullptr;
  std::optional<std::string> budget_exhausted;
  bool cancelled = false;   // stopped by a signal: recorded nowhere
  bool lease_busy = false;  // another evalbox process holds a credential lease
  bool retryable = true;    // false for a request the sandbox refused as invalid: it would again

  [[nodiscard]] bool failed() const { return error_kind.has_value(); }
  // A failure of the sandbox or host, which another attempt may not meet; an agent's or an
  // adapter's failure would happen again.
  [[nodiscard]] bool infrastructure() const;
  // Ends the attempt as an execution error of `kind`; returns *this.
  attempt_state& fail(run_error_kind kind, std::string_view message);
};

// The run's usage for run.json. Cost is what the client reported; else, when the suite has a
// price for it (suite_spec::price_for: the model the client reported, the candidate's id, its
// `model` setting) and both token counts are known, an estimate from that table; else null —
// never 0. cost_source says which.
json usage_json(const usage& u, const candidate_spec& candidate, const std::string& model,
                const suite_spec& suite);

// When and how often: what run.json records besides the state.
struct run_timing {
  int attempts = 1;
  std::string started_at;   // RFC 3339, UTC
  std::string finished_at;  // RFC 3339, UTC
  uint64_t wall_ms = 0;     // over every attempt
};

// The evalbox.run.v1 record of run `r` of `suite`.
json to_run_json(const suite_spec& suite, const run_spec& r, const attempt_state& st,
                 const run_timing& timing);

// The record of run `r` graded again (regrade_attempt ended as `st`, not failed): `old` (its
// newest record) with the new grading (and its digest), verdict and judge usage, the fixture's
// current digest, and "regraded": {"at", "previous_digest", "files" (where its check logs
// are), "grading_ms", "records" (launches of its verifier, when it has one)}.
json regraded_run_json(const suite_spec& suite, const run_spec& r, const json& old,
                       const attempt_state& st);

// Now as RFC 3339 in UTC, to the second ("2026-11-30T21:42:47Z").
std::string now_rfc3339();

}  // namespace runner
}  // namespace evalbox::harness
