// `evalbox runs shell RESULTS RUN_ID`: enter a finished run's kept workspace (`evalbox run
// --keep-workspaces`) — a copy of it, in a fresh sandbox with the run's fixture environment
// and the grader at /grader, so that checks can be rerun by hand; the checks grade it again on
// exit. The kept workspace itself stays as it was (evidence).
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <filesystem>
#include <memory>
#include <optional>

#include "harness/cli/commands.h"
#include "harness/cli/registry.h"
#include "harness/cli/session.h"
#include "harness/cli/shell_session.h"
#include "harness/fixture/load.h"
#include "harness/results/results.h"
#include "harness/runner/keep_workspace.h"
#include "sandbox/base/fs.h"
#include "sandbox/base/json.h"

namespace evalbox::cli {
namespace {
namespace fs = std::filesystem;

struct runs_shell_args {
  std::string results;
  std::string run_id;
  std::string suite;    // whose defaults the fixture took (its environment, limits)
  std::string fixture;  // the fixture directory, when it is no longer where the run had it
  std::vector<std::string> images;
};

int runs_shell(const runs_shell_args& a) {
  constexpr const char* cmd = "evalbox runs shell";
  const harness::results_dir results(fs::absolute(a.results));
  const fs::path run_dir = results.run_dir(a.run_id);
  if (a.run_id.empty() || a.run_id.find('/') != std::string::npos ||
      !fs::exists(run_dir / "run.json")) {
    fmt::print(stderr, "{}: no run {} in {} (no runs/{}/run.json)\n", cmd, a.run_id,
               results.root().string(), a.run_id);
    return exit_usage;
  }
  auto record = read_json_file(run_dir / "run.json");
  if (!record) {
    fmt::print(stderr, "{}: {}\n", cmd, record.error().message);
    return exit_internal;
  }
  const json kept = record->value("kept_workspace", json(nullptr));
  if (!kept.is_object() || !kept.value("path", json(nullptr)).is_string()) {
    fmt::print(stderr,
               "{}: run {} kept no workspace{}; runs keep theirs with `evalbox run "
               "--keep-workspaces failed` (or all)\n",
               cmd, a.run_id,
               kept.is_object() && kept.contains("skipped")
                   ? fmt::format(" ({})", kept.value("skipped", ""))
                   : std::string());
    return exit_usage;
  }
  const fs::path workspace = run_dir / harness::kept_workspace_dir;
  if (!fs::is_directory(workspace)) {
    fmt::print(stderr, "{}: run {}: {} is gone\n", cmd, a.run_id, workspace.string());
    return exit_usage;
  }
  const std::string fixture_dir = a.fixture.empty() ? kept.value("fixture_dir", "") : a.fixture;
  harness::suite_spec suite;
  suite.name = "runs-shell";
  suite.file = fs::current_path() / "runs-shell";
  std::vector<harness::config_error> errors;
  if (!a.suite.empty()) {
    auto s = harness::load_suite(a.suite, make_registry().ids(), &errors);
    if (!s) {
      fmt::print(stderr, "{}\n",
                 errors.empty() ? s.error().message : harness::join_messages(errors));
      return exit_usage;
    }
    suite.default_limits = s->default_limits;
    suite.default_environment = s->default_environment;
    suite.images = s->images;
    suite.judges = s->judges;
    suite.prices = s->prices;
  }
  auto f = harness::load_fixture(
      fixture_dir, suite.default_environment ? &*suite.default_environment : nullptr, &errors);
  if (!f) {
    fmt::print(stderr, "{}: the run's fixture {}: {}\n(--fixture DIR names where it is now)\n", cmd,
               fixture_dir, errors.empty() ? f.error().message : harness::join_messages(errors));
    return exit_usage;
  }
  if (f->digest != (*record)["fixture"].value("digest", ""))
    fmt::print(stderr, "{}: note: the fixture at {} has changed since the run\n", cmd, fixture_dir);
  f->setup.clear();  // the kept workspace is past its setup
  suite.fixtures.push_back(std::move(*f));
  suite.fixture_dirs.push_back(suite.fixtures.front().dir);
  if (int rc = resolve_suite_images(suite, a.images); rc != exit_ok) return rc;
  harness::candidate_spec c;
  c.id = "shell";
  c.adapter = "noop";
  c.where = {suite.file.string(), 0, 0};
  suite.candidates = {std::move(c)};
  fmt::print(stderr,
             "{}: a copy of run {}'s final workspace (the kept one stays as it is); the "
             "grader is at /grader; exit the shell to grade what you left\n",
             cmd, a.run_id);
  return run_shell_session(suite, {"runs shell", true, workspace});
}

}  // namespace

void register_runs(CLI::App& app, action& out) {
  auto* runs = app.add_subcommand("runs", "Look into finished runs.");
  runs->require_subcommand(1);
  auto a = std::make_shared<runs_shell_args>();
  auto* shell = runs->add_subcommand(
      "shell",
      "Open a shell on a copy of a finished run's kept workspace (`evalbox run "
      "--keep-workspaces failed|all` keeps them), read-write, in a fresh sandbox with the "
      "run's fixture environment (image, bin/, limits, network) and its grader at /grader, so "
      "that checks can be rerun by hand. On exit the checks grade what the shell left (as "
      "`evalbox fixture shell` prints). The kept workspace is never modified.\n\n"
      "Exit status: as evalbox fixture shell; 64 for an unknown run id or a run that kept no "
      "workspace.\n\n"
      "Example: evalbox runs shell results/example 3f2a9c01d4e5b6a7");
  shell->add_option("results", a->results, "the results directory")->required();
  shell->add_option("run_id", a->run_id, "the run (runs/<run_id>/ in RESULTS)")->required();
  shell->add_option("--suite", a->suite,
                    "the suite the run came from, when its fixture took the suite's defaults "
                    "(environment, limits)");
  shell->add_option("--fixture", a->fixture,
                    "the run's fixture directory, when it is no longer where the run had it");
  shell->add_option("--image", a->images,
                    "REF=SOURCE: the image for a Harbor task's docker_image REF (repeatable)");
  shell->callback([&out, a] { out = [a] { return runs_shell(*a); }; });
}

}  // namespace evalbox::cli
