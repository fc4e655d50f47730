// The jobs that run a suite's shards on the schedulers people have, as text to submit: a Slurm
// job array and its merge job (batch scripts), a Kubernetes Indexed Job and its merge Job
// (manifests). Pure text generation from plain options: nothing is read or run here, so the
// output is the same for the same options (golden files test it). docs/scale-out.md walks
// through both.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "base/json.h"

namespace evalbox::harness::scale {

// The merge job's condition: after every shard ended however it ended (and merging with
// --partial, so the report says what is missing), or only after every shard succeeded.
enum class merge_after { any, ok };

struct slurm_options {
  std::string suite_name;
  std::filesystem::path suite;      // absolute, as the nodes see it
  std::filesystem::path results;    // the results root, absolute, on a filesystem nodes share
  std::filesystem::path evalbox;    // the evalbox binary, absolute, as the nodes see it
  int shards = 1;                   // N: array indices 0..N-1
  int parallel = 0;                 // tasks at once (%M); 0: as many as Slurm gives
  int concurrency = 1;              // runs at once per shard (-j), and --cpus-per-task
  std::string partition;            // empty: the cluster's default
  std::optional<uint64_t> time_ms;  // per shard task; unset: the partition's default
  merge_after after = merge_after::any;
  // An images.lock every shard runs with (--images-lock): the registry tags pinned once, at
  // submission, so that no shard sees a tag that moved meanwhile. Empty: none.
  std::filesystem::path images_lock;
};

struct slurm_scripts {
  std::string shard;  // the job array: one task per shard
  std::string merge;  // the merge job, submitted with --dependency on the array
};

// `results` goes into #SBATCH lines, which Slurm does not parse as shell: it must be a path
// without spaces, quotes or other characters a shell would treat specially.
bool slurm_safe_path(std::string_view path);

slurm_scripts slurm_jobs(const slurm_options& o);

// Slurm's --time from milliseconds, rounded up to a whole minute: "MM", "HH:MM:SS" or
// "D-HH:MM:SS" ("30" is 30 minutes to Slurm).
std::string slurm_time(uint64_t ms);

// `text` as one word for sh: single-quoted when it needs it.
std::string shell_quote(std::string_view text);

struct k8s_options {
  std::string suite_name;
  std::string suite_in_pod;   // the suite file's path inside the container
  std::string image;          // an image with evalbox (scripts/package builds one)
  int shards = 1;             // completions
  int parallel = 0;           // parallelism; 0: every shard at once
  int concurrency = 1;        // runs at once per shard (-j), and the CPU request
  std::string results_claim;  // the PersistentVolumeClaim the results go to (ReadWriteMany)
  int backoff_per_index = 1;  // retries of one shard's pod
  int run_as_user = 1000;     // evalbox runs unprivileged in the pod
  merge_after after = merge_after::any;
};

// The job name both manifests derive theirs from: "evalbox-" and the suite name made a DNS
// label (lower case, [a-z0-9-], at most 40 characters so that pod names stay within 63).
std::string k8s_job_name(std::string_view suite_name);

// The Indexed Job and the merge Job, as JSON (what the tests validate) ...
json k8s_shard_job(const k8s_options& o);
json k8s_merge_job(const k8s_options& o);
// ... and as the YAML written to disk, with a comment block on top.
std::string to_yaml(const json& manifest, std::string_view comment);

}  // namespace evalbox::harness::scale
