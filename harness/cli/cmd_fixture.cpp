// `evalbox fixture ...`: commands for fixture authors. `fixture new` scaffolds a fixture;
// `fixture test` (the sandboxed oracle/noop check) has its own section below.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>

#include "base/fs.h"
#include "base/log.h"
#include "harness/cli/commands.h"
#include "harness/cli/registry.h"
#include "harness/cli/shell_session.h"
#include "harness/cli/suite_command.h"
#include "harness/config/judges.h"
#include "harness/fixture/load.h"
#include "harness/fixture/scaffold.h"
#include "harness/fixture/trust.h"
#include "harness/results/results.h"

namespace evalbox::harness::cli {

namespace {

// ---- evalbox fixture new NAME [--dir D] -------------------------------------------------------

void add_fixture_new(CLI::App& fixture, action& out) {
  auto* cmd = fixture.add_subcommand(
      "new", "Create a fixture directory D/NAME that is valid as created, to edit from there.");
  auto name = std::make_shared<std::string>();
  auto dir = std::make_shared<std::string>(".");
  cmd->add_option("name", *name, "fixture id: [a-z0-9][a-z0-9._-]*")->required();
  cmd->add_option("--dir", *dir, "directory to create it in (default: the current one)");
  cmd->callback([&out, name, dir] {
    out = [name, dir] {
      auto made = harness::scaffold_fixture(*dir, *name);
      if (!made) {
        log::error("{}", made.error().message);
        return made.error().kind == error_kind::invalid_argument ? exit_usage : exit_internal;
      }
      fmt::print(
          "created {0}\n"
          "  fixture.yaml        the prompt, setup, limits and checks\n"
          "  workspace/          the files the agent starts from (/workspace)\n"
          "  grader/check.sh     hidden from the agent; at /grader while checks run\n"
          "  solution/solve.sh   the reference solution (the oracle)\n"
          "next: edit them, then `evalbox validate {0}`, `evalbox fixture shell {0}` (solve it\n"
          "by hand as the agent would start) and `evalbox fixture test {0}`\n",
          made->string());
      return exit_ok;
    };
  });
}

// ---- evalbox fixture test DIR... --------------------------------------------------------------
// Runs oracle and noop on each fixture in the sandbox.

struct fixture_test_args {
  std::vector<std::string> dirs;
  std::string suite;  // whose defaults (environment, limits) the fixtures take
  int trials = 1;
  std::string results;
  int concurrency = 2;
  image_args images;  // --image, --pull, --force-build, --images-lock
};

// The suite `fixture test` and `fixture shell` run (harness::suite_of_fixtures), its images
// resolved, no candidates yet. On a problem it prints the messages and returns the exit code.
std::expected<harness::suite_spec, int> fixture_suite(
    const std::vector<std::string>& dirs, const std::optional<harness::suite_spec>& parent,
    image_args& images) {
  auto suite = harness::suite_of_fixtures("fixture-test", {dirs.begin(), dirs.end()},
                                          parent ? &*parent : nullptr);
  if (!suite) {
    fmt::print(stderr, "{}\n", suite.error().message);
    return std::unexpected(exit_usage);
  }
  if (int rc = resolve_suite_images(*suite, images); rc != exit_ok) return std::unexpected(rc);
  return std::move(*suite);
}

// Runs oracle and noop on each fixture and prints the verdict on each (harness/fixture/trust.h).
int fixture_test(fixture_test_args& a) {
  auto parent = load_parent_suite(a.suite);
  if (!parent) return parent.error();
  auto made = fixture_suite(a.dirs, *parent, a.images);
  if (!made) return made.error();
  harness::suite_spec suite = std::move(*made);
  harness::add_trust_candidates(suite, a.trials);
  std::optional<temp_dir> scratch;
  std::filesystem::path results_path = a.results;
  if (results_path.empty()) {
    scratch.emplace("evalbox-fixture-test");
    results_path = scratch->path();
  }
  auto runs = harness::plan_runs(suite, {});
  if (!runs) {
    fmt::print(stderr, "{}\n", runs.error().message);
    return exit_usage;
  }
  suite_run_options o;
  o.results_dir = results_path;
  o.concurrency = a.concurrency;
  o.resume = !a.results.empty();
  o.quiet = true;
  auto done = run_planned(suite, *runs, o);
  if (!done) {
    log::error("{}", done.error().message);
    return exit_internal;
  }
  if (done->signal) return harness::exit_status_of_signal(done->signal);
  auto verdicts = harness::fixture_trust_of(suite, results_path);
  if (!verdicts) {
    log::error("{}", verdicts.error().message);
    return exit_internal;
  }
  int invalid = 0;
  for (const auto& t : *verdicts) {
    if (t.trusted()) {
      fmt::print("ok       {:<24} oracle {}/{} passed; untouched workspace fails: {}\n",
                 t.fixture_id, t.oracle_passed, t.oracle_runs,
                 fmt::join(t.noop_failing_checks, ", "));
      continue;
    }
    ++invalid;
    fmt::print("INVALID  {:<24} {}\n", t.fixture_id, t.problems.front());
    for (size_t i = 1; i < t.problems.size(); ++i)
      fmt::print("         {:<24} {}\n", "", t.problems[i]);
  }
  if (!a.results.empty()) fmt::print("results: {}\n", results_path.string());
  return invalid == 0 ? exit_ok : exit_task_failed;
}

void add_fixture_test(CLI::App& fixture, action& out) {
  auto a = std::make_shared<fixture_test_args>();
  auto* cmd = fixture.add_subcommand(
      "test",
      "Check that fixtures can be trusted: in the sandbox, the reference solution (oracle) "
      "must pass every trial and the untouched workspace (noop) must fail at least one check. "
      "Exit 0 only when every fixture is valid; otherwise the output says which check broke it.\n\n"
      "Example: evalbox fixture test fixtures/examples/off-by-one --trials 3");
  cmd->add_option("dirs", a->dirs,
                  "fixture directories (fixture.yaml, or a Harbor task's task.toml)")
      ->required();
  cmd->add_option("--suite", a->suite,
                  "a suite whose defaults the fixtures take (its environment for those without "
                  "their own, its limits, and the judges and prices of judge checks)");
  cmd->add_option("--trials", a->trials, "oracle and noop trials per fixture")
      ->capture_default_str();
  cmd->add_option("--results", a->results, "keep results here (default: a temporary directory)");
  add_image_options(cmd, a->images);
  cmd->add_option("--concurrency,-j", a->concurrency, "runs at once")->capture_default_str();
  cmd->callback([&out, a] { out = [a] { return fixture_test(*a); }; });
}

// ---- evalbox fixture shell DIR [--candidate ID --suite FILE] --------------------------------
// The fixture as its agent would start it, with a person at the terminal; then its grading.

struct fixture_shell_args {
  std::string dir;
  std::string suite;
  std::string candidate;
  image_args images;
};

int fixture_shell(fixture_shell_args& a) {
  auto made = one_run_suite(a.dir, a.suite, a.candidate, "shell", a.images, "fixture shell");
  if (!made) return made.error();
  harness::suite_spec suite = std::move(*made);
  fmt::print(stderr,
             "evalbox fixture shell: {}: the setup runs first; exit the shell to see what "
             "`evalbox fixture test` would grade on what you left\n",
             suite.fixtures.front().id);
  return run_shell_session(suite, {"fixture shell", false, {}});
}

void add_fixture_shell(CLI::App& fixture, action& out) {
  auto a = std::make_shared<fixture_shell_args>();
  auto* cmd = fixture.add_subcommand(
      "shell",
      "Enter a fixture as its agent would start: its setup commands already run, its "
      "environment (image), bin/ on PATH, limits and network, the managed home of --candidate "
      "(its credentials leased as in a run; without one, an empty home), and no /grader. Exit "
      "the shell (its exit status does not matter) to see each check pass or fail on what you "
      "left and the verdict, as `evalbox fixture test` grades. With a terminal on stdin the "
      "shell has a pseudo-terminal of its own.\n\n"
      "Exit status: 0 the checks pass, 1 they do not, 2 the run could not be carried out "
      "(e.g. the setup failed), 3 it could not be graded.\n\n"
      "Example: evalbox fixture shell fixtures/examples/off-by-one");
  cmd->add_option("dir", a->dir, "the fixture directory")->required();
  cmd->add_option("--suite", a->suite,
                  "a suite whose defaults the fixture takes (as for fixture test) and where "
                  "--candidate is");
  cmd->add_option("--candidate", a->candidate,
                  "the suite's candidate whose managed home (and credential lease) the shell "
                  "gets");
  add_image_options(cmd, a->images);
  cmd->callback([&out, a] { out = [a] { return fixture_shell(*a); }; });
}

}  // namespace

void register_fixture(CLI::App& app, action& out) {
  auto* fixture = app.add_subcommand("fixture", "Author fixtures: scaffold, enter and test them.");
  fixture->require_subcommand(1);
  add_fixture_new(*fixture, out);
  add_fixture_test(*fixture, out);
  add_fixture_shell(*fixture, out);
}

}  // namespace evalbox::harness::cli
