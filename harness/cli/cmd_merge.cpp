// `evalbox merge SHARD_DIR... --into OUT`: the shards' results joined into one results
// directory with every report, or the list of planned runs no shard recorded.
#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "base/log.h"
#include "harness/cli/commands.h"
#include "harness/scale/merge.h"

namespace evalbox::harness::cli {

namespace {

// Planned runs are missing and --partial was not given: nothing was written.
constexpr int exit_runs_missing = 1;

struct merge_args {
  std::vector<std::string> shards;
  std::string into;
  bool partial = false;
  bool copy = false;
};

void print_gaps(const harness::scale::merge_report& m) {
  constexpr size_t shown = 5;
  for (const auto& g : m.gaps) {
    std::string where = "not given";
    if (!g.dirs.empty()) {
      where.clear();
      for (const auto& d : g.dirs) where += (where.empty() ? "" : ", ") + d.string();
    }
    fmt::print(stderr, "  shard {}/{} ({}): {} of {} run(s) missing\n", g.shard, m.plan.shard_count,
               where, g.missing, g.planned);
    for (size_t i = 0; i < g.first_missing.size() && i < shown; ++i)
      fmt::print(stderr, "    {}\n", g.first_missing[i]);
    if (g.missing > shown) fmt::print(stderr, "    ... and {} more\n", g.missing - shown);
  }
}

int merge_command(const merge_args& a) {
  harness::scale::merge_options o;
  for (const auto& s : a.shards) o.shards.emplace_back(s);
  o.into = a.into;
  o.partial = a.partial;
  o.copy = a.copy;
  auto m = harness::scale::merge_shards(o);
  if (!m) {
    fmt::print(stderr, "evalbox merge: {}\n", m.error().message);
    switch (m.error().kind) {
      case error_kind::invalid_argument:
      case error_kind::not_found:
      case error_kind::permission:
      case error_kind::busy:
        return exit_usage;
      default:
        return exit_internal;
    }
  }
  if (!m->written) {
    fmt::print(stderr,
               "evalbox merge: {} of the plan's {} runs are missing, so nothing was written:\n",
               m->missing, m->planned);
    print_gaps(*m);
    fmt::print(stderr,
               "Run the missing shards again (a shard resumes where it stopped), or merge with "
               "--partial for reports that say how many runs are missing.\n");
    return exit_runs_missing;
  }
  fmt::print(stderr,
             "evalbox merge: {} record(s) added, {} already merged or given twice; {} of the "
             "plan's {} runs recorded in {}\n",
             m->added, m->duplicates, m->recorded, m->planned, a.into);
  if (m->superseded > 0)
    fmt::print(stderr, "  {} older record(s) of rerun runs left out (the newest counts)\n",
               m->superseded);
  if (m->foreign > 0)
    fmt::print(stderr,
               "  {} record(s) of another plan left out (from before a fixture, candidate or "
               "the suite changed)\n",
               m->foreign);
  if (m->without_dir > 0)
    fmt::print(stderr, "  {} record(s) had no runs/<id>/ directory in their shard\n",
               m->without_dir);
  if (m->copied > 0)
    fmt::print(stderr,
               "  {} file(s) copied, {} hard-linked (links are made where the filesystem "
               "allows)\n",
               m->copied, m->linked);
  if (m->missing > 0) {
    fmt::print(stderr,
               "evalbox merge: --partial: {} of the plan's {} runs are missing; the reports say "
               "so:\n",
               m->missing, m->planned);
    print_gaps(*m);
  }
  if (m->summary) fmt::print("{}", harness::render_terminal_summary(*m->summary));
  fmt::print("reports: {0}/report.md {0}/report.html {0}/summary.json {0}/junit.xml\n", a.into);
  return exit_ok;
}

}  // namespace

void register_merge(CLI::App& app, action& out) {
  auto a = std::make_shared<merge_args>();
  auto* cmd = app.add_subcommand(
      "merge",
      "Join the results directories of a plan's shards (evalbox run --shard K/N or auto/N) "
      "into one results directory, and write its reports: the same summary one process would "
      "have written for the same records.\n\n"
      "Every shard must hold the plan.json of the same suite, fixtures, candidates and trials. "
      "Records are deduplicated by run id; two different records of one run are refused "
      "(both are named). Merging again, or a shard already merged, changes nothing. Run "
      "directories are hard-linked (copied across filesystems, or with --copy).\n\n"
      "Exit status: 0 merged; 1 planned runs are missing (each shard's are listed) and "
      "--partial was not given: nothing written; 64 a shard was refused; 70 internal error.\n\n"
      "Example: evalbox merge results/examples/shards/* --into results/examples");
  cmd->add_option("shards", a->shards, "the shards' results directories (RESULTS/shards/K)")
      ->required();
  cmd->add_option("--into", a->into,
                  "the merged results directory (created; may hold an earlier merge of the "
                  "same plan)")
      ->required();
  cmd->add_flag("--partial", a->partial,
                "merge even when planned runs are missing: the reports (report.md, "
                "report.html, summary.json) say how many");
  cmd->add_flag("--copy", a->copy,
                "copy run directories instead of hard-linking them (e.g. when the shards live "
                "on scratch space that will be purged)");
  cmd->callback([&out, a] { out = [a] { return merge_command(*a); }; });
}

}  // namespace evalbox::harness::cli
