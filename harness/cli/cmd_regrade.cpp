// `evalbox regrade RESULTS`: the recorded runs of a results directory graded again with the
// fixtures' current checks, from the final state each run kept — no agent runs, no model is
// called but judges (docs/results.md, "Grading again").
#include <CLI/CLI.hpp>
#include <memory>
#include <vector>

#include "base/log.h"
#include "harness/cli/commands.h"
#include "harness/cli/suite_command.h"
#include "harness/plan/identity.h"
#include "harness/plan/suite_plan.h"
#include "harness/report/report.h"
#include "harness/results/results.h"

namespace evalbox::harness::cli {

namespace {

namespace fs = std::filesystem;

struct regrade_args {
  std::string results;
  std::string suite;
  std::vector<std::string> fixtures;
  std::vector<std::string> candidates;
  bool all = false;
  int concurrency = 0;
  image_args images;
};

// Recorded runs the suite, as it is now, no longer plans (a fixture's task, a candidate or an
// image changed, so their ids did): regrade cannot grade them, and says so rather than nothing.
void say_unplanned_runs(const std::vector<harness::run_spec>& planned, const fs::path& results) {
  auto recorded = harness::results_dir(results).recorded_ids();
  if (!recorded) return;
  for (const auto& r : planned) recorded->erase(r.run_id);
  if (recorded->empty()) return;
  fmt::print(stderr,
             "evalbox: {} recorded run(s) in {} are not runs of the suite as it is now (their "
             "fixture's task, candidate or image changed, which gives new run ids): they were "
             "not graded again; evalbox run records the new ones\n",
             recorded->size(), results.string());
}

int regrade_command(regrade_args& a) {
  const fs::path results = fs::absolute(a.results).lexically_normal();
  auto plan = harness::read_plan(results);
  if (!plan) {
    log::error("{} (regrade reads a results directory that evalbox run or merge wrote)",
               plan.error().message);
    return plan.error().kind == error_kind::not_found ||
                   plan.error().kind == error_kind::invalid_argument
               ? exit_usage
               : exit_internal;
  }
  auto suite_file = harness::regrade_suite_file(*plan, results, a.suite);
  if (!suite_file) {
    log::error("{}", suite_file.error().message);
    return exit_usage;
  }
  auto suite = load_runnable_suite(suite_file->string());
  if (!suite) return suite.error();
  // Images first: a fixture image's digest is part of its run ids.
  if (int rc = resolve_suite_images(*suite, a.images); rc != exit_ok) return rc;
  auto runs = harness::plan_regrade(*suite, *plan, a.fixtures, a.candidates);
  if (!runs) {
    log::error("{}", runs.error().message);
    return exit_usage;
  }

  suite_run_options o;
  o.results_dir = results;
  o.concurrency = a.concurrency > 0 ? a.concurrency : suite->concurrency;
  o.resume = true;
  o.regrade_only = true;
  o.regrade_all = a.all;
  fmt::print(stderr, "evalbox: grading {} again{} ({} planned run(s))\n", results.string(),
             a.all ? " (every recorded run)" : " (runs whose checks changed)", runs->size());
  auto done = run_planned(*suite, *runs, o);
  if (!done) {
    log::error("{}", done.error().message);
    return exit_internal;
  }
  const harness::run_totals& t = done->totals;
  fmt::print(stderr,
             "evalbox: {} run(s) graded again ({} verdict(s) changed), {} already graded by "
             "the current checks{}\n",
             t.regraded, t.verdicts_changed, t.skipped - static_cast<int>(t.stale.size()),
             t.regrade_errors ? fmt::format(", {} could not be graded again (above: why; their "
                                            "old grading stays)",
                                            t.regrade_errors)
                              : "");
  say_regrade_leftovers(t, results);
  if (a.fixtures.empty() && a.candidates.empty()) say_unplanned_runs(*runs, results);
  if (done->summary) fmt::print("{}", harness::render_terminal_summary(*done->summary));
  fmt::print("reports: {0}/report.md {0}/report.html {0}/summary.json {0}/junit.xml\n",
             results.string());
  if (done->signal) return harness::exit_status_of_signal(done->signal);
  return t.regrade_errors > 0 ? static_cast<int>(exit_grader_failed) : static_cast<int>(exit_ok);
}

}  // namespace

void register_regrade(CLI::App& app, action& out) {
  auto a = std::make_shared<regrade_args>();
  auto* cmd = app.add_subcommand(
      "regrade",
      "Grade recorded runs again with the fixtures' current checks, without running any agent.\n\n"
      "Every graded run keeps its final state (what it changed in its workspace and, with an "
      "image, its root; evalbox run --final-state-size). regrade rebuilds that state over a "
      "fresh sandbox of the fixture and runs the checks as a run would: shell, tests and "
      "verifier checks in sandboxes, judge checks with the suite's current judges (the only "
      "model calls). Each run gets a new grading, identified by the digest of the checks, "
      "grader files and judge settings that made it (run.json's grading.digest); the old one "
      "stays (runs/<id>/gradings/<digest>.json and its line in results.jsonl), and the reports "
      "show the newest and say how many verdicts come from a regrade.\n\n"
      "By default only runs whose grading digest differs from the current one are graded; "
      "--all grades every recorded run (the same checks give the same verdicts). evalbox run "
      "does the same on resume for runs whose checks changed.\n\n"
      "Exit status: 0 graded (or nothing to do), 3 a run could not be graded again (said why; "
      "it keeps its old grading), 64 invalid arguments or suite, 70 internal error, 130/143 "
      "interrupted.\n\n"
      "Example: evalbox regrade results/examples --fixture off-by-one");
  cmd->add_option("results", a->results, "the results directory (evalbox run's --results)")
      ->required();
  cmd->add_option("--suite", a->suite,
                  "the suite file, with the checks as they are now (default: the one the "
                  "results were run from, as their plan.json says)");
  cmd->add_option("--fixture", a->fixtures, "only runs of this fixture (repeatable)");
  cmd->add_option("--candidate", a->candidates, "only runs of this candidate (repeatable)");
  cmd->add_flag("--all", a->all,
                "grade every recorded run, not only those whose checks, grader files or judges "
                "changed");
  cmd->add_option("--concurrency,-j", a->concurrency,
                  "runs graded at once (default: the suite's concurrency)");
  add_image_options(cmd, a->images);
  cmd->callback([&out, a] { out = [a] { return regrade_command(*a); }; });
}

}  // namespace evalbox::harness::cli
