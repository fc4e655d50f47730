// A suite run's plan as `evalbox run` needs it before the first run: this process's shard of
// the matrix, the results directory it writes (each shard its own), and that directory's
// plan.json adopted. The rules live here so that every caller shards, refuses and adopts alike.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "base/error.h"
#include "harness/config/spec.h"
#include "harness/plan/identity.h"
#include "harness/plan/plan.h"
#include "harness/plan/shard.h"

namespace evalbox::harness {
inline namespace plan {

struct suite_plan_request {
  int trials = 0;                 // 0: the suite's
  std::string filter;             // glob over "fixture/candidate"; empty: all
  std::string shard;              // --shard: "", "K/N" or "auto/N" (resolve_shard)
  std::filesystem::path results;  // empty: the suite's results directory
};

struct suite_plan {
  std::vector<run_spec> runs;         // this shard's, in plan order
  shard_choice shard;                 // which shard this process runs
  std::filesystem::path results_dir;  // RESULTS, or RESULTS/shards/K when sharded
  plan_identity identity;             // written to results_dir/plan.json
  // The directory held results of another plan (a changed suite, fixture or candidate): its
  // records stay, and reports and merges tell the plans apart.
  bool replaced_other_plan = false;
  // The whole matrix has runs but this shard none (more shards than runs): nothing to do.
  bool empty_shard = false;
};

// Plans `suite` for `request` and adopts the results directory (writes its plan.json). An
// invalid_argument error is the user's to fix (a bad --shard, a filter that matches nothing, a
// directory that holds another shard or a merge); any other kind is the host's or evalbox's.
result<suite_plan> plan_suite_run(const suite_spec& suite, const suite_plan_request& request,
                                  const env_lookup& env);

// `evalbox regrade`: the suite file it grades with — `given`, else the one the results'
// plan.json names (`plan.suite_file`), which must still be there. invalid_argument, saying to
// give --suite, when neither is to be had.
result<std::filesystem::path> regrade_suite_file(const plan_identity& plan,
                                                 const std::filesystem::path& results,
                                                 const std::string& given);

// `evalbox regrade`: the runs of `suite` a results directory with `plan` is meant to hold (its
// shard's, or every shard's once merged; its trials and filter), narrowed to the fixture and
// candidate ids given (none: every one). An id the suite lacks is an invalid_argument error.
result<std::vector<run_spec>> plan_regrade(const suite_spec& suite, const plan_identity& plan,
                                           const std::vector<std::string>& fixtures,
                                           const std::vector<std::string>& candidates);

}  // namespace plan
}  // namespace evalbox::harness
