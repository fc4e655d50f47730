// `evalbox slurm SUITE --shards N`: the batch scripts of a Slurm job array that runs the suite's
// shards and of the merge job after it; with --submit, submits both with sbatch.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>

#include "base/fs.h"
#include "base/log.h"
#include "base/units.h"
#include "harness/cli/commands.h"
#include "harness/cli/registry.h"
#include "harness/cli/suite_command.h"
#include "harness/fixture/load.h"
#include "harness/scale/write_jobs.h"

namespace evalbox::harness::cli {

namespace {

// --submit: sbatch failed (or is not installed); what it said is on stderr.
constexpr int exit_submit_failed = 69;

struct slurm_args {
  std::string suite;
  int shards = 0;
  int parallel = 0;
  std::string partition;
  std::string time;
  std::string results;
  int concurrency = 0;
  std::string merge_after = "any";
  std::string evalbox;
  std::string out;
  bool submit = false;
};

std::filesystem::path absolute_path(const std::filesystem::path& p) {
  std::error_code ec;
  return normalize(std::filesystem::absolute(p, ec));
}

int slurm_command(const slurm_args& a) {
  auto suite = load_runnable_suite(a.suite);
  if (!suite) return suite.error();
  harness::scale::slurm_options o;
  o.suite_name = suite->name;
  o.suite = absolute_path(a.suite);
  o.results =
      absolute_path(a.results.empty() ? suite->results_dir : std::filesystem::path(a.results));
  if (!harness::scale::slurm_safe_path(o.results.string())) {
    fmt::print(stderr,
               "--results {}: Slurm reads the log paths below it from #SBATCH lines, which are "
               "not shell: choose a path of letters, digits and / . _ - + : , @ = only\n",
               o.results.string());
    return exit_usage;
  }
  std::error_code ec;
  o.evalbox = a.evalbox.empty() ? std::filesystem::read_symlink("/proc/self/exe", ec)
                                : absolute_path(a.evalbox);
  o.shards = a.shards;
  o.parallel = a.parallel;
  o.concurrency = a.concurrency > 0 ? a.concurrency : suite->concurrency;
  o.partition = a.partition;
  o.after =
      a.merge_after == "ok" ? harness::scale::merge_after::ok : harness::scale::merge_after::any;
  if (!a.time.empty()) {
    auto ms = parse_duration_ms(a.time);
    if (!ms) {
      fmt::print(stderr, "--time '{}': {}\n", a.time, ms.error().message);
      return exit_usage;
    }
    o.time_ms = *ms;
  }
  auto runs = harness::plan_runs(*suite, {});
  if (runs && static_cast<size_t>(o.shards) > runs->size())
    fmt::print(stderr,
               "evalbox slurm: {} shards but the plan has {} runs: {} shard(s) will have nothing "
               "to do\n",
               o.shards, runs->size(), static_cast<size_t>(o.shards) - runs->size());

  // Registry tags pinned once, here: every shard runs the same digests (images.lock).
  if (auto pinned = pin_for_elsewhere(*suite); !pinned.empty()) {
    record_images_lock(o.results, pinned);
    o.images_lock = o.results / "images.lock";
  }
  const std::filesystem::path out = a.out.empty() ? o.results / "slurm" : absolute_path(a.out);
  auto files = harness::scale::write_slurm_jobs(o, out);
  if (!files) {
    fmt::print(stderr, "{}\n", files.error().message);
    return exit_internal;
  }
  const std::string_view dep = harness::scale::slurm_dependency(o.after);
  fmt::print(stderr,
             "evalbox slurm: wrote {} (a job array of {} shard(s){}) and {} (the merge, {}); "
             "results go to {}: a filesystem every node must share\n",
             files->shard.string(), o.shards,
             o.parallel > 0 ? fmt::format(", at most {} at once", o.parallel) : "",
             files->merge.string(), dep, o.results.string());
  if (!a.submit) {
    fmt::print("array=$(sbatch --parsable {})\nsbatch --dependency={}:${{array%%;*}} {}\n",
               files->shard.string(), dep, files->merge.string());
    return exit_ok;
  }
  auto jobs = harness::scale::submit_slurm_jobs(*files, o.after);
  if (!jobs) {
    fmt::print(stderr, "evalbox slurm: {}\n", jobs.error().message);
    return exit_submit_failed;
  }
  fmt::print("shards {}\nmerge {}\n", jobs->array, jobs->merge);
  return exit_ok;
}

}  // namespace

void register_slurm(CLI::App& app, action& out) {
  auto a = std::make_shared<slurm_args>();
  auto* cmd = app.add_subcommand(
      "slurm",
      "Write the Slurm batch scripts that run a suite as a job array of N shards (evalbox run "
      "--shard auto/N, each into RESULTS/shards/K) and the merge job that joins them "
      "(evalbox merge); --submit submits both with sbatch and prints their job ids.\n\n"
      "The nodes need no root and no daemon, only unprivileged user namespaces: each shard "
      "runs evalbox doctor and one command in the sandbox first, and fails clearly on a node "
      "that cannot sandbox. RESULTS must be on a filesystem every node shares.\n\n"
      "Exit status: 0 written (and submitted); 64 invalid suite or options; 69 sbatch failed "
      "(--submit); 70 internal error.\n\n"
      "Example: evalbox slurm suite.yaml --shards 8 --parallel 4 --time 2h --submit");
  cmd->add_option("suite", a->suite, "the suite file (schema evalbox.suite.v1)")->required();
  cmd->add_option("--shards", a->shards, "N: array tasks 0..N-1, one shard each")
      ->required()
      ->check(CLI::Range(1, 1'000'000));
  cmd->add_option("--parallel", a->parallel,
                  "shards running at once (--array=...%M; default: as many as Slurm gives)")
      ->check(CLI::Range(1, 1'000'000));
  cmd->add_option("--partition", a->partition, "Slurm partition (default: the cluster's)");
  cmd->add_option("--time", a->time,
                  "time limit of each shard, e.g. 90m or 2h (default: the partition's)");
  cmd->add_option("--results", a->results,
                  "results root on a shared filesystem (default: the suite's, made absolute)");
  cmd->add_option("-j,--concurrency", a->concurrency,
                  "runs at once per shard, and its --cpus-per-task (default: the suite's)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--merge-after", a->merge_after,
                  "any: merge after every shard ended, with --partial (the report says what is "
                  "missing); ok: only after every shard succeeded")
      ->check(CLI::IsMember({"any", "ok"}))
      ->capture_default_str();
  cmd->add_option("--evalbox", a->evalbox,
                  "the evalbox binary as the nodes see it (default: this one)");
  cmd->add_option("--out", a->out, "where the scripts go (default: RESULTS/slurm)");
  cmd->add_flag("--submit", a->submit, "submit both jobs with sbatch and print their job ids");
  cmd->callback([&out, a] { out = [a] { return slurm_command(*a); }; });
}

}  // namespace evalbox::harness::cli
