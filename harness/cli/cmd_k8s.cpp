// `evalbox k8s SUITE --shards N --image IMG`: the manifests of a Kubernetes Indexed Job that
// runs the suite's shards and of the Job that merges them.
#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "base/fs.h"
#include "harness/cli/commands.h"
#include "harness/cli/registry.h"
#include "harness/cli/suite_command.h"
#include "harness/fixture/load.h"
#include "harness/scale/write_jobs.h"

namespace evalbox::harness::cli {

namespace {

struct k8s_args {
  std::string suite;
  int shards = 0;
  std::string image;
  int parallel = 0;
  std::string results_claim = "evalbox-results";
  std::string suite_in_pod;
  int concurrency = 0;
  std::string merge_after = "any";
  int backoff_per_index = 1;
  int run_as_user = 1000;
  std::string out = ".";
};

int k8s_command(const k8s_args& a) {
  auto suite = load_runnable_suite(a.suite);
  if (!suite) return suite.error();
  harness::scale::k8s_options o;
  o.suite_name = suite->name;
  std::error_code ec;
  o.suite_in_pod = a.suite_in_pod.empty()
                       ? normalize(std::filesystem::absolute(a.suite, ec)).string()
                       : a.suite_in_pod;
  o.image = a.image;
  o.shards = a.shards;
  o.parallel = a.parallel;
  o.concurrency = a.concurrency > 0 ? a.concurrency : suite->concurrency;
  o.results_claim = a.results_claim;
  o.backoff_per_index = a.backoff_per_index;
  o.run_as_user = a.run_as_user;
  o.after =
      a.merge_after == "ok" ? harness::scale::merge_after::ok : harness::scale::merge_after::any;
  auto files = harness::scale::write_k8s_jobs(o, a.out);
  if (!files) {
    fmt::print(stderr, "{}\n", files.error().message);
    return exit_internal;
  }
  const std::string name = harness::scale::k8s_job_name(o.suite_name);
  const auto& [shard_file, merge_file] = *files;
  fmt::print(stderr,
             "evalbox k8s: wrote {} (an Indexed Job of {} shard(s)) and {} (the merge); the "
             "claim {} must be ReadWriteMany when shards run on several nodes\n",
             shard_file.string(), o.shards, merge_file.string(), o.results_claim);
  fmt::print(
      "kubectl apply -f {}\nkubectl wait job/{} --for=condition=Complete --timeout=24h{}\n"
      "kubectl apply -f {}\n",
      shard_file.string(), name,
      o.after == harness::scale::merge_after::any
          ? "  # if it ends Failed, apply the merge anyway: it merges with --partial"
          : "",
      merge_file.string());
  return exit_ok;
}

}  // namespace

void register_k8s(CLI::App& app, action& out) {
  auto a = std::make_shared<k8s_args>();
  auto* cmd = app.add_subcommand(
      "k8s",
      "Write the manifests of a Kubernetes Indexed Job that runs a suite as N shards (evalbox "
      "run --shard auto/N, K from JOB_COMPLETION_INDEX, each into /results/SUITE/shards/K on "
      "a PersistentVolumeClaim) and of the Job that merges them (evalbox merge).\n\n"
      "The pods run evalbox unprivileged in a user namespace of their own (hostUsers: false) "
      "with the allowances it needs to sandbox (docs/scale-out.md says what each buys); "
      "each shard runs evalbox doctor and one command in the sandbox first.\n\n"
      "Exit status: 0 written; 64 invalid suite or options; 70 internal error.\n\n"
      "Example: evalbox k8s suite.yaml --shards 8 --image registry.example/evalbox:0.1.0");
  cmd->add_option("suite", a->suite, "the suite file (schema evalbox.suite.v1)")->required();
  cmd->add_option("--shards", a->shards, "N: the Job's completions, one shard each")
      ->required()
      ->check(CLI::Range(1, 100'000));
  cmd->add_option("--image", a->image, "a container image with evalbox (scripts/package)")
      ->required();
  cmd->add_option("--parallel", a->parallel, "pods at once (parallelism; default: every shard)")
      ->check(CLI::Range(1, 100'000));
  cmd->add_option("--results-claim", a->results_claim,
                  "the PersistentVolumeClaim mounted at /results")
      ->capture_default_str();
  cmd->add_option("--suite-in-pod", a->suite_in_pod,
                  "the suite file's path inside the image (default: SUITE's absolute path)");
  cmd->add_option("-j,--concurrency", a->concurrency,
                  "runs at once per shard, and the pod's CPU request (default: the suite's)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--merge-after", a->merge_after,
                  "any: the merge takes what the shards left, with --partial; ok: only a "
                  "complete set")
      ->check(CLI::IsMember({"any", "ok"}))
      ->capture_default_str();
  cmd->add_option("--backoff-per-index", a->backoff_per_index,
                  "retries of one shard's pod (backoffLimitPerIndex)")
      ->check(CLI::Range(0, 100))
      ->capture_default_str();
  cmd->add_option("--run-as-user", a->run_as_user, "the uid evalbox runs as in the pod")
      ->check(CLI::Range(1, 2'000'000'000))
      ->capture_default_str();
  cmd->add_option("--out", a->out, "where the manifests go")->capture_default_str();
  cmd->callback([&out, a] { out = [a] { return k8s_command(*a); }; });
}

}  // namespace evalbox::harness::cli
