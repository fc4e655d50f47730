// Slurm batch scripts and Kubernetes manifests for a suite's shards (see jobs.h).
#include "harness/scale/jobs.h"

#include <fmt/format.h>

#include <algorithm>

namespace evalbox::harness::scale {

namespace {

// Exit statuses of `evalbox run` that mean the shard did its work: 0 every run passed, 1 a
// task failed, 2 an agent or host execution failed, 3 a grader failed — each run is recorded
// either way, and the report counts them. Anything else (invalid configuration, an internal
// error, a signal) fails the task, so that the scheduler shows it and may retry it.
constexpr std::string_view shard_done_statuses = "0|1|2|3";

std::string merge_condition_comment(merge_after after) {
  return after == merge_after::any
             ? "# It runs after every shard ended, however it ended (afterany), and merges with\n"
               "# --partial: a shard that failed leaves its runs missing, and the reports say how\n"
               "# many. Requeue that shard, then run this job again: merging is idempotent.\n"
             : "# It runs only when every shard succeeded (afterok): the merge is complete or not\n"
               "# made. If a shard fails, this job never starts (scancel it), requeue the shard\n"
               "# and submit this job again.\n";
}

}  // namespace

std::string shell_quote(std::string_view text) {
  bool plain = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '/' ||
           c == '.' || c == '_' || c == '-' || c == '+' || c == ':' || c == '=' || c == ',' ||
           c == '@';
  });
  if (plain) return std::string(text);
  std::string out = "'";
  for (char c : text) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

bool slurm_safe_path(std::string_view path) {
  return !path.empty() && shell_quote(path) == path && path.find('%') == std::string_view::npos;
}

