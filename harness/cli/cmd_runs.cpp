// `evalbox runs shell RESULTS RUN_ID`: enter a finished run's kept workspace (`evalbox run
// --keep-workspaces`) — a copy of it, in a fresh sandbox with the run's fixture environment
// and the grader at /grader, so that checks can be rerun by hand; the checks grade it again on
// exit. The kept workspace itself stays as it was (evidence).
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <filesystem>
#include <memory>
#include <optional>

#include "base/fs.h"
#include "harness/cli/commands.h"
#include "harness/cli/registry.h"
#include "harness/cli/shell_session.h"
#include "harness/cli/suite_command.h"
#include "harness/fixture/load.h"
#include "harness/runner/keep_workspace.h"

namespace evalbox::harness::cli {
namespace {
namespace fs = std::filesystem;

struct runs_shell_args {
  std::string results;
  std::string run_id;
  std::string suite;    // whose defaults the fixture took (its environment, limits)
  std::string fixture;  // the fixture directory, when it is no longer where the run had it
  image_args images;
};

int runs_shell(runs_shell_args& a) {
  constexpr const char* cmd = "evalbox runs shell";
  auto kept = harness::find_kept_run(fs::absolute(a.results), a.run_id);
  if (!kept) {
    fmt::print(stderr, "{}: {}\n", cmd, kept.error().message);
    return kept.error().kind == error_kind::invalid_argument ? exit_usage : exit_internal;
  }
  auto loaded = load_parent_suite(a.suite);
  if (!loaded) return loaded.error();
  const std::optional<harness::suite_spec>& parent = *loaded;
  const fs::path fixture_dir = a.fixture.empty() ? kept->fixture_dir : fs::path(a.fixture);
  auto suite = harness::suite_of_fixtures("runs-shell", {fixture_dir}, parent ? &*parent : nullptr);
  if (!suite) {
    fmt::print(stderr, "{}: the run's fixture {}: {}\n(--fixture DIR names where it is now)\n", cmd,
               fixture_dir.string(), suite.error().message);
    return exit_usage;
  }
  harness::fixture_spec& f = suite->fixtures.front();
  if (f.digest != kept->fixture_digest)
    fmt::print(stderr, "{}: note: the fixture at {} has changed since the run\n", cmd,
               fixture_dir.string());
  f.setup.clear();  // the kept workspace is past its setup
  if (int rc = resolve_suite_images(*suite, a.images); rc != exit_ok) return rc;
  harness::candidate_spec c;
  c.id = "shell";
  c.adapter = "noop";
  c.where = {suite->file.string(), 0, 0};
  suite->candidates = {std::move(c)};
  fmt::print(stderr,
             "{}: a copy of run {}'s final workspace (the kept one stays as it is); the "
             "grader is at /grader; exit the shell to grade what you left\n",
             cmd, a.run_id);
  return run_shell_session(*suite, {"runs shell", true, kept->workspace});
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
  add_image_options(shell, a->images);
  shell->callback([&out, a] { out = [a] { return runs_shell(*a); }; });
}

}  // namespace evalbox::harness::cli
