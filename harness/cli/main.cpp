// evalbox: evaluate coding agents on fixtures, each run in its own sandbox.
// The composition root: the only code that names concrete adapters. Each command lives in its
// own cmd_*.cpp; this file lists them in the order a user meets them.
#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "harness/cli/commands.h"
#include "sandbox/base/log.h"

int main(int argc, char** argv) {
  using namespace evalbox::cli;
  evalbox::log::init_from_env();

  CLI::App app{
      "evalbox: evaluate coding agents on your own fixtures, each run in an isolated sandbox.\n"
      "\n"
      "  evalbox doctor                  what this host supports, and what to fix\n"
      "  evalbox gc                      reclaim what crashed runs left behind\n"
      "  evalbox validate PATH...        check fixtures and suites without running them\n"
      "  evalbox run SUITE               run fixtures x candidates x trials, graded and reported\n"
      "  evalbox runs shell RESULTS ID   a shell on a copy of a run's kept workspace\n"
      "  evalbox report RESULTS          regenerate the reports from results.jsonl\n"
      "  evalbox compare A [B]           paired comparison of candidates, with a verdict\n"
      "  evalbox merge SHARD... --into D join the results of shards into one report\n"
      "  evalbox slurm SUITE --shards N  a Slurm job array of shards, and its merge job\n"
      "  evalbox k8s SUITE --shards N    a Kubernetes Indexed Job of shards, and its merge\n"
      "  evalbox fixture test DIR...     is the fixture trustworthy? (oracle passes, noop fails)\n"
      "  evalbox fixture new NAME        scaffold a fixture to edit\n"
      "  evalbox fixture shell DIR       enter it as its agent starts, solve it, see the verdict\n"
      "  evalbox sandbox exec -- CMD     run CMD in a throwaway sandbox over --workspace DIR\n"
      "  evalbox sandbox shell           an interactive shell in one, to look around\n"
      "  evalbox image import REF        unpack an OCI/docker image into the image store\n"
      "  evalbox import swebench FILE    SWE-bench-style instances -> fixtures and a suite\n",
      "evalbox"};
  app.footer("Each command explains itself with --help; docs/cli.md is the whole reference.");
  app.require_subcommand(1);
  app.set_version_flag("--version", "evalbox 0.1.0");

  action selected;
  register_doctor(app, selected);    // host features and hints
  register_sandbox(app, selected);   // a command or a shell in a throwaway sandbox
  register_gc(app, selected);        // reclaim what crashed runs left behind
  register_run(app, selected);       // the batch evaluation
  register_report(app, selected);    // reports regenerated from results.jsonl
  register_compare(app, selected);   // paired comparison across or within results
  register_merge(app, selected);     // shards' results joined into one
  register_slurm(app, selected);     // a Slurm job array of shards, and its merge
  register_k8s(app, selected);       // a Kubernetes Indexed Job of shards, and its merge
  register_validate(app, selected);  // fixtures and suites, checked without running
  register_fixture(app, selected);   // fixture authoring: new, shell, test
  register_runs(app, selected);      // finished runs: a shell on a kept workspace
  register_image(app, selected);     // the image store: import, ls, rm
  register_import(app, selected);    // benchmarks in other formats, as fixtures

  // Hidden: the reference docs/cli.md embeds, generated from the definitions above so that the
  // page cannot drift (scripts/check-docs compares the two; --fix rewrites the page).
  app.add_flag_callback(
         "--cli-reference",
         [&app] {
           fmt::print("{}", cli_reference(app));
           throw CLI::Success();
         },
         "print the command-line reference of docs/cli.md (Markdown)")
      ->group("");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? exit_ok : exit_usage;
  }
  if (!selected) return exit_usage;
  try {
    return selected();
  } catch (const std::exception& e) {
    evalbox::log::error("internal error: {}", e.what());
    return exit_internal;
  }
}