std::string slurm_time(uint64_t ms) {
  uint64_t minutes = std::max<uint64_t>(1, (ms + 59'999) / 60'000);
  uint64_t days = minutes / (24 * 60), hours = minutes / 60 % 24, mins = minutes % 60;
  if (days > 0) return fmt::format("{}-{:02}:{:02}:00", days, hours, mins);
  if (hours > 0) return fmt::format("{:02}:{:02}:00", hours, mins);
  return fmt::format("{}", mins);
}

slurm_scripts slurm_jobs(const slurm_options& o) {
  const std::string results = o.results.string();
  const std::string logs = (o.results / "slurm").string();
  const std::string evalbox = shell_quote(o.evalbox.string());
  std::string common;
  if (!o.partition.empty()) common += fmt::format("#SBATCH --partition={}\n", o.partition);

  slurm_scripts s;
  s.shard = fmt::format(
      "#!/bin/bash\n"
      "# The shards of evalbox suite '{name}' as a Slurm job array, written by `evalbox slurm`.\n"
      "# Task K runs `evalbox run --shard auto/{n}` (K from SLURM_ARRAY_TASK_ID) into\n"
      "# {results}/shards/K; a requeued or resubmitted task resumes where it stopped.\n"
      "# Needs no root and no daemon on the nodes, only unprivileged user namespaces\n"
      "# (evalbox doctor checks; docs/scale-out.md).\n"
      "#SBATCH --job-name=evalbox-{name}\n"
      "#SBATCH --array=0-{last}{throttle}\n"
      "#SBATCH --cpus-per-task={cpus}\n"
      "{common}{time}"
      "#SBATCH --output={logs}/shard-%A-%a.out\n"
      "#SBATCH --open-mode=append\n"
      "set -u\n"
      "evalbox={evalbox}\n"
      "# Run state (workspaces, locks) stays on the node: never on a shared filesystem.\n"
      "export EVALBOX_STATE_DIR=\"${{EVALBOX_STATE_DIR:-${{TMPDIR:-/tmp}}/evalbox-state-$(id "
      "-u)}}\"\n"
      "export EVALBOX_SHARDS={n}\n"
      "# A node that cannot sandbox fails its shard here, with the reason, rather than\n"
      "# recording every run as an error: doctor probes the kernel's features, and one\n"
      "# command in the sandbox proves the launch (a step doctor does not probe, such as\n"
      "# sethostname or a mount, may be refused by a security profile).\n"
      "probe=$(mktemp -d)\n"
      "if ! \"$evalbox\" doctor >&2 ||\n"
      "   ! \"$evalbox\" sandbox exec --workspace \"$probe\" -- /bin/true >&2; then\n"
      "  echo \"evalbox: node $(hostname) cannot run the evalbox sandbox (see above);\" \\\n"
      "    \"shard ${{SLURM_ARRAY_TASK_ID:-?}} of {n} fails\" >&2\n"
      "  rmdir \"$probe\"\n"
      "  exit 1\n"
      "fi\n"
      "rmdir \"$probe\"\n"
      "\"$evalbox\" run {suite} --results {qresults} --shard auto/{n} -j {cpus}{lock}\n"
      "status=$?\n"
      "# 0-3: every run of the shard is recorded (1-3 say some failed or errored: the report\n"
      "# counts them); anything else means the shard did not do its work.\n"
      "case $status in\n"
      "  {done}) exit 0 ;;\n"
      "  *) echo \"evalbox: shard ${{SLURM_ARRAY_TASK_ID:-?}} of {n} stopped (exit $status)\" >&2; "
      "exit \"$status\" ;;\n"
      "esac\n",
      fmt::arg("name", o.suite_name), fmt::arg("n", o.shards), fmt::arg("results", results),
      fmt::arg("last", o.shards - 1),
      fmt::arg("throttle", o.parallel > 0 ? fmt::format("%{}", o.parallel) : std::string()),
      fmt::arg("cpus", std::max(1, o.concurrency)), fmt::arg("common", common),
      fmt::arg("time", o.time_ms ? fmt::format("#SBATCH --time={}\n", slurm_time(*o.time_ms)) : ""),
      fmt::arg("logs", logs), fmt::arg("evalbox", evalbox),
      fmt::arg("suite", shell_quote(o.suite.string())), fmt::arg("qresults", shell_quote(results)),
      fmt::arg("lock", o.images_lock.empty()
                           ? std::string()
                           : " --images-lock " + shell_quote(o.images_lock.string())),
      fmt::arg("done", shard_done_statuses));

  s.merge = fmt::format(
      "#!/bin/bash\n"
      "# The merge job of evalbox suite '{name}', written by `evalbox slurm`: joins the shards'\n"
      "# results into {results} (report.md, report.html, summary.json, junit.xml).\n"
      "# Submit it after the array: sbatch --dependency={dep}:ARRAY_JOB_ID merge.sbatch\n"
      "{why}"
      "#SBATCH --job-name=evalbox-{name}-merge\n"
      "#SBATCH --cpus-per-task=1\n"
      "{common}"
      "#SBATCH --output={logs}/merge-%j.out\n"
      "set -u\n"
      "evalbox={evalbox}\n"
      "results={qresults}\n"
      "shards=()\n"
      "for k in $(seq 0 {last}); do\n"
      "  # A shard whose node could not sandbox wrote nothing: its runs are missing.\n"
      "  [ -f \"$results/shards/$k/plan.json\" ] && shards+=(\"$results/shards/$k\")\n"
      "done\n"
      "if [ ${{#shards[@]}} -eq 0 ]; then\n"
      "  echo \"evalbox: no shard of {name} wrote results (see {logs}/shard-*.out)\" >&2\n"
      "  exit 1\n"
      "fi\n"
      "exec \"$evalbox\" merge \"${{shards[@]}}\" --into \"$results\"{partial}\n",
      fmt::arg("name", o.suite_name), fmt::arg("results", results),
      fmt::arg("dep", o.after == merge_after::any ? "afterany" : "afterok"),
      fmt::arg("why", merge_condition_comment(o.after)), fmt::arg("common", common),
      fmt::arg("logs", logs), fmt::arg("evalbox", evalbox),
      fmt::arg("qresults", shell_quote(results)), fmt::arg("last", o.shards - 1),
      fmt::arg("partial", o.after == merge_after::any ? " --partial" : ""));
  return s;
}

// ---- Kubernetes ----

std::string k8s_job_name(std::string_view suite_name) {
  std::string label;
  for (char c : suite_name) {
    char l = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    bool ok = (l >= 'a' && l <= 'z') || (l >= '0' && l <= '9');
    if (ok)
      label += l;
    else if (!label.empty() && label.back() != '-')
      label += '-';
  }
  if (label.size() > 40) label.resize(40);
  while (!label.empty() && label.back() == '-') label.pop_back();
  return label.empty() ? "evalbox" : "evalbox-" + label;
}

namespace {

constexpr std::string_view results_mount = "/results";
constexpr std::string_view state_mount = "/var/lib/evalbox-state";

json labels(const k8s_options& o, std::string_view role) {
  return {{"app.kubernetes.io/name", "evalbox"},
          {"app.kubernetes.io/component", role},
          {"evalbox/suite", k8s_job_name(o.suite_name)}};
}

// The pod around one evalbox process. What each field buys is in docs/scale-out.md
// ("Kubernetes: what the pod needs"); in short, evalbox makes its own user, mount and pid
// namespaces for every run, unprivileged, which a default pod forbids in three ways.
json pod_template(const k8s_options& o, std::string_view role, json container) {
  container["securityContext"] = {
      // The container's /proc has masked paths (mounts over /proc/kcore, ...); the kernel
      // refuses a new /proc for the run's pid namespace under a masked one.
      {"procMount", "Unmasked"},
      {"allowPrivilegeEscalation", false},
      {"capabilities", {{"drop", json::array({"ALL"})}}},
      {"runAsNonRoot", true}};
  container["volumeMounts"] = json::array({{{"name", "results"}, {"mountPath", results_mount}},
                                           {{"name", "state"}, {"mountPath", state_mount}}});
  return {{"metadata", {{"labels", labels(o, role)}}},
          {"spec",
           {{"restartPolicy", "Never"},
            // A user namespace for the pod: required for procMount Unmasked, and the pod's
            // uid 0 is nobody on the node.
            {"hostUsers", false},
            {"securityContext",
             {{"runAsUser", o.run_as_user},
              {"runAsGroup", o.run_as_user},
              {"fsGroup", o.run_as_user},
              // The runtime's default seccomp and AppArmor profiles deny unshare(CLONE_NEWUSER)
              // and mount; evalbox applies a seccomp filter and Landlock of its own per run.
              {"seccompProfile", {{"type", "Unconfined"}}},
              {"appArmorProfile", {{"type", "Unconfined"}}}}},
            {"containers", json::array({std::move(container)})},
            {"volumes", json::array({{{"name", "results"},
                                      {"persistentVolumeClaim", {{"claimName", o.results_claim}}}},
                                     {{"name", "state"}, {"emptyDir", json::object()}}})}}}};
}

std::string results_in_pod(const k8s_options& o) {
  return fmt::format("{}/{}", results_mount, o.suite_name);
}

}  // namespace

json k8s_shard_job(const k8s_options& o) {
  std::string script = fmt::format(
      "# doctor probes the kernel's features; one command in the sandbox proves the launch\n"
      "# (the runtime's profiles may refuse a step doctor does not probe).\n"
      "probe=$(mktemp -d)\n"
      "{{ evalbox doctor && evalbox sandbox exec --workspace \"$probe\" -- /bin/true; }} >&2 ||\n"
      "  {{ echo \"evalbox: this pod cannot run the evalbox sandbox (see above)\" >&2; exit 1; }}\n"
      "rmdir \"$probe\"\n"
      "evalbox run {suite} --results {results} --shard auto/{n} -j {j}\n"
      "status=$?\n"
      "# 0-3: every run of the shard is recorded; anything else fails the index.\n"
      "case $status in {done}) exit 0 ;; *) exit \"$status\" ;; esac\n",
      fmt::arg("suite", shell_quote(o.suite_in_pod)),
      fmt::arg("results", shell_quote(results_in_pod(o))), fmt::arg("n", o.shards),
      fmt::arg("j", std::max(1, o.concurrency)), fmt::arg("done", shard_done_statuses));
  json container = {
      {"name", "evalbox"},
      {"image", o.image},
      {"command", json::array({"/bin/sh", "-c", script})},
      {"env", json::array({{{"name", "EVALBOX_SHARDS"}, {"value", std::to_string(o.shards)}},
                           {{"name", "EVALBOX_STATE_DIR"}, {"value", state_mount}}})},
      {"resources", {{"requests", {{"cpu", std::to_string(std::max(1, o.concurrency))}}}}}};
  json spec = {{"completionMode", "Indexed"},
               {"completions", o.shards},
               {"parallelism", o.parallel > 0 ? std::min(o.parallel, o.shards) : o.shards},
               // Retries per shard (each index on its own) rather than for the whole job.
               {"backoffLimitPerIndex", o.backoff_per_index},
               {"template", pod_template(o, "shard", std::move(container))}};
  return {{"apiVersion", "batch/v1"},
          {"kind", "Job"},
          {"metadata", {{"name", k8s_job_name(o.suite_name)}, {"labels", labels(o, "shard")}}},
          {"spec", std::move(spec)}};
}

json k8s_merge_job(const k8s_options& o) {
  std::string script = fmt::format(
      "results={results}\n"
      "set --\n"
      "for k in $(seq 0 {last}); do\n"
      "  [ -f \"$results/shards/$k/plan.json\" ] && set -- \"$@\" \"$results/shards/$k\"\n"
      "done\n"
      "[ $# -gt 0 ] || {{ echo \"evalbox: no shard wrote results\" >&2; exit 1; }}\n"
      "exec evalbox merge \"$@\" --into \"$results\"{partial}\n",
      fmt::arg("results", shell_quote(results_in_pod(o))), fmt::arg("last", o.shards - 1),
      fmt::arg("partial", o.after == merge_after::any ? " --partial" : ""));
  json container = {{"name", "evalbox-merge"},
                    {"image", o.image},
                    {"command", json::array({"/bin/sh", "-c", script})}};
  json tmpl = pod_template(o, "merge", std::move(container));
  // Merging starts no sandbox: the pod needs none of the shard's allowances.
  tmpl["spec"].erase("hostUsers");
  tmpl["spec"]["securityContext"].erase("appArmorProfile");
  tmpl["spec"]["securityContext"]["seccompProfile"] = {{"type", "RuntimeDefault"}};
  tmpl["spec"]["containers"][0]["securityContext"].erase("procMount");
  return {{"apiVersion", "batch/v1"},
          {"kind", "Job"},
          {"metadata",
           {{"name", k8s_job_name(o.suite_name) + "-merge"}, {"labels", labels(o, "merge")}}},
          {"spec", {{"backoffLimit", 2}, {"template", std::move(tmpl)}}}};
}

namespace {

// Scalars in JSON form: a JSON string is a YAML double-quoted scalar, so nothing is ever
// read back as another type (a name "yes" or "0123" stays a string).
void yaml_value(std::string& out, const json& v, int indent);

// Keys as plain scalars where they can be (every Kubernetes key can).
std::string key_text(const std::string& key) {
  bool plain = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '/' || c == '_' || c == '-';
  });
  return plain && key.front() != '-' ? key : json(key).dump();
}

