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
  // Recorded already, and to be graded again from its kept final state rather than run (the
  // runner decides: evalbox regrade, or a resume after its checks changed).
  bool regrade = false;
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
// What the candidate's skills, MCP servers and hooks hold, by content: {"skills": {NAME:
// tree digest}, "mcp_servers": {NAME: {sandbox path: digest}}, "hooks": [{event, path, sha256}]},
// each key only when the candidate has some (an empty object for none). Part of
// candidate_digest(); run.json records it (docs/results.md).
result<json> extension_digests(const candidate_spec& c);

// A fixture's own environment is part of its digest (fixture.yaml); the suite's default is not,
// so it joins the run id as written ("IMAGE\nWORKDIR"; not resolved: the ids must not depend on
// where the tree lies). A registry image (docker://) always joins it, pinned to its digest
// ("registry\ndocker://NAME@sha256:…\nWORKDIR"): the bytes, not the tag. Empty when the
// fixture has no environment or its own (of files). The suite's mounts and bundles the fixture
// gets join it too ("\nmount TARGET ACCESS MAX_BYTES SOURCE_DIGEST", "\nbundle TARGET
// DIGEST"): a changed source or bundle makes new run ids.
std::string suite_environment_key(const fixture_spec& fixture);

// The grading identity of `fixture`'s runs in `suite` (a run record's grading.digest): SHA-256
// over its checks and threshold as written, its grader files (a Harbor task's tests/ and
// verifier settings), the threshold it is judged by, and the settings of the suite's judges its
// judge checks name (never a key) — with a command judge's program's bytes. Equal digests grade
// equal final states the same way; a changed one regrades (docs/results.md).
std::string grading_digest(const fixture_spec& fixture, const suite_spec& suite);

// The run id of `trial` of a candidate on a fixture: 16 hex digits of SHA-256 over the
// fixture's task digest (fixture_spec::task_digest: without what grades it), the candidate's
// digest, the trial and the suite's environment for it (docs/results.md).
std::string run_id_of(std::string_view fixture_digest, std::string_view candidate_digest, int trial,
                      std::string_view suite_environment = {});

// The shard (of `shards`) that runs trial `t` of candidate `c` on fixture `f`, in a matrix of
// `fixtures` × `candidates` × `trials` (filtered-out runs included, so that shards do not
// depend on a filter). The matrix is cut into units — one trial of one fixture, every
// candidate's run of it — dealt round-robin (unit f·trials + t to shard unit mod N): every
// shard that holds a unit holds every candidate, a fixture's trials go to different shards,
// and a lost shard takes the same runs from every candidate, so paired comparisons of a
// partial merge keep their fixtures. With fewer units than shards, the runs themselves are
// dealt (candidate-major), so that no shard is left empty while runs remain and each shard's
// runs are of different candidates.
int shard_of(size_t f, size_t c, int t, size_t fixtures, int trials, int shards);

// Runs in a stable order (fixture, candidate, trial), those of `options`' shard (shard_of).
result<std::vector<run_spec>> plan_runs(const suite_spec& suite, const plan_options& options);

// Shell-style glob: '*' any run of characters (including '/'), '?' one character.
bool glob_match(std::string_view pattern, std::string_view text);

}  // namespace plan
}  // namespace evalbox::harness
