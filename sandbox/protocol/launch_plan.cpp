// JSON (de)serialization of the launch plan. Parsing is strict: a missing or mistyped field is
// an error naming it, because a plan is produced by evalbox itself and a mismatch is a bug.
#include "sandbox/protocol/launch_plan.h"

#include "base/json.h"
#include "base/json_get.h"

namespace evalbox::sandbox {
inline namespace protocol {
namespace {

// A field of the plan, with the plan named in the error.
template <class T>
result<T> get(const json& j, const char* key) {
  return EB_TRY_CTX(json_get<T>(j, key), "launch plan");
}

json overlay_json(const std::optional<launch_overlay>& o) {
  if (!o) return nullptr;
  return {{"lowers", o->lowers}, {"upper", o->upper}, {"work", o->work}};
}

// An overlay field: absent or null is none; one must have layers and an upper.
result<std::optional<launch_overlay>> overlay_from(const json& j, const char* key) {
  const json& o = json_member(j, key);
  if (o.is_null()) return std::optional<launch_overlay>{};
  launch_overlay ov;
  ov.lowers = EB_TRY(get<std::vector<std::string>>(o, "lowers"));
  ov.upper = EB_TRY(get<std::string>(o, "upper"));
  ov.work = EB_TRY(get<std::string>(o, "work"));
  if (ov.lowers.empty() || ov.upper.empty() || ov.work.empty())
    return make_error(error_kind::invalid_argument, "launch plan: {} without layers or upper", key);
  return std::optional<launch_overlay>(std::move(ov));
}

}  // namespace

json launch_plan::to_json() const {
  json mounts_j = json::array();
  for (const auto& m : mounts) {
    mounts_j.push_back({{"source", m.source.string()},
                        {"target", m.target.string()},
                        {"writable", m.writable},
                        {"is_file", m.is_file}});
  }
  json image_j = nullptr;
  if (image)
    image_j = {{"lowers", image->lowers},       {"upper", image->upper},
               {"work", image->work},           {"id", image->id},
               {"reference", image->reference}, {"manifest_digest", image->manifest_digest},
               {"layers", image->layers}};
  return json{
      {"schema", launch_plan_schema},
      {"run_id", run_id},
      {"label", label},
      {"seq", seq},
      {"host_uid", host_uid},
      {"host_gid", host_gid},
      {"root_dir", root_dir},
      {"workspace_dir", workspace_dir},
      {"workspace_target", workspace_target},
      {"home_dir", home_dir},
      {"mounts", mounts_j},
      {"argv", argv},
      {"env", env},
      {"cwd", cwd},
      {"limits",
       {{"cpu_ms", limits.cpu_ms},
        {"memory_bytes", limits.memory_bytes},
        {"pids", limits.pids},
        {"wall_ms", limits.wall_ms},
        {"disk_bytes", limits.disk_bytes},
        {"output_bytes", limits.output_bytes}}},
      {"tmp_bytes", tmp_bytes},
      {"disk_quota", disk_quota},
      {"network",
       {{"mode", to_string(network.mode)},
        {"allow", network.allow},
        {"unsafe_host_network", network.unsafe_host_network}}},
      {"landlock", landlock},
      {"inherit_stdio", inherit_stdio},
      {"stdin_path", stdin_path},
      {"terminal", terminal},
      {"stdout_path", stdout_path},
      {"stderr_path", stderr_path},
      {"binding_digest", binding_digest},
      {"hostname", hostname},
      {"image", image_j},
      {"workspace_overlay", overlay_json(workspace_overlay)},
      {"home_overlay", overlay_json(home_overlay)},
      {"serve", serve},
      {"quota_dirs", quota_dirs},
  };
}

result<launch_plan> launch_plan::from_json(const json& j) {
  if (!j.is_object()) return make_error(error_kind::invalid_argument, "launch plan: not an object");
  if (EB_TRY(get<std::string>(j, "schema")) != launch_plan_schema) {
    return make_error(error_kind::invalid_argument, "launch plan: schema is not {}",
                      launch_plan_schema);
  }
  launch_plan p;
  p.run_id = EB_TRY(get<std::string>(j, "run_id"));
  p.label = EB_TRY(get<std::string>(j, "label"));
  p.seq = EB_TRY(get<int>(j, "seq"));
  p.host_uid = EB_TRY(get<uid_t>(j, "host_uid"));
  p.host_gid = EB_TRY(get<gid_t>(j, "host_gid"));
  p.root_dir = EB_TRY(get<std::string>(j, "root_dir"));
  p.workspace_dir = EB_TRY(get<std::string>(j, "workspace_dir"));
  p.workspace_target = EB_TRY(get<std::string>(j, "workspace_target"));
  if (!p.workspace_target.starts_with("/"))
    return make_error(error_kind::invalid_argument, "launch plan: workspace_target {} not absolute",
                      p.workspace_target);
  p.home_dir = EB_TRY(get<std::string>(j, "home_dir"));
  for (const auto& m : EB_TRY(get<json>(j, "mounts"))) {
    bind_mount b;
    b.source = EB_TRY(get<std::string>(m, "source"));
    b.target = EB_TRY(get<std::string>(m, "target"));
    b.writable = EB_TRY(get<bool>(m, "writable"));
    b.is_file = EB_TRY(get<bool>(m, "is_file"));
    if (!b.target.is_absolute()) {
      return make_error(error_kind::invalid_argument, "launch plan: mount target {} not absolute",
                        b.target.string());
    }
    p.mounts.push_back(std::move(b));
  }
  p.argv = EB_TRY(get<std::vector<std::string>>(j, "argv"));
  p.serve = json_value_or(j, "serve", false);
  if (p.argv.empty() && !p.serve)
    return make_error(error_kind::invalid_argument, "launch plan: empty argv");
  if (!p.argv.empty() && p.serve)
    return make_error(error_kind::invalid_argument, "launch plan: a serving plan has no argv");
  p.env = EB_TRY((get<std::map<std::string, std::string>>(j, "env")));
  p.cwd = EB_TRY(get<std::string>(j, "cwd"));
  const json lim = EB_TRY(get<json>(j, "limits"));
  p.limits.cpu_ms = EB_TRY(get<uint64_t>(lim, "cpu_ms"));
  p.limits.memory_bytes = EB_TRY(get<uint64_t>(lim, "memory_bytes"));
  p.limits.pids = EB_TRY(get<uint64_t>(lim, "pids"));
  p.limits.wall_ms = EB_TRY(get<uint64_t>(lim, "wall_ms"));
  p.limits.disk_bytes = EB_TRY(get<uint64_t>(lim, "disk_bytes"));
  p.limits.output_bytes = EB_TRY(get<uint64_t>(lim, "output_bytes"));
  p.tmp_bytes = EB_TRY(get<uint64_t>(j, "tmp_bytes"));
  p.disk_quota = EB_TRY(get<bool>(j, "disk_quota"));
  if (j.contains("quota_dirs"))
    p.quota_dirs = EB_TRY(get<std::vector<std::string>>(j, "quota_dirs"));
  const json net = EB_TRY(get<json>(j, "network"));
  const std::string mode = EB_TRY(get<std::string>(net, "mode"));
  const auto parsed = network_mode_from(mode);
  if (!parsed)
    return make_error(error_kind::invalid_argument, "launch plan: network mode {}", mode);
  p.network.mode = *parsed;
  p.network.allow = EB_TRY(get<std::vector<std::string>>(net, "allow"));
  p.network.unsafe_host_network = EB_TRY(get<bool>(net, "unsafe_host_network"));
  p.landlock = EB_TRY(get<bool>(j, "landlock"));
  p.inherit_stdio = EB_TRY(get<bool>(j, "inherit_stdio"));
  p.stdin_path = EB_TRY(get<std::string>(j, "stdin_path"));
  p.terminal = json_value_or(j, "terminal", false);
  p.stdout_path = EB_TRY(get<std::string>(j, "stdout_path"));
  p.stderr_path = EB_TRY(get<std::string>(j, "stderr_path"));
  p.binding_digest = EB_TRY(get<std::string>(j, "binding_digest"));
  p.hostname = EB_TRY(get<std::string>(j, "hostname"));
  const json img = EB_TRY(get<json>(j, "image"));
  if (!img.is_null()) {
    launch_image pi;
    pi.lowers = EB_TRY(get<std::vector<std::string>>(img, "lowers"));
    pi.upper = EB_TRY(get<std::string>(img, "upper"));
    pi.work = EB_TRY(get<std::string>(img, "work"));
    pi.id = EB_TRY(get<std::string>(img, "id"));
    pi.reference = EB_TRY(get<std::string>(img, "reference"));
    pi.manifest_digest = EB_TRY(get<std::string>(img, "manifest_digest"));
    pi.layers = EB_TRY(get<std::vector<std::string>>(img, "layers"));
    if (pi.lowers.empty())
      return make_error(error_kind::invalid_argument, "launch plan: image without layers");
    p.image = std::move(pi);
  }
  p.workspace_overlay = EB_TRY(overlay_from(j, "workspace_overlay"));
  p.home_overlay = EB_TRY(overlay_from(j, "home_overlay"));
  return p;
}

}  // namespace protocol
}  // namespace evalbox::sandbox
