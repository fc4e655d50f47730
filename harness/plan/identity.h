// A plan's identity (plan.json, schema evalbox.plan.v1): what a results directory was planned
// from — the suite file's digest, every fixture and candidate with its digest, trials, filter,
// baseline — and which shard of it the directory holds. `evalbox run` writes it before the
// first run; `evalbox merge` joins only directories of one plan and, from the identity alone
// (no suite file needed), knows every run the plan has, so it can name the missing ones.
// docs/results.md documents the file.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/json.h"
#include "harness/config/spec.h"
#include "harness/plan/plan.h"

namespace evalbox::harness {
inline namespace plan {

inline constexpr std::string_view plan_schema = "evalbox.plan.v1";
inline constexpr std::string_view plan_file_name = "plan.json";

struct plan_identity {
  struct fixture_ref {
    std::string id;
    std::string digest;       // the fixture's task digest (fixture_spec::task_digest)
    std::string environment;  // suite_environment_key(): the suite's environment for it, or ""
  };
  struct candidate_ref {
    std::string id;
    std::string adapter;
    std::string digest;  // candidate_digest()
  };

  std::string suite;         // the suite's name
  std::string suite_digest;  // SHA-256 of the suite file's bytes
  // Where the suite file was when the plan was made (absolute; not part of the identity):
  // where `evalbox regrade` finds the suite when it is not given. Empty in older files.
  std::string suite_file;
  std::vector<fixture_ref> fixtures;      // in the suite's order
  std::vector<candidate_ref> candidates;  // in the suite's order
  int trials = 1;
  std::string filter;  // empty: every fixture/candidate
  std::optional<std::string> baseline;
  int shard_index = 0;  // K of K/N
  int shard_count = 1;  // N
  // In a directory written by `evalbox merge`: the shards (K of N) merged into it, sorted.
  // Empty in a directory `evalbox run` wrote.
  std::vector<int> merged;

  // SHA-256 over everything but the shard and `merged`: what every shard of one plan shares.
  [[nodiscard]] std::string matrix_digest() const;
};

// The identity of planning `suite` with `options` (which name the shard).
result<plan_identity> identify_plan(const suite_spec& suite, const plan_options& options);

json to_json(const plan_identity& plan);
// Validates the schema and every field; `where` names the file in messages.
result<plan_identity> plan_from_json(const json& j, std::string_view where);

// DIR/plan.json, read and validated; a not_found error when there is none.
result<plan_identity> read_plan(const std::filesystem::path& results_dir);
// Writes DIR/plan.json atomically.
status write_plan(const std::filesystem::path& results_dir, const plan_identity& plan);

// Before `evalbox run` writes into `results_dir`: refuses a directory that holds another shard
// of a plan or a merge (each shard has a directory of its own), and returns the plan.json that
// was there when it belongs to another plan (a changed suite or fixture), so that the caller
// can say so. Then writes `plan` as the directory's plan.json.
result<std::optional<plan_identity>> adopt_plan(const std::filesystem::path& results_dir,
                                                const plan_identity& plan);

// One run of the whole matrix, as an identity alone determines it.
struct matrix_run {
  std::string run_id;
  uint32_t fixture = 0;    // index into plan_identity::fixtures
  uint32_t candidate = 0;  // index into plan_identity::candidates
  int trial = 0;
  int shard = 0;  // the K of the shard that runs it
};

// Every run of the plan, of every shard, that its filter selects, in plan order (the order and
// the ids of plan_runs).
std::vector<matrix_run> matrix_runs(const plan_identity& plan);

// The run ids a results directory with this plan is meant to hold, sorted: its own shard's, or
// every shard's in a merged directory.
std::vector<std::string> planned_ids(const plan_identity& plan);

}  // namespace plan
}  // namespace evalbox::harness
