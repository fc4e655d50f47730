// Scheduler jobs written and submitted (see write_jobs.h).
#include "harness/scale/write_jobs.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <utility>

#include "base/fs.h"
#include "sandbox/launch/host_program.h"

namespace evalbox::harness::scale {

namespace fs = std::filesystem;

namespace {

status write_both(const job_files& files, const std::string& shard, const std::string& merge,
                  mode_t mode) {
  for (const auto& [file, text] : {std::pair{files.shard, shard}, {files.merge, merge}})
    EB_TRY(write_file_atomic(file, text, mode));
  return {};
}

}  // namespace

result<job_files> write_slurm_jobs(const slurm_options& o, const fs::path& out) {
  for (const auto& dir : {out, o.results / "slurm"}) EB_TRY(make_dirs(dir));
  const job_files files{out / "shard.sbatch", out / "merge.sbatch"};
  const slurm_scripts scripts = slurm_jobs(o);
  EB_TRY(write_both(files, scripts.shard, scripts.merge, 0755));
  return files;
}

result<job_files> write_k8s_jobs(const k8s_options& o, const fs::path& out) {
  EB_TRY(make_dirs(out));
  const std::string name = k8s_job_name(o.suite_name);
  const job_files files{out / (name + ".yaml"), out / (name + "-merge.yaml")};
  const std::string shard = to_yaml(
      k8s_shard_job(o),
      fmt::format("The shards of evalbox suite '{}': a Kubernetes Indexed Job of {} completions, "
                  "written by `evalbox k8s`.\nPod K runs `evalbox run --shard auto/{}` (K from "
                  "JOB_COMPLETION_INDEX) into /results/{}/shards/K\non the claim {}. The pod's "
                  "security context is what evalbox needs to sandbox\nunprivileged: "
                  "docs/scale-out.md says what each field buys.",
                  o.suite_name, o.shards, o.shards, o.suite_name, o.results_claim));
  const std::string merge = to_yaml(
      k8s_merge_job(o),
      fmt::format("The merge of evalbox suite '{}', written by `evalbox k8s`: apply it after "
                  "job/{} {}.\nIt joins /results/{}/shards/* into /results/{}.",
                  o.suite_name, name,
                  o.after == merge_after::any
                      ? "ended (complete or failed): it merges with --partial"
                      : "completed",
                  o.suite_name, o.suite_name));
  EB_TRY(write_both(files, shard, merge, 0644));
  return files;
}

std::string_view slurm_dependency(merge_after after) {
  return after == merge_after::any ? "afterany" : "afterok";
}

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

result<slurm_submission> submit_slurm_jobs(const job_files& files, merge_after after) {
  slurm_submission s;
  s.array = EB_TRY(sbatch({files.shard.string()}));
  auto merge = sbatch(
      {fmt::format("--dependency={}:{}", slurm_dependency(after), s.array), files.merge.string()});
  if (!merge)
    return make_error(merge.error().kind,
                      "the array is job {}, but the merge job was not submitted: {}", s.array,
                      merge.error().message);
  s.merge = std::move(*merge);
  return s;
}

}  // namespace evalbox::harness::scale
