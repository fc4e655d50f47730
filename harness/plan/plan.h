// The run matrix: fixtures × candidates × trials, each with a deterministic run id, so a rerun
// finds what is already recorded (resume) and N shards split the same matrix the same way.
#pragma once

#include <string>
#include <vector>

#include "base/error.h"
#include "harness/config/spec.h"

namespace evalbox::harness {
inline namespace plan {

struct run_spec {
  size_t fixture = 0;    // index into suite_spec::fixtures
  size_t candidate = 0;  // index into suite_spec::candidates
  int trial = 0;         // 0-based
  // 16 hex digits of sha256(fixture digest, candidate digest, trial[, the suite's environment])
  std::string run_id;
  std::string candidate_digest;  // candidate_digest() of the candidate, as run.json records it
};

struct plan_options {
  int trials = 0;       // 0: the suite's
  std::string filter;   // glob over "fixture/candidate" ("*" and "?"), empty = all
  int shard_index = 0;  // K of K/N (0-based)
  int shard_count = 1;
};

// The digest of everything that defines a candidate: its settings, env, network, and the
// content of its home files. A changed candidate gets new run ids.
result<std::string> candidate_digest(const candidate_spec& c);

// A fixture's own environment is part of its digest (fixture.yaml); the suite's default is not,
// so it joins the run id as written ("IMAGE\nWORKDIR"; not resolved: the ids must not depend on
// where the tree lies). A registry image (docker://) always joins it, pinned to its digest
// ("registry\ndocker://NAME@sha256:…\nWORKDIR"): the bytes, not the tag. Empty when the
// fixture has no environment or its own (of files).
std::string suite_environment_key(const fixture_spec& fixture);

// The run id of `trial` of a candidate on a fixture: 16 hex digits of SHA-256 over the
// fixture's tree digest, the candidate's digest, the trial and the suite's environment for it
// (docs/results.md).
std::string run_id_of(std::string_view fixture_digest, std::string_view candidate_digest, int trial,
                      std::string_view suite_environment = {});

// Runs in a stable order (fixture, candidate, trial). The shard of a run is its index in the
// whole matrix (filtered-out runs included) modulo N, so shards do not depend on the filter's
// effect on other runs' positions.
result<std::vector<run_spec>> plan_runs(const suite_spec& suite, const plan_options& options);

// Shell-style glob: '*' any run of characters (including '/'), '?' one character.
bool glob_match(std::string_view pattern, std::string_view text);

}  // namespace plan
}  // namespace evalbox::harness
