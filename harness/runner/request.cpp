// Building the session requests of runs and of throwaway sandboxes (see request.h).
#include "harness/runner/request.h"

#include "base/fs.h"
#include "harness/runner/runner.h"
#include "sandbox/spec/system_paths.h"

namespace evalbox::harness {
inline namespace runner {

namespace fs = std::filesystem;

namespace {

// The image's Env over `env`: HOME excepted (the managed home is where the agent's files are),
// and PATH with `path_prefix` before the image's own.
void add_image_environment(std::map<std::string, std::string>& env,
                           const sandbox::image_summary& image, std::string_view path_prefix) {
  for (const auto& kv : image.env) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    std::string name = kv.substr(0, eq), value = kv.substr(eq + 1);
    if (name == "HOME") continue;
    if (name == "PATH") value = std::string(path_prefix) + value;
    env[name] = std::move(value);
  }
}

// Where an image's own directory is seen as the workspace: its WorkingDir, else /workspace.
fs::path image_workspace(const sandbox::image_summary* image) {
  const fs::path wd = image ? fs::path(image->working_dir).lexically_normal() : fs::path();
  if (wd.empty() || wd == "/" || wd.is_relative()) return sandbox::sandbox_workspace;
  return wd;
}

}  // namespace

sandbox::resource_limits effective_limits(const limits_spec& suite, const fixture_spec& f) {
  sandbox::resource_limits l;
  limits_spec spec = suite.merged_with(f.limits);
  if (spec.wall_ms) l.wall_ms = *spec.wall_ms;
  if (spec.cpu_ms) l.cpu_ms = *spec.cpu_ms;
  if (spec.memory_bytes) l.memory_bytes = *spec.memory_bytes;
  if (spec.pids) l.pids = *spec.pids;
  if (spec.disk_bytes) l.disk_bytes = *spec.disk_bytes;
  if (spec.output_bytes) l.output_bytes = *spec.output_bytes;
  return l;
}

sandbox::network_policy to_policy(const network_spec& n) {
  sandbox::network_policy p;
  p.mode = n.mode == network_spec::mode_kind::allow ? sandbox::network_mode::allow
                                                    : sandbox::network_mode::none;
  p.allow = n.allow;
  // Only a Harbor task whose internet is allowed asks for the host's network (harbor.h): its
  // own task.toml is the opt-in, and the run record says "host (unsafe)".
  if (n.mode == network_spec::mode_kind::host) {
    p.mode = sandbox::network_mode::host;
    p.unsafe_host_network = true;
  }
  return p;
}

std::map<std::string, std::string> run_environment(const sandbox::image_summary* image) {
  auto env = base_environment();
  if (image) add_image_environment(env, *image, "/evalbox/bin:");
  return env;
}

fs::path workspace_target(const fixture_spec& fixture, const sandbox::image_summary* image) {
  if (fixture.has_workspace || !fixture.environment) return sandbox::sandbox_workspace;
  if (fixture.environment->workdir) return *fixture.environment->workdir;
  return image_workspace(image);
}

std::chrono::system_clock::time_point authorized_until(const sandbox::resource_limits& limits) {
  return std::chrono::system_clock::now() + std::chrono::hours(1) +
         std::chrono::milliseconds(limits.wall_ms * 4);
}

result<sandbox::session_request> make_session_request(const request_inputs& in) {
  const fixture_spec& fixture = in.fixture;
  const candidate_spec& cand = in.candidate;
  sandbox::session_request req;
  req.run_id = in.session_id;
  req.limits = effective_limits(in.suite_limits, fixture);
  req.authorized_until = authorized_until(req.limits);
  req.argv = in.plan.argv;
  req.env = run_environment(in.image);
  for (const auto& [k, v] : in.plan.env) req.env[k] = v;
  for (const auto& [k, v] : cand.env) req.env[k] = v;
  req.workspace.digest = fixture.digest;
  req.workspace.target = workspace_target(fixture, in.image);
  if (fixture.has_workspace)
    req.workspace.source = fixture.workspace_dir();
  else
    req.workspace.image_dir = req.workspace.target;  // the image's own directory, as it is
  if (in.image)
    req.image = sandbox::image_root{in.image->id, in.image->reference, in.image->manifest_digest};
  req.home = in.plan.home;
  for (const auto& [target, source] : cand.home_files) {
    auto content = EB_TRY(read_file(source, 1u << 20));
    req.home.files.push_back({target, std::move(content), 0644});
  }
  req.secrets = in.plan.secrets;
  req.bundles = in.plan.bundles;
  if (fixture.has_bin) req.bundles.push_back({fixture.bin_dir(), in.bin_digest, "/evalbox/bin"});
  if (!fixture.bundles.empty() &&
      (!in.stored_bundles || in.stored_bundles->size() != fixture.bundles.size()))
    return make_error(error_kind::internal, "fixture {}: its bundles were not resolved",
                      fixture.id);
  if (in.stored_bundles)
    req.bundles.insert(req.bundles.end(), in.stored_bundles->begin(), in.stored_bundles->end());
  for (const auto& m : fixture.mounts)
    req.mounts.push_back({m.source_path, m.target,
                          m.access == mount_spec::access_kind::read_only
                              ? sandbox::mount_access::read_only
                              : sandbox::mount_access::ephemeral_write,
                          m.max_bytes.value_or(0), m.source_digest});
  // Each cache as the store holds it: the read-only lower of the run's own writable view.
  if (!fixture.caches.empty() && (!in.caches || in.caches->size() != fixture.caches.size()))
    return make_error(error_kind::internal, "fixture {}: its caches were not warmed", fixture.id);
  if (in.caches)
    for (const auto& c : *in.caches)
      req.mounts.push_back({c.stored.tree, c.target, sandbox::mount_access::ephemeral_write,
                            c.max_bytes, c.stored.digest});
  req.readonly_paths = in.plan.readonly_paths;
  req.host_binds = in.plan.host_binds;
  req.protected_roots = in.protected_roots;
  if (fixture.has_grader) req.protected_roots.push_back(fixture.grader_dir());
  if (fixture.harbor) req.protected_roots.push_back(fixture.harbor->tests_dir);
  if (!in.plan.runs_fixture_solution && fixture.has_solution)
    req.protected_roots.push_back(fixture.solution_script().parent_path());
  req.network = to_policy(cand.network ? *cand.network : fixture.network);
  req.landlock = in.plan.landlock;
  return req;
}

result<sandbox::session_request> make_exec_request(const exec_request_inputs& in) {
  if (in.argv.empty()) return make_error(error_kind::invalid_argument, "no command given");
  if (in.workspace.empty() && !in.image)
    return make_error(error_kind::invalid_argument, "neither a workspace nor an image");
  sandbox::session_request r;
  r.run_id = in.session_id;
  r.authorized_until = std::chrono::system_clock::now() + std::chrono::hours(24 * 365);
  r.argv = in.argv;
  r.env = {{"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
           {"HOME", sandbox::sandbox_home},
           {"USER", "agent"}};
  if (in.image) add_image_environment(r.env, *in.image, "");
  for (const auto& [k, v] : in.passed_env) r.env[k] = v;
  r.workspace.strategy = sandbox::workspace_strategy::auto_select;
  if (!in.workspace.empty()) {
    r.workspace.source = fs::absolute(in.workspace).lexically_normal();
  } else {
    // No host directory: the image's working directory is the workspace (copy-on-write).
    r.workspace.target = image_workspace(in.image);
    r.workspace.image_dir = r.workspace.target;
  }
  if (in.image)
    r.image = sandbox::image_root{in.image->id, in.image->reference, in.image->manifest_digest};
  r.home.adapter = "sandbox";
  r.limits = in.limits;
  r.network = in.network;
  r.landlock = in.landlock;
  return r;
}

}  // namespace runner
}  // namespace evalbox::harness
