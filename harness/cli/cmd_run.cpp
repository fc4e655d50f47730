// `evalbox run SUITE`: fixtures × candidates × trials in sandboxes, resumable, with reports.

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "base/log.h"
#include "base/units.h"
#include "harness/cli/commands.h"
#include "harness/cli/registry.h"
#include "harness/cli/suite_command.h"
#include "harness/fixture/load.h"
#include "harness/plan/suite_plan.h"
#include "harness/results/results.h"

namespace evalbox::harness::cli {

namespace {

struct run_args {
  std::string suite;
  std::string results;
  int concurrency = 0;
  int trials = 0;
  std::string filter;
  int retries = 1;
  bool no_resume = false;
  std::string shard;
  image_args images;  // --image, --pull, --force-build, --images-lock
  std::string keep_workspaces = "none";
  std::string keep_workspace_size = "1GiB";
  std::string final_state_size = "256MiB";
  std::string model_cache;
  std::string model_cache_mode = "replay-or-record";
};

int run_command(run_args& a) {
  auto keep = harness::parse_keep_policy(a.keep_workspaces);
  auto keep_bytes = parse_bytes(a.keep_workspace_size);
  if (!keep || !keep_bytes) {
    log::error("{}", keep ? fmt::format("--keep-workspace-size: {}", keep_bytes.error().message)
                          : keep.error().message);
    return exit_usage;
  }
  uint64_t state_bytes = 0;
  if (a.final_state_size != "0") {
    auto b = parse_bytes(a.final_state_size);
    if (!b) {
      log::error("--final-state-size: {} (0 keeps none)", b.error().message);
      return exit_usage;
    }
    state_bytes = *b;
  }
  auto cache_mode = harness::gateway::parse_cache_mode(a.model_cache_mode);
  if (!cache_mode) {
    log::error("--model-cache-mode {}: not a mode (record, replay, replay-or-record)",
               a.model_cache_mode);
    return exit_usage;
  }
  auto suite = load_runnable_suite(a.suite);
  if (!suite) return suite.error();
  if (int rc = resolve_suite_images(*suite, a.images); rc != exit_ok) return rc;
  // Kubernetes Indexed Jobs and Slurm job arrays name the shard themselves (--shard auto/N).
  auto plan = harness::plan_suite_run(*suite, {a.trials, a.filter, a.shard, a.results},
                                      [](const char* name) { return std::getenv(name); });
  if (!plan) {
    fmt::print(stderr, "{}\n", plan.error().message);
    return plan.error().kind == error_kind::invalid_argument ? exit_usage : exit_internal;
  }
  if (plan->replaced_other_plan)
    fmt::print(stderr,
               "evalbox: {} held results of another plan (the suite file, a fixture or a "
               "candidate changed): its records stay, reports show the newest record of each "
               "trial, and evalbox merge takes only this plan's runs\n",
               plan->results_dir.string());
  const harness::shard_choice& shard = plan->shard;
  if (shard.count > 1)
    fmt::print(stderr, "evalbox: shard {}/{} (K from {})\n", shard.index, shard.count,
               shard.source);
  if (plan->empty_shard) {
    fmt::print(stderr, "evalbox: shard {}/{} has no runs (the plan has fewer runs than shards)\n",
               shard.index, shard.count);
    return exit_ok;
  }
  const std::vector<harness::run_spec>& runs = plan->runs;
  suite_run_options o;
  o.results_dir = plan->results_dir;
  o.concurrency = a.concurrency > 0 ? a.concurrency : suite->concurrency;
  o.retries = a.retries;
  o.resume = !a.no_resume;
  o.keep_workspaces = *keep;
  o.keep_workspace_bytes = *keep_bytes;
  o.final_state_bytes = state_bytes;
  if (!a.model_cache.empty())
    o.model_cache_dir = std::filesystem::absolute(a.model_cache).lexically_normal();
  o.model_cache_mode = *cache_mode;
  record_images_lock(plan->results_dir, a.images.pinned);
  fmt::print(stderr, "evalbox: {} runs ({} fixtures × {} candidates × {} trials) → {}\n",
             runs.size(), suite->fixtures.size(), suite->candidates.size(),
             a.trials > 0 ? a.trials : suite->trials, o.results_dir.string());
  auto done = run_planned(*suite, runs, o);
  if (!done) {
    log::error("{}", done.error().message);
    // Stopped by Ctrl-C before any run (an image or a cache being made), or a cache whose warm
    // commands failed (the fixture's doing; nothing was run).
    if (done.error().kind == error_kind::cancelled) return exit_sigint;
    if (done.error().kind == error_kind::invalid_argument) return exit_usage;
    return exit_internal;
  }
  if (done->totals.skipped > 0)
    fmt::print(stderr,
               "evalbox: {} run(s) were already recorded (resumed; --no-resume reruns them)\n",
               done->totals.skipped);
  if (done->totals.regraded > 0 || done->totals.regrade_errors > 0)
    fmt::print(stderr,
               "evalbox: {} recorded run(s) graded again from their kept state, as their checks "
               "changed ({} verdict(s) changed; no agent ran){}\n",
               done->totals.regraded, done->totals.verdicts_changed,
               done->totals.regrade_errors
                   ? fmt::format("; {} could not be (above: why)", done->totals.regrade_errors)
                   : "");
  say_regrade_leftovers(done->totals, o.results_dir);
  if (done->totals.suite_budget_spent)
    fmt::print(stderr,
               "evalbox: the suite budget is spent ({}; every run recorded in {} counts): {} "
               "planned run(s) were not started. Raise suite_budget and run evalbox run again "
               "to resume them\n",
               *done->totals.suite_budget_spent, o.results_dir.string(),
               done->totals.budget_unstarted);
  if (done->summary) fmt::print("{}", harness::render_terminal_summary(*done->summary));
  fmt::print("reports: {0}/report.md {0}/report.html {0}/summary.json {0}/junit.xml\n",
             o.results_dir.string());
  if (done->signal) return harness::exit_status_of_signal(done->signal);
  if (done->totals.suite_budget_spent && done->totals.budget_unstarted > 0)
    return harness::exit_budget_spent;
  return harness::exit_status(done->planned.worst());
}

}  // namespace

void register_run(CLI::App& app, action& out) {
  auto a = std::make_shared<run_args>();
  auto* cmd = app.add_subcommand(
      "run",
      "Run a suite: every fixture × candidate × trial in its own sandbox, graded, recorded and "
      "reported.\n\n"
      "Resumes by default: runs already in RESULTS/results.jsonl are skipped; a changed fixture "
      "or candidate gets new run ids. Ctrl-C stops cleanly (exit 130).\n\n"
      "Sharding: --shard K/N runs the K-th of N slices of the matrix (each fixture's trials "
      "dealt round-robin, every candidate in every slice) into "
      "RESULTS/shards/K; a Slurm job array or a Kubernetes Indexed Job runs --shard auto/N (or "
      "sets EVALBOX_SHARDS=N), and evalbox merge joins the shards into one report "
      "(docs/scale-out.md; evalbox slurm and evalbox k8s write the jobs).\n\n"
      "Exit status: 0 every run passed, 1 a task failed, 2 an agent or host execution failed, "
      "3 a grader failed, 64 invalid configuration, 70 internal error, 130/143 interrupted.\n\n"
      "Example: evalbox run fixtures/examples/suite.yaml --concurrency 2");
  cmd->add_option("suite", a->suite, "the suite file (schema evalbox.suite.v1)")->required();
  cmd->add_option("--results", a->results, "results directory (default: results/<suite name>)");
  cmd->add_option("--concurrency,-j", a->concurrency, "runs at once (default: the suite's)");
  cmd->add_option("--trials", a->trials, "trials per fixture × candidate (default: the suite's)");
  cmd->add_option("--filter", a->filter,
                  "only runs whose 'fixture/candidate' matches this glob (default: every run)");
  cmd->add_option("--retries", a->retries,
                  "extra attempts for infrastructure errors (never for task failures)")
      ->capture_default_str();
  cmd->add_flag("--no-resume", a->no_resume, "rerun runs that are already recorded");
  add_image_options(cmd, a->images);
  cmd->add_option("--shard", a->shard,
                  "run slice K/N of the matrix into RESULTS/shards/K; auto/N takes K from "
                  "SLURM_ARRAY_TASK_ID (Slurm job array) or JOB_COMPLETION_INDEX (Kubernetes "
                  "Indexed Job), as EVALBOX_SHARDS=N does without --shard; evalbox merge joins "
                  "the shards");
  cmd->add_option("--keep-workspaces", a->keep_workspaces,
                  "keep the final workspace of failed runs (failed: a failed task, an execution "
                  "or grading error), all runs, or none, under RESULTS/runs/<run_id>/workspace "
                  "(run.json's kept_workspace says where); evalbox runs shell RESULTS RUN_ID "
                  "opens one")
      ->check(CLI::IsMember({"failed", "all", "none"}))
      ->capture_default_str();
  cmd->add_option("--keep-workspace-size", a->keep_workspace_size,
                  "the most one kept workspace may hold; a larger one is not kept at all "
                  "(run.json says so)")
      ->capture_default_str();
  cmd->add_option("--final-state-size", a->final_state_size,
                  "every graded run keeps what it changed (its workspace's changed files and "
                  "an image root's writes, stored once by content under RESULTS/objects) so "
                  "that evalbox regrade can grade it again without its agent; a run whose "
                  "changes take more keeps none (run.json's final_state says so); 0 keeps none")
      ->capture_default_str();
  cmd->add_option("--model-cache", a->model_cache,
                  "a directory where gateway candidates' model calls are recorded and replayed "
                  "from (per fixture, candidate and trial; docs/agents.md, \"Record and "
                  "replay\"): a replayed run calls no model and does what the recorded one did")
      ->type_name("DIR");
  cmd->add_option("--model-cache-mode", a->model_cache_mode,
                  "record (every call goes upstream and is stored), replay (every call is "
                  "answered from the cache; a call it lacks is an error of the run) or "
                  "replay-or-record (answered from the cache when it has the call, else "
                  "recorded)")
      ->check(CLI::IsMember({"record", "replay", "replay-or-record"}))
      ->capture_default_str();
  cmd->callback([&out, a] { out = [a] { return run_command(*a); }; });
}

}  // namespace evalbox::harness::cli