bool is_inline(const json& v) { return !v.is_structured() || v.empty(); }

std::string scalar(const json& v) {
  if (v.is_object()) return "{}";
  if (v.is_array()) return "[]";
  return v.dump();
}

// A string with newlines as a literal block: a shell script stays readable.
bool is_block(const json& v) {
  return v.is_string() && v.get_ref<const std::string&>().find('\n') != std::string::npos;
}

void block(std::string& out, const std::string& text, int indent) {
  out += text.ends_with('\n') ? "|\n" : "|-\n";
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + start, end - start);
    if (!line.empty()) out += std::string(static_cast<size_t>(indent), ' ');
    out += line;
    out += '\n';
    start = end + 1;
  }
}

void yaml_value(std::string& out, const json& v, int indent) {
  const std::string pad(static_cast<size_t>(indent), ' ');
  if (v.is_object()) {
    for (const auto& [key, item] : v.items()) {
      out += pad + key_text(key) + ":";
      if (is_block(item)) {
        out += ' ';
        block(out, item.get_ref<const std::string&>(), indent + 2);
      } else if (is_inline(item)) {
        out += " " + scalar(item) + "\n";
      } else {
        out += "\n";
        yaml_value(out, item, indent + 2);
      }
    }
  } else if (v.is_array()) {
    for (const auto& item : v) {
      if (is_block(item)) {
        out += pad + "- ";
        block(out, item.get_ref<const std::string&>(), indent + 2);
      } else if (is_inline(item)) {
        out += pad + "- " + scalar(item) + "\n";
      } else {
        // The first line of the item goes after "- "; the rest indent under it.
        std::string inner;
        yaml_value(inner, item, indent + 2);
        out += pad + "- " + inner.substr(static_cast<size_t>(indent) + 2);
      }
    }
  } else {
    out += pad + scalar(v) + "\n";
  }
}

}  // namespace

std::string to_yaml(const json& manifest, std::string_view comment) {
  std::string out;
  size_t start = 0;
  while (start < comment.size()) {
    size_t end = comment.find('\n', start);
    if (end == std::string_view::npos) end = comment.size();
    std::string_view line = comment.substr(start, end - start);
    out += line.empty() ? "#\n" : fmt::format("# {}\n", line);
    start = end + 1;
  }
  yaml_value(out, manifest, 0);
  return out;
}

}  // namespace evalbox::harness::scale
