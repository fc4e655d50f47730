// evalbox: evaluate coding agents on fixtures, each run in its own sandbox.
// The composition root: the only code that names concrete adapters. Each command lives in its
// own cmd_*.cpp; this file lists them in the order a user meets them.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <iterator>
#include <string_view>

#include "base/log.h"
#include "harness/cli/commands.h"

namespace {

using namespace evalbox::harness::cli;

// The overview `evalbox --help` opens with: every command, in the order a user meets them.
constexpr const char* overview =
    "evalbox: evaluate coding agents on your own fixtures, each run in an isolated sandbox.\n"
    "\n"
    "  evalbox doctor                  what this host supports, and what to fix\n"
    "  evalbox gc                      reclaim what crashed runs left behind\n"
    "  evalbox validate PATH...        check fixtures and suites without running them\n"
    "  evalbox run SUITE               run fixtures x candidates x trials, graded and reported\n"
    "  evalbox regrade RESULTS         grade recorded runs again with changed checks, no agent\n"
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
    "  evalbox session start           a sandbox that stays up for programs to drive\n"
    "  evalbox image import REF        unpack an OCI/docker image into the image store\n"
    "  evalbox bundle digest PATH      the digest a `bundles:` entry names\n"
    "  evalbox cache warm SUITE        fill the caches its fixtures name, once\n"
    "  evalbox import swebench FILE    SWE-bench-style instances -> fixtures and a suite\n";

// The commands, in the order a user meets them.
struct command {
  std::string_view name;
  void (*add)(CLI::App&, action&);
};
constexpr command commands[] = {
    {"doctor", register_doctor},      // host features and hints
    {"sandbox", register_sandbox},    // a command or a shell in a throwaway sandbox
    {"gc", register_gc},              // reclaim what crashed runs left behind
    {"run", register_run},            // the batch evaluation
    {"regrade", register_regrade},    // recorded runs graded again, no agent
    {"report", register_report},      // reports regenerated from results.jsonl
    {"compare", register_compare},    // paired comparison across or within results
    {"merge", register_merge},        // shards' results joined into one
    {"slurm", register_slurm},        // a Slurm job array of shards, and its merge
    {"k8s", register_k8s},            // a Kubernetes Indexed Job of shards, and its merge
    {"validate", register_validate},  // fixtures and suites, checked without running
    {"fixture", register_fixture},    // fixture authoring: new, shell, test
    {"runs", register_runs},          // finished runs: a shell on a kept workspace
    {"image", register_image},        // the image store: import, ls, rm
    {"bundle", register_bundle},      // content-addressed bundles: their digest
    {"cache", register_cache},        // caches: warm, ls, rm
    {"session", register_session},    // sandboxes that programs drive
    {"serve", register_serve},        // many sessions from one process
    {"import", register_import},      // benchmarks in other formats, as fixtures
};

// Defines the command named first on the command line, or every one. CLI11 builds every
// option of every command it is given before it reads an argument, which was two thirds of
// the instructions `evalbox --version` ran. Without a command named first (--help, --version,
// a typo) every one is defined, so that help and errors list them all.
void define_commands(CLI::App& app, std::string_view first, action& selected) {
  const auto named = std::find_if(std::begin(commands), std::end(commands),
                                  [&](const command& c) { return c.name == first; });
  if (named != std::end(commands))
    named->add(app, selected);
  else
    for (const command& c : commands) c.add(app, selected);
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
}

}  // namespace

int main(int argc, char** argv) {
  evalbox::log::init_from_env();
  CLI::App app{overview, "evalbox"};
  app.footer("Each command explains itself with --help; docs/cli.md is the whole reference.");
  app.require_subcommand(1);
  app.set_version_flag("--version", "evalbox 0.1.0");
  action selected;
  define_commands(app, argc > 1 ? argv[1] : "", selected);
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
