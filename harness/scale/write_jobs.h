// The scheduler jobs on disk and, for Slurm, submitted: what `evalbox slurm` and `evalbox k8s`
// do with the text jobs.h makes. The files are written atomically; submitting runs the
// scheduler's own client (sbatch) as the user would, through run_host_program.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "harness/scale/jobs.h"

namespace evalbox::harness::scale {

struct job_files {
  std::filesystem::path shard;  // the job array / Indexed Job
  std::filesystem::path merge;  // the merge job
};

// The two batch scripts (executable) in `out`, and RESULTS/slurm, where the jobs' logs go:
// Slurm does not create the directory of --output, and a job without it fails with no log.
result<job_files> write_slurm_jobs(const slurm_options& o, const std::filesystem::path& out);

// The two manifests, each with a comment block on top that says what it is, in `out`:
// <job name>.yaml and <job name>-merge.yaml.
result<job_files> write_k8s_jobs(const k8s_options& o, const std::filesystem::path& out);

// Slurm's dependency type of the merge job: "afterany" or "afterok".
std::string_view slurm_dependency(merge_after after);

// Runs `sbatch --parsable ARGS...` (found on PATH, with evalbox's environment and process
// group, its messages on evalbox's stderr) and returns the job id it prints.
result<std::string> sbatch(const std::vector<std::string>& args);

struct slurm_submission {
  std::string array;  // the shards' job id
  std::string merge;  // the merge job's id
};

// Submits the array, then the merge job depending on it. When the merge job cannot be
// submitted, the error names the array's job id, which is running without it.
result<slurm_submission> submit_slurm_jobs(const job_files& files, merge_after after);

}  // namespace evalbox::harness::scale
