// Start requests and the sessions of an image and/or a workspace (session_start.h).
#include "harness/runner/session_start.h"

#include <cmath>
#include <set>

#include "base/fs.h"
#include "base/json_get.h"
#include "base/units.h"
#include "harness/runner/request.h"
#include "harness/runner/sandbox_exec.h"
#include "harness/session/session.h"
#include "harness/session/store.h"

namespace evalbox::harness {
inline namespace runner {
namespace fs = std::filesystem;

namespace {

constexpr std::chrono::milliseconds longest = std::chrono::hours(24 * 7);

// A duration field: text ("30m") or a number of seconds; more than 0, at most a week.
result<std::chrono::milliseconds> duration_of(const json& v, std::string_view field) {
  double ms = 0;
  if (v.is_string()) {
    auto parsed = parse_duration_ms(v.get<std::string>());
    if (!parsed)
      return make_error(error_kind::invalid_argument, "{}: {}", field, parsed.error().message);
    ms = static_cast<double>(*parsed);
  } else if (v.is_number()) {
    ms = v.get<double>() * 1000;
  } else {
    return make_error(error_kind::invalid_argument, "{}: a duration such as \"30m\", or seconds",
                      field);
  }
  if (!std::isfinite(ms) || ms <= 0 || ms > static_cast<double>(longest.count()))
    return make_error(error_kind::invalid_argument, "{}: more than 0 and at most a week", field);
  return std::chrono::milliseconds(static_cast<int64_t>(ms));
}

template <class T>
result<std::optional<T>> field(const json& j, const char* key) {
  return EB_TRY_CTX(json_get_optional<T>(j, key), "start");
}

}  // namespace

json session_spec::to_json() const {
  json j{{"ttl", static_cast<double>(ttl.count()) / 1000},
         {"network", network},
         {"memory", memory},
         {"disk", disk},
         {"pids", pids},
         {"landlock", landlock},
         {"pull", pull}};
  for (const auto& [key, value] : {std::pair{"fixture", &fixture},
                                   {"suite", &suite},
                                   {"candidate", &candidate},
                                   {"image", &image},
                                   {"workspace", &workspace}})
    if (!value->empty()) j[key] = *value;
  if (owner) j["owner"] = *owner;
  if (cpu) j["cpu"] = *cpu;
  return j;
}

result<session_spec> session_spec_of(const json& r) {
  if (!r.is_object()) return make_error(error_kind::invalid_argument, "start: not an object");
  static const std::set<std::string_view> known = {
      "id",    "op",      "fixture", "suite", "candidate", "image", "workspace", "ttl",
      "owner", "network", "memory",  "disk",  "cpu",       "pids",  "landlock",  "pull"};
  for (const auto& [key, value] : r.items())
    if (!known.contains(key))
      return make_error(error_kind::invalid_argument, "start: unknown field '{}'", key);
  session_spec s;
  auto text = [&](const char* key, std::string& out) -> status {
    if (auto v = EB_TRY(field<std::string>(r, key))) out = std::move(*v);
    return {};
  };
  for (const auto& [key, out] : {std::pair{"fixture", &s.fixture},
                                 {"suite", &s.suite},
                                 {"candidate", &s.candidate},
                                 {"image", &s.image},
                                 {"workspace", &s.workspace},
                                 {"network", &s.network},
                                 {"memory", &s.memory},
                                 {"disk", &s.disk},
                                 {"pull", &s.pull}})
    EB_TRY(text(key, *out));
  if (s.fixture.empty() && s.image.empty() && s.workspace.empty())
    return make_error(error_kind::invalid_argument,
                      "start: give a fixture (its setup is run first), an image, a workspace, "
                      "or an image and a workspace");
  if (!s.fixture.empty() && (!s.image.empty() || !s.workspace.empty()))
    return make_error(error_kind::invalid_argument,
                      "start: a fixture brings its own workspace and image: drop image and "
                      "workspace");
  if (!s.candidate.empty() && s.suite.empty())
    return make_error(error_kind::invalid_argument, "start: a candidate needs its suite");
  if (const json& t = json_member(r, "ttl"); !t.is_null()) s.ttl = EB_TRY(duration_of(t, "ttl"));
  if (const json& c = json_member(r, "cpu"); !c.is_null()) {
    (void)EB_TRY(duration_of(c, "cpu"));
    s.cpu = c.is_string() ? c.get<std::string>() : fmt::format("{}s", c.get<double>());
  }
  if (auto o = EB_TRY(field<int>(r, "owner"))) {
    if (*o <= 0) return make_error(error_kind::invalid_argument, "start: owner: a process id");
    s.owner = *o;
  }
  if (auto p = EB_TRY(field<uint64_t>(r, "pids"))) s.pids = *p;
  if (auto l = EB_TRY(field<bool>(r, "landlock"))) s.landlock = *l;
  EB_TRY_CTX(parse_bytes(s.memory), "start: memory");
  EB_TRY_CTX(parse_bytes(s.disk), "start: disk");
  EB_TRY_CTX(parse_exec_network(s.network), "start");
  if (s.pull != "missing" && s.pull != "always" && s.pull != "never")
    return make_error(error_kind::invalid_argument, "start: pull: missing, always or never");
  return s;
}

sandbox::resource_limits session_limits(sandbox::resource_limits l, const session_spec& spec) {
  l.wall_ms = static_cast<uint64_t>(spec.ttl.count()) + 60000;
  l.cpu_ms = spec.cpu ? parse_duration_ms(*spec.cpu).value_or(0) : 0;
  return l;
}

result<json> start_hosted_session(sessions::server& srv, sandbox::preparer& prep,
                                  const fs::path& state_root, const std::string& id,
                                  const session_spec& spec, const std::atomic<bool>* cancel,
                                  const std::function<void(const std::string&)>& say) {
  if (!spec.fixture.empty())
    return make_error(error_kind::unsupported,
                      "start: a fixture's session starts with `evalbox session start --fixture`");
  std::optional<sandbox::image_summary> img;
  if (!spec.image.empty()) {
    const auto pull = EB_TRY(sandbox::image::parse_pull_policy(spec.pull));
    img =
        EB_TRY_CTX(prep.resolve_image(spec.image, fs::current_path(), cancel, say, pull), "image");
  }
  exec_request_inputs in;
  in.session_id = id;
  in.argv = {"sh"};  // never run: the session's pid 1 serves execs
  in.workspace = spec.workspace;
  in.image = img ? &*img : nullptr;
  in.limits.memory_bytes = EB_TRY(parse_bytes(spec.memory));
  in.limits.disk_bytes = EB_TRY(parse_bytes(spec.disk));
  in.limits.pids = spec.pids;
  in.limits.wall_ms = static_cast<uint64_t>(spec.ttl.count()) + 60000;
  in.limits.cpu_ms = in.limits.wall_ms;  // the request wants one in range; lifted below
  in.network = EB_TRY(parse_exec_network(spec.network));
  in.landlock = spec.landlock;
  const auto req = EB_TRY(make_exec_request(in));
  auto prepared = EB_TRY(prep.prepare(req));
  auto owned = std::make_unique<sandbox::prepared_session>(std::move(prepared));
  // The family first: its store goes with it on every way out.
  auto fam_dir = EB_TRY(sessions::claim_dir(sessions::session_layers_root(state_root), id));
  auto fam = std::make_shared<sessions::family>(fam_dir.dir, std::move(fam_dir.lock));
  auto dir = EB_TRY(sessions::claim_dir(sessions::sessions_root(state_root), id));
  auto fail = [&](error e) {
    (void)remove_tree(dir.dir);
    return std::unexpected(std::move(e));
  };
  sessions::session_setup setup;
  setup.id = id;
  setup.dir = dir.dir;
  setup.fam = std::move(fam);
  setup.options.label = "session";
  setup.options.limits_override = session_limits(req.limits, spec);
  setup.source = spec.to_json();
  setup.expires = std::chrono::system_clock::now() + spec.ttl;
  setup.owner = spec.owner;
  sandbox::prepared_session& p = *owned;
  auto s = sessions::session::start(std::move(setup), p, std::move(owned));
  if (!s) return fail(std::move(s.error()));
  if (auto h = srv.host(*s, std::move(dir.lock)); !h) {
    (void)(*s)->stop();
    return fail(std::move(h.error()));
  }
  return (*s)->info();
}

}  // namespace runner
}  // namespace evalbox::harness
