// `evalbox slurm SUITE --shards N`: the batch scripts of a Slurm job array that runs the suite's
// shards and of the merge job after it; with --submit, submits both with sbatch.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>

#include "harness/cli/commands.h"
#include "harness/cli/registry.h"
#include "harness/cli/session.h"
#include "harness/fixture/load.h"
#include "harness/scale/jobs.h"
#include "sandbox/base/fs.h"
#include "sandbox/base/log.h"
#include "sandbox/base/units.h"
#include "sandbox/launch/host_program.h"

namespace evalbox::cli {

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

// Runs `sbatch --parsable ARGS...` and returns the job id it prints ("id" or "id;cluster").
// The scheduler's own client, as the user would run it: found on evalbox's PATH, with evalbox's
// environment (SLURM_* settings), in evalbox's process group, its messages on evalbox's stderr.
result<std::string> sbatch(const std::vector<std::string>& args) {
  sandbox::host_program p;
  p.argv = {"sbatch", "--parsable"};
  p.argv.insert(p.argv.end(), args.begin(), args.end());
  p.inherit_env = true;
  p.own_process_group = false;
  p.stderr_to = sandbox::host_output::inherit;
  auto r = sandbox::run_host_program(p);
  if (!r)
    return std::unexpected(
        std::move(r).error().with_context("run sbatch (is Slurm's client installed and on PATH?)"));
  if (r->exit_code != 0)
    return make_error(error_kind::io, "sbatch {} failed (exit {}; its message is above)",
                      fmt::join(args, " "), r->exit_code);
  const std::string& out = r->output;
  std::string id = out.substr(0, out.find_first_of(";\n"));
  if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos)
    return make_error(error_kind::io, "sbatch printed '{}', not a job id", out);
  return id;
}

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

  const std::filesystem::path out = a.out.empty() ? o.results / "slurm" : absolute_path(a.out);
  auto scripts = harness::scale::slurm_jobs(o);
  // Slurm does not create the directory of --output: a job without it fails with no log.
  for (const auto& dir : {out, o.results / "slurm"}) {
    if (auto made = make_dirs(dir); !made) {
      fmt::print(stderr, "{}\n", made.error().message);
      return exit_internal;
    }
  }
  const auto shard_file = out / "shard.sbatch", merge_file = out / "merge.sbatch";
  for (const auto& [file, text] :
       {std::pair{shard_file, scripts.shard}, {merge_file, scripts.merge}}) {
    if (auto w = write_file_atomic(file, text, 0755); !w) {
      fmt::print(stderr, "{}\n", w.error().message);
      return exit_internal;
    }
  }
  const char* dep = o.after == harness::scale::merge_after::any ? "afterany" : "afterok";
  fmt::print(stderr,
             "evalbox slurm: wrote {} (a job array of {} shard(s){}) and {} (the merge, {}); "
             "results go to {}: a filesystem every node must share\n",
             shard_file.string(), o.shards,
             o.parallel > 0 ? fmt::format(", at most {} at once", o.parallel) : "",
             merge_file.string(), dep, o.results.string());
  if (!a.submit) {
    fmt::print("array=$(sbatch --parsable {})\nsbatch --dependency={}:${{array%%;*}} {}\n",
               shard_file.string(), dep, merge_file.string());
    return exit_ok;
  }
  auto array = sbatch({shard_file.string()});
  if (!array) {
    fmt::print(stderr, "evalbox slurm: {}\n", array.error().message);
    return exit_submit_failed;
  }
  auto merge = sbatch({fmt::format("--dependency={}:{}", dep, *array), merge_file.string()});
  if (!merge) {
    fmt::print(stderr,
               "evalbox slurm: the array is job {}, but the merge job was not submitted: {}\n",
               *array, merge.error().message);
    return exit_submit_failed;
  }
  fmt::print("shards {}\nmerge {}\n", *array, *merge);
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

}  // namespace evalbox::cli
