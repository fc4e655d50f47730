// Which shard of the matrix this process runs: `--shard K/N`, or `--shard auto/N` (or
// EVALBOX_SHARDS=N) with K from the scheduler that started the process — a Slurm job array
// (SLURM_ARRAY_TASK_ID) or a Kubernetes Indexed Job (JOB_COMPLETION_INDEX).
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "base/error.h"

namespace evalbox::harness {
inline namespace plan {

struct shard_choice {
  int index = 0;       // K
  int count = 1;       // N
  std::string source;  // where K came from: "--shard", "SLURM_ARRAY_TASK_ID", ...; "" unsharded
};

// Reads an environment variable; nullptr when unset (std::getenv in the binary).
using env_lookup = std::function<const char*(const char* name)>;

// `flag` is the value of --shard: "" (EVALBOX_SHARDS=N decides, else no sharding), "K/N" or
// "auto/N". With auto, K comes from SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX; neither, both
// with different values, a value that is not a number, or K >= N is an invalid_argument error
// saying what to do.
result<shard_choice> resolve_shard(std::string_view flag, const env_lookup& env);

}  // namespace plan
}  // namespace evalbox::harness
