// Shard selection from flags and the scheduler's environment (see shard.h).
#include "harness/plan/shard.h"

#include <charconv>
#include <optional>

#include <fmt/format.h>

namespace evalbox::harness {
inline namespace plan {

namespace {

constexpr int max_shards = 1'000'000;

// A whole non-negative decimal number, nothing around it.
std::optional<int> number(std::string_view text) {
  int v = 0;
  if (text.empty() || text.size() > 9) return std::nullopt;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 0) return std::nullopt;
  return v;
}

result<shard_choice> from_scheduler(int count, std::string_view count_source,
                                    const env_lookup& env) {
  struct index_var {
    const char* name;
    const char* scheduler;
  };
  // Both are checked: a Slurm job that runs a pod (or the reverse) must not pick one silently.
  std::optional<int> k;
  std::string from;
  for (index_var var : {index_var{"SLURM_ARRAY_TASK_ID", "Slurm job array"},
                        index_var{"JOB_COMPLETION_INDEX", "Kubernetes Indexed Job"}}) {
    const char* v = env(var.name);
    if (v == nullptr || *v == '\0') continue;
    auto n = number(v);
    if (!n)
      return make_error(error_kind::invalid_argument,
                        "{}={} (set by a {}) is not a shard index (a number from 0)", var.name, v,
                        var.scheduler);
    if (k && *k != *n)
      return make_error(error_kind::invalid_argument,
                        "{} says shard {} but {} says {}: run a shard under one scheduler, or "
                        "give --shard K/{} yourself",
                        from, *k, var.name, *n, count);
    if (!k) {
      k = n;
      from = var.name;
    }
  }
  if (!k)
    return make_error(error_kind::invalid_argument,
                      "{} asks for the shard index from the scheduler, but neither "
                      "SLURM_ARRAY_TASK_ID (a Slurm job array) nor JOB_COMPLETION_INDEX (a "
                      "Kubernetes Indexed Job) is set: outside a scheduler give --shard K/{}",
                      count_source, count);
  if (*k >= count)
    return make_error(error_kind::invalid_argument,
                      "{}={} but {} makes {} shard(s) (K from 0 to {}): submit the array with "
                      "indices 0-{}",
                      from, *k, count_source, count, count - 1, count - 1);
  return shard_choice{*k, count, from};
}

std::unexpected<error> bad_flag(std::string_view flag) {
  return make_error(error_kind::invalid_argument,
                    "--shard '{}': write K/N (e.g. 0/4: the first of four shards) or auto/N (K "
                    "from SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX), with 0 <= K < N <= {}",
                    flag, max_shards);
}

}  // namespace

result<shard_choice> resolve_shard(std::string_view flag, const env_lookup& env) {
  if (flag.empty()) {
    const char* n = env("EVALBOX_SHARDS");
    if (n == nullptr || *n == '\0') return shard_choice{};
    auto count = number(n);
    if (!count || *count < 1 || *count > max_shards)
      return make_error(error_kind::invalid_argument,
                        "EVALBOX_SHARDS={}: write the number of shards N (1 to {})", n, max_shards);
    return from_scheduler(*count, fmt::format("EVALBOX_SHARDS={}", *count), env);
  }
  auto slash = flag.find('/');
  if (slash == std::string_view::npos) return bad_flag(flag);
  auto count = number(flag.substr(slash + 1));
  if (!count || *count < 1 || *count > max_shards) return bad_flag(flag);
  std::string_view k = flag.substr(0, slash);
  if (k == "auto") return from_scheduler(*count, fmt::format("--shard auto/{}", *count), env);
  auto index = number(k);
  if (!index || *index >= *count) return bad_flag(flag);
  return shard_choice{*index, *count, "--shard"};
}

}  // namespace plan
}  // namespace evalbox::harness
