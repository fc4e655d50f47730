// plan_suite_run (see suite_plan.h).
#include "harness/plan/suite_plan.h"

#include <algorithm>
#include <set>
#include <utility>

namespace evalbox::harness {
inline namespace plan {

namespace {

// The user's to fix, whatever kind the step reported.
error as_usage(error e) {
  e.kind = error_kind::invalid_argument;
  return e;
}

// A planning step's failure that is not the user's: kept as what it is, never invalid_argument.
error as_internal(error e) {
  if (e.kind == error_kind::invalid_argument) e.kind = error_kind::internal;
  return e;
}

}  // namespace

result<suite_plan> plan_suite_run(const suite_spec& suite, const suite_plan_request& request,
                                  const env_lookup& env) {
  suite_plan p;
  auto shard = resolve_shard(request.shard, env);
  if (!shard) return std::unexpected(as_usage(std::move(shard).error()));
  p.shard = *shard;
  plan_options options;
  options.trials = request.trials;
  options.filter = request.filter;
  options.shard_index = p.shard.index;
  options.shard_count = p.shard.count;
  auto runs = plan_runs(suite, options);
  if (!runs) return std::unexpected(as_usage(std::move(runs).error()));
  p.runs = std::move(*runs);
  // A shard may be empty (more shards than runs); a filter that matches nothing never is.
  if (p.runs.empty()) {
    plan_options whole = options;
    whole.shard_index = 0;
    whole.shard_count = 1;
    auto all = plan_runs(suite, whole);
    if (!all || all->empty())
      return make_error(error_kind::invalid_argument,
                        "nothing to run: the filter '{}' matches no fixture/candidate",
                        request.filter);
    p.empty_shard = true;
  }
  p.results_dir = request.results.empty() ? suite.results_dir : request.results;
  // Each shard has a results directory of its own, so that a requeued shard resumes its own
  // runs and `evalbox merge` can tell which shard a missing run belongs to.
  if (p.shard.count > 1) p.results_dir = p.results_dir / "shards" / std::to_string(p.shard.index);
  auto identity = identify_plan(suite, options);
  if (!identity) return std::unexpected(as_internal(std::move(identity).error()));
  p.identity = std::move(*identity);
  auto before = adopt_plan(p.results_dir, p.identity);
  if (!before) return std::unexpected(std::move(before).error());
  p.replaced_other_plan = before->has_value();
  return p;
}

result<std::filesystem::path> regrade_suite_file(const plan_identity& plan,
                                                 const std::filesystem::path& results,
                                                 const std::string& given) {
  if (!given.empty()) return std::filesystem::path(given);
  if (plan.suite_file.empty())
    return make_error(error_kind::invalid_argument,
                      "{}: its plan.json does not say where the suite file is: give it with "
                      "--suite",
                      results.string());
  std::error_code ec;
  if (!std::filesystem::exists(plan.suite_file, ec))
    return make_error(error_kind::invalid_argument,
                      "the suite file {} (where these results were run from) is gone: give it "
                      "with --suite",
                      plan.suite_file);
  return std::filesystem::path(plan.suite_file);
}

result<std::vector<run_spec>> plan_regrade(const suite_spec& suite, const plan_identity& plan,
                                           const std::vector<std::string>& fixtures,
                                           const std::vector<std::string>& candidates) {
  for (const auto& id : fixtures)
    if (std::none_of(suite.fixtures.begin(), suite.fixtures.end(),
                     [&](const auto& f) { return f.id == id; }))
      return make_error(error_kind::invalid_argument,
                        "--fixture {}: the suite {} has no such fixture", id, suite.file.string());
  for (const auto& id : candidates)
    if (std::none_of(suite.candidates.begin(), suite.candidates.end(),
                     [&](const auto& c) { return c.id == id; }))
      return make_error(error_kind::invalid_argument,
                        "--candidate {}: the suite {} has no such candidate", id,
                        suite.file.string());
  plan_options o;
  o.trials = plan.trials;
  o.filter = plan.filter;
  if (plan.merged.empty()) {
    o.shard_index = plan.shard_index;
    o.shard_count = plan.shard_count;
  }
  auto runs = EB_TRY(plan_runs(suite, o));
  const std::set<std::string> f(fixtures.begin(), fixtures.end());
  const std::set<std::string> c(candidates.begin(), candidates.end());
  std::erase_if(runs, [&](const run_spec& r) {
    return (!f.empty() && !f.count(suite.fixtures[r.fixture].id)) ||
           (!c.empty() && !c.count(suite.candidates[r.candidate].id));
  });
  return runs;
}

}  // namespace plan
}  // namespace evalbox::harness
