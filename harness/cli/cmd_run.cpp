// `evalbox run SUITE`: fixtures × candidates × trials in sandboxes, resumable, with reports.
#include <signal.h>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "harness/cli/commands.h"
#include "harness/cli/session.h"
#include "harness/fixture/load.h"
#include "harness/results/results.h"
#include "sandbox/base/log.h"

namespace evalbox::cli {

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
};

// Exit status from the recorded runs of this plan: execution errors first, then grader
// failures, then task failures.
int exit_status(const planned_outcomes& planned) {
  if (planned.execution_error) return exit_execution_failed;
  if (planned.grader_error) return exit_grader_failed;
  if (planned.task_failed) return exit_task_failed;
  return exit_ok;
}

int run_command(const run_args& a) {
  auto suite = harness::load_suite(a.suite);
  if (!suite) {
    fmt::print(stderr, "{}\n", suite.error().message);
    return suite.error().kind == error_kind::invalid_argument ||
                   suite.error().kind == error_kind::not_found
               ? exit_usage
               : exit_internal;
  }
  auto problems = validate_candidates(*suite);
  if (!problems.empty()) {
    fmt::print(stderr, "{}\n", harness::join_messages(problems));
    return exit_usage;
  }
  harness::plan_options po;
  po.trials = a.trials;
  po.filter = a.filter;
  std::string shard = a.shard;
  if (shard.empty()) {
    // Kubernetes Indexed Jobs and Slurm arrays name the shard themselves.
    for (const char* var : {"JOB_COMPLETION_INDEX", "SLURM_ARRAY_TASK_ID"})
      if (const char* v = std::getenv(var); v && *v && std::getenv("EVALBOX_SHARDS"))
        shard = fmt::format("{}/{}", v, std::getenv("EVALBOX_SHARDS"));
  }
  if (!shard.empty()) {
    if (std::sscanf(shard.c_str(), "%d/%d", &po.shard_index, &po.shard_count) != 2) {
      fmt::print(stderr, "--shard '{}': write K/N, e.g. 0/4\n", shard);
      return exit_usage;
    }
  }
  auto runs = harness::plan_runs(*suite, po);
  if (!runs) {
    fmt::print(stderr, "{}\n", runs.error().message);
    return exit_usage;
  }
  if (runs->empty()) {
    fmt::print(stderr, "nothing to run: the filter '{}' matches no fixture/candidate\n", a.filter);
    return exit_usage;
  }
  suite_run_options o;
  o.results_dir = a.results.empty() ? suite->results_dir : std::filesystem::path(a.results);
  o.concurrency = a.concurrency > 0 ? a.concurrency : suite->concurrency;
  o.retries = a.retries;
  o.resume = !a.no_resume;
  fmt::print(stderr, "evalbox: {} runs ({} fixtures × {} candidates × {} trials) → {}\n",
             runs->size(), suite->fixtures.size(), suite->candidates.size(),
             a.trials > 0 ? a.trials : suite->trials, o.results_dir.string());
  auto done = run_planned(*suite, *runs, o);
  if (!done) {
    log::error("{}", done.error().message);
    return exit_internal;
  }
  if (done->totals.skipped > 0)
    fmt::print(stderr,
               "evalbox: {} run(s) were already recorded (resumed; --no-resume reruns them)\n",
               done->totals.skipped);
  if (done->summary) fmt::print("{}", harness::render_terminal_summary(*done->summary));
  fmt::print("reports: {0}/report.md {0}/report.html {0}/summary.json {0}/junit.xml\n",
             o.results_dir.string());
  if (done->signal == SIGINT) return exit_sigint;
  if (done->signal == SIGTERM) return exit_sigterm;
  return exit_status(done->planned);
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
  cmd->add_option("--shard", a->shard,
                  "run slice K/N of the matrix (also from JOB_COMPLETION_INDEX or "
                  "SLURM_ARRAY_TASK_ID with EVALBOX_SHARDS=N)");
  cmd->callback([&out, a] { out = [a] { return run_command(*a); }; });
}

}  // namespace evalbox::cli
