// A suite's candidates (each an adapter with its settings, home files, environment, network
// and credential handles), the credentials they lease and the baseline the report compares
// them against.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "base/fs.h"
#include "base/json.h"
#include "harness/config/parse_parts.h"
#include "harness/config/validate.h"

namespace evalbox::harness {
inline namespace config {
namespace parsing {

namespace fs = std::filesystem;

namespace {

// home_files: {target in the home: source file}; sources relative to the suite file, and they
// must exist now.
void parse_home_files(reader& r, const YAML::Node& n, const std::string& what, const fs::path& base,
                      candidate_spec& c) {
  auto hf = r.mapping(n, what + ".home_files", {}, {}, true);
  if (!hf) return;
  for (const auto& [target, source] : hf->entries) {
    std::string name = fmt::format("{}.home_files['{}']", what, target);
    if (!is_safe_relative(fs::path(target))) {
      r.fail(source,
             fmt::format("{}: target '{}' must be a relative path without '..'", name, target),
             "targets are relative to the agent's home directory");
      continue;
    }
    auto src = r.string(source, name);
    if (!src) continue;
    fs::path full = normalize(base / expand_home(*src));
    std::error_code ec;
    if (!fs::exists(full, ec)) {
      r.fail(source, fmt::format("{}: source '{}' does not exist ({})", name, *src, full.string()),
             "sources are relative to the suite file");
      continue;
    }
    c.home_files[target] = full;
  }
}

// env: {NAME: value}: variables the candidate's agent is started with.
void parse_env(reader& r, const YAML::Node& n, const std::string& what, candidate_spec& c) {
  auto ef = r.mapping(n, what + ".env", {}, {}, true);
  if (!ef) return;
  for (const auto& [k, v] : ef->entries) {
    if (!is_env_name(k)) {
      r.fail(v, fmt::format("{}.env: '{}' is not a variable name", what, k),
             "use letters, digits and '_', not starting with a digit");
      continue;
    }
    if (auto s = r.string(v, fmt::format("{}.env.{}", what, k), true)) c.env[k] = *s;
  }
}

// A path the suite names: `~` expanded, relative to the suite file's directory.
fs::path suite_path(const fs::path& base, const std::string& written) {
  return normalize(base / expand_home(written));
}

bool below_system_dir(const fs::path& p) {
  for (const char* d : {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"})
    if (is_within(p, d)) return true;
  return false;
}

// skills: [DIR, ...]: directories holding SKILL.md, named by their directory's name (unique).
void parse_skills(reader& r, const YAML::Node& n, const std::string& what, const fs::path& base,
                  candidate_spec& c) {
  c.skills_where = r.at(n);
  if (!n.IsSequence()) {
    r.fail(n, fmt::format("{}.skills must be a list of directories, found {}", what, type_name(n)),
           "e.g. skills: [skills/pdf-tools] (each a directory holding SKILL.md)");
    return;
  }
  std::map<std::string, source_location> names;
  for (size_t i = 0; i < n.size(); ++i) {
    const YAML::Node item = n[i];
    auto written = r.string(item, fmt::format("{}.skills[{}]", what, i));
    if (!written) continue;
    const fs::path dir = suite_path(base, *written);
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      r.fail(item, fmt::format("skill '{}' is not a directory ({})", *written, dir.string()),
             "a skill is a directory holding SKILL.md, relative to the suite file");
      continue;
    }
    if (!fs::is_regular_file(dir / "SKILL.md", ec)) {
      r.fail(item, fmt::format("skill '{}' has no SKILL.md ({})", *written, dir.string()),
             "write SKILL.md (YAML front matter with name and description, then instructions)");
      continue;
    }
    const std::string name = dir.filename().string();
    if (!is_valid_id(name, false)) {
      r.fail(item, fmt::format("skill directory name '{}' is not a valid skill name", name),
             "name the directory [a-z0-9][a-z0-9._-]*: the client knows the skill by it");
      continue;
    }
    if (auto [it, fresh] = names.emplace(name, r.at(item)); !fresh) {
      r.fail(item, fmt::format("two skills are named '{}'", name),
             fmt::format("the first is at {}; a client knows skills by their directory's name",
                         it->second.to_string()));
      continue;
    }
    c.skills.push_back({name, dir, r.at(item)});
  }
}

bool is_server_name(std::string_view s) {
  return !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-';
  });
}

// One MCP server: {command: [PROGRAM, ARGS...], env: {NAME: value}}. The host files its
// command names are found now (see mcp_server_spec).
std::optional<mcp_server_spec> parse_mcp_server(reader& r, const std::string& name,
                                                const YAML::Node& n, const std::string& what,
                                                const fs::path& base) {
  static constexpr std::string_view known[] = {"command", "env"};
  static constexpr std::string_view required[] = {"command"};
  auto f = r.mapping(n, what, known, required);
  if (!f) return std::nullopt;
  mcp_server_spec m;
  m.name = name;
  m.where = r.at(n);
  const size_t errors = r.error_count();
  if (!is_server_name(name))
    r.fail(n, fmt::format("MCP server name '{}' is not valid", name),
           "use letters, digits, '_' and '-' (the client names its tools after it)");
  if (f->has("command")) {
    const YAML::Node cmd = f->get("command");
    if (auto list = r.string_list(cmd, what + ".command")) {
      m.command = *list;
      std::map<std::string, size_t> file_names;
      for (size_t i = 0; i < list->size(); ++i) {
        const std::string& arg = (*list)[i];
        if (arg.empty() || arg.front() == '-' || arg.find('/') == std::string::npos) continue;
        const fs::path p = suite_path(base, arg);
        std::error_code ec;
        const bool exists = fs::exists(p, ec);
        if (fs::path(expand_home(arg)).is_absolute()) {
          if (!exists || below_system_dir(p)) continue;  // the sandbox's own (or the image's)
        } else if (!exists) {
          r.fail(cmd,
                 fmt::format("{}.command[{}]: '{}' does not exist ({})", what, i, arg, p.string()),
                 "paths with a '/' are relative to the suite file; a bare name is looked up on "
                 "the sandbox's PATH");
          continue;
        }
        const std::string file_name = p.filename().string();
        if (auto [it, fresh] = file_names.emplace(file_name, i); !fresh) {
          r.fail(cmd,
                 fmt::format("{}.command names two files called '{}' (arguments {} and {})", what,
                             file_name, it->second, i),
                 "each is mounted at /evalbox/mcp/NAME/<file name>: rename one");
          continue;
        }
        m.files[i] = p;
      }
    }
  }
  if (f->has("env")) {
    if (auto ef = r.mapping(f->get("env"), what + ".env", {}, {}, true)) {
      for (const auto& [k, v] : ef->entries) {
        if (!is_env_name(k)) {
          r.fail(v, fmt::format("{}.env: '{}' is not a variable name", what, k),
                 "use letters, digits and '_', not starting with a digit");
          continue;
        }
        if (auto val = r.string(v, fmt::format("{}.env.{}", what, k), true)) m.env[k] = *val;
      }
    }
  }
  if (r.error_count() != errors) return std::nullopt;
  return m;
}

// mcp_servers: {NAME: {command, env}}.
void parse_mcp_servers(reader& r, const YAML::Node& n, const std::string& what,
                       const fs::path& base, candidate_spec& c) {
  c.mcp_servers_where = r.at(n);
  auto servers = r.mapping(n, what + ".mcp_servers", {}, {}, true);
  if (!servers) return;
  for (const auto& [name, node] : servers->entries)
    if (auto m =
            parse_mcp_server(r, name, node, fmt::format("{}.mcp_servers.{}", what, name), base))
      c.mcp_servers.push_back(std::move(*m));
  std::sort(c.mcp_servers.begin(), c.mcp_servers.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
}

bool is_event_name(std::string_view s) {
  return !s.empty() && std::isalpha(static_cast<unsigned char>(s.front())) &&
         std::all_of(s.begin(), s.end(),
                     [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)); });
}

// hooks: {EVENT: [{matcher: TOOL, command: FILE}, ...]}: which events a client knows is its
// adapter's to check.
void parse_hooks(reader& r, const YAML::Node& n, const std::string& what, const fs::path& base,
                 candidate_spec& c) {
  c.hooks_where = r.at(n);
  auto events = r.mapping(n, what + ".hooks", {}, {}, true);
  if (!events) return;
  static constexpr std::string_view known[] = {"matcher", "command"};
  static constexpr std::string_view required[] = {"command"};
  for (const auto& [event, list] : events->entries) {
    const std::string at = fmt::format("{}.hooks.{}", what, event);
    if (!is_event_name(event)) {
      r.fail(list, fmt::format("hook event '{}' is not an event name", event),
             "the client's name of the event, e.g. PreToolUse");
      continue;
    }
    if (!list.IsSequence() || list.size() == 0) {
      r.fail(list, fmt::format("{} must be a non-empty list", at),
             "e.g. [{matcher: Bash, command: hooks/deny-rm.sh}]");
      continue;
    }
    for (size_t i = 0; i < list.size(); ++i) {
      const YAML::Node item = list[i];
      const std::string item_what = fmt::format("{}[{}]", at, i);
      auto f = r.mapping(item, item_what, known, required);
      if (!f) continue;
      hook_spec h;
      h.event = event;
      h.where = r.at(item);
      if (f->has("matcher")) {
        auto m = r.string(f->get("matcher"), item_what + ".matcher");
        if (!m) continue;
        h.matcher = *m;
      }
      const YAML::Node cmd = f->get("command");
      auto written = r.string(cmd, item_what + ".command");
      if (!written) continue;
      h.command = *written;
      h.script = suite_path(base, *written);
      std::error_code ec;
      if (!fs::is_regular_file(h.script, ec)) {
        r.fail(cmd,
               fmt::format("{}.command '{}' is not a file ({})", item_what, *written,
                           h.script.string()),
               "a hook is an executable file, relative to the suite file; it is mounted "
               "read-only and run by the client");
        continue;
      }
      if (::access(h.script.c_str(), X_OK) != 0) {
        r.fail(cmd, fmt::format("{}.command '{}' is not executable", item_what, *written),
               fmt::format("chmod +x {}", h.script.string()));
        continue;
      }
      c.hooks.push_back(std::move(h));
    }
  }
}

// credential: HANDLE or credentials: [HANDLE, ...], not both; the handles are checked against
// the suite's credentials by parse_candidates.
void parse_candidate_credentials(reader& r, const fields& f, const std::string& what,
                                 candidate_spec& c) {
  if (f.has("credential") && f.has("credentials"))
    r.fail(f.get("credentials"), fmt::format("{} has both credential and credentials", what),
           "list every handle under `credentials`");
  if (f.has("credential")) {
    if (auto s = r.string(f.get("credential"), what + ".credential")) c.credentials.push_back(*s);
  }
  if (f.has("credentials")) {
    if (auto l = r.string_list(f.get("credentials"), what + ".credentials")) c.credentials = *l;
  }
}

// One candidate: the keys every adapter shares, and every other key kept as an adapter setting
// (the adapter checks its own).
std::optional<candidate_spec> parse_candidate(reader& r, const YAML::Node& n, size_t index,
                                              const fs::path& base,
                                              std::span<const std::string> adapters) {
  static constexpr std::string_view common[] = {"id",      "adapter",    "home_files",  "env",
                                                "network", "credential", "credentials", "gateway",
                                                "budget",  "skills",     "mcp_servers", "hooks"};
  static constexpr std::string_view required[] = {"id", "adapter"};
  std::string what = fmt::format("candidates[{}]", index);
  auto f = r.mapping(n, what, common, required, /*allow_unknown=*/true);
  if (!f) return std::nullopt;
  candidate_spec c;
  c.where = r.at(n);
  if (f->has("id")) {
    if (auto id = r.string(f->get("id"), what + ".id")) {
      c.id = *id;
      if (!is_valid_id(*id, false))
        r.fail(f->get("id"), fmt::format("candidate id '{}' is not a valid id", *id),
               "use [a-z0-9][a-z0-9._-]*");
      else
        what = fmt::format("candidates.{}", *id);
    }
  }
  if (f->has("adapter")) {
    if (auto a = r.string(f->get("adapter"), what + ".adapter")) {
      c.adapter = *a;
      if (std::find(adapters.begin(), adapters.end(), *a) == adapters.end())
        r.fail(f->get("adapter"), fmt::format("{} names unknown adapter '{}'", what, *a),
               adapters.empty() ? std::string("no adapter is registered")
                                : fmt::format("known adapters: {}", fmt::join(adapters, ", ")));
    }
  }
  if (f->has("home_files")) parse_home_files(r, f->get("home_files"), what, base, c);
  if (f->has("env")) parse_env(r, f->get("env"), what, c);
  if (f->has("network")) c.network = parse_network(r, f->get("network"), what + ".network");
  parse_candidate_credentials(r, *f, what, c);
  if (f->has("gateway")) c.gateway = parse_gateway(r, f->get("gateway"), what + ".gateway", base);
  if (f->has("budget")) {
    c.budget = parse_budget(r, f->get("budget"), what + ".budget");
    if (!f->has("gateway"))
      r.fail(f->get("budget"), fmt::format("{}.budget needs a gateway", what),
             "a budget is enforced by the candidate's model gateway: add gateway: {upstream: "
             "URL} (docs/agents.md)");
  }
  if (f->has("skills")) parse_skills(r, f->get("skills"), what, base, c);
  if (f->has("mcp_servers")) parse_mcp_servers(r, f->get("mcp_servers"), what, base, c);
  if (f->has("hooks")) parse_hooks(r, f->get("hooks"), what, base, c);
  for (const auto& [k, v] : f->entries) {
    if (std::find(std::begin(common), std::end(common), k) != std::end(common)) continue;
    c.settings[k] = setting{r.to_json(v), r.at(v)};
  }
  return c;
}

}  // namespace

// credentials: {handle: path | {path, max_concurrent, requests_per_minute}, ...}; paths relative
// to the suite file, `~` expanded.
void parse_credentials(reader& r, const YAML::Node& n, const fs::path& base_dir, suite_spec& spec) {
  static constexpr std::string_view keys[] = {"path", "max_concurrent", "requests_per_minute"};
  static constexpr std::string_view required[] = {"path"};
  auto cf = r.mapping(n, "credentials", {}, {}, true);
  if (!cf) return;
  for (const auto& [handle, value] : cf->entries) {
    if (!is_valid_id(handle, true)) {
      r.fail(value, fmt::format("credential handle '{}' is not a valid name", handle),
             "use letters, digits, '.', '_' and '-'");
      continue;
    }
    const std::string what = fmt::format("credentials.{}", handle);
    if (!value.IsScalar() && !value.IsMap()) {
      r.fail(value, fmt::format("{} must be a path or a mapping, found {}", what, type_name(value)),
             fmt::format("{}: ~/.config/keys/KEY, or {}: {{path: ~/.config/keys/KEY, "
                         "max_concurrent: 4}}",
                         handle, handle));
      continue;
    }
    YAML::Node path = value;
    if (value.IsMap()) {
      auto f = r.mapping(value, what, keys, required);
      if (!f || !f->has("path")) continue;
      path = f->get("path");
      if (f->has("max_concurrent")) {
        const YAML::Node m = f->get("max_concurrent");
        if (auto v = r.positive_integer(m, what + ".max_concurrent")) {
          if (*v > static_cast<uint64_t>(max_credential_holders))
            r.fail(m,
                   fmt::format("{}.max_concurrent {} is more than {}", what, *v,
                               max_credential_holders),
                   "a lease has one lock file per holder; give at most the suite's concurrency");
          else
            spec.shared_credentials[handle].max_concurrent = static_cast<int>(*v);
          spec.shared_credentials[handle].where = r.at(m);
        }
      }
      if (f->has("requests_per_minute")) {
        const YAML::Node m = f->get("requests_per_minute");
        if (auto v = r.positive_integer(m, what + ".requests_per_minute")) {
          if (*v > max_requests_per_minute)
            r.fail(m, fmt::format("{}.requests_per_minute {} is more than {}", what, *v,
                                  max_requests_per_minute));
          else
            spec.shared_credentials[handle].requests_per_minute = static_cast<uint32_t>(*v);
          spec.shared_credentials[handle].rate_where = r.at(m);
        }
      }
    }
    if (auto p = r.string(path, value.IsMap() ? what + ".path" : what))
      spec.credentials[handle] = normalize(base_dir / expand_home(*p));
  }
}

namespace {

// Whether the file at `source` holds a JSON document: a login (Codex's auth.json, Claude's
// .credentials.json), not an API key, which is one line. Unreadable: not known to be one (the
// run's validation says why it cannot be read).
bool is_json_login(const fs::path& source) {
  auto text = read_file(source, 1u << 20);
  if (!text) return false;
  const json j = json::parse(*text, nullptr, false);
  return j.is_object();
}

}  // namespace

// A credential shared by several runs (max_concurrent > 1) must not be a login file: its client
// rewrites it as its tokens rotate, and two runs refreshing one token chain at once would fork
// it (one of them, or the host's login, left with a token the provider has revoked).
void check_shared_credentials(reader& r, const suite_spec& spec) {
  const std::string hint =
      "remove max_concurrent (a login serves one run at a time), or use an API key credential "
      "(a file holding the key on one line)";
  for (const auto& [handle, share] : spec.shared_credentials) {
    // Only a model gateway sees a client's requests, so only one can hold them to a rate —
    // and only the one whose upstream key is this credential.
    if (share.requests_per_minute > 0)
      for (const auto& c : spec.candidates) {
        if (!c.uses_credential(handle)) continue;
        if (!c.gateway) {
          r.fail(share.rate_where,
                 fmt::format("credentials.{}.requests_per_minute is honoured by the model "
                             "gateway, and candidate '{}' uses credential '{}' without one",
                             handle, c.id, handle),
                 fmt::format("give candidate {} a `gateway:` (docs/agents.md, \"The model "
                             "gateway\"), or remove requests_per_minute",
                             c.id));
          continue;
        }
        const std::string key = c.gateway_key_handle();
        if (key == handle) continue;
        const std::string from =
            !c.gateway->key_env.empty()
                ? fmt::format("the variable gateway.key_env names ({})", c.gateway->key_env)
            : !key.empty() ? fmt::format("credential '{}'", key)
                           : std::string("the variable api_key_env names");
        r.fail(share.rate_where,
               fmt::format("credentials.{}.requests_per_minute holds the requests a gateway "
                           "sends with this credential, but candidate '{}' uses it and its "
                           "gateway's key comes from {}: its requests would not be limited",
                           handle, c.id, from),
               fmt::format("let candidate {}'s gateway read its key from credential '{}' (its "
                           "only `credential:`, and no gateway.key_env), or remove "
                           "requests_per_minute",
                           c.id, handle));
      }
    if (share.max_concurrent <= 1) continue;
    for (const auto& c : spec.candidates)
      for (const auto key : login_setting_keys)
        if (const auto* s = c.find(key);
            s && s->value.is_string() && s->value.get<std::string>() == handle)
          r.fail(s->where,
                 fmt::format("candidate '{}' uses credential '{}' as its {}, a login file, but "
                             "credentials.{}.max_concurrent is {}: a login's tokens rotate, and "
                             "two runs at once would fork the token chain",
                             c.id, handle, key, handle, share.max_concurrent),
                 hint);
    if (auto it = spec.credentials.find(handle);
        it != spec.credentials.end() && is_json_login(it->second))
      r.fail(share.where,
             fmt::format("credential '{}' ({}) is a JSON login file, but its max_concurrent is "
                         "{}: a login's tokens rotate, and two runs at once would fork the "
                         "token chain",
                         handle, it->second.string(), share.max_concurrent),
             hint);
  }
}

// candidates: [...]: each one, ids unique, each credential handle defined by the suite (so
// credentials are parsed first).
void parse_candidates(reader& r, const YAML::Node& list, const fs::path& base_dir,
                      std::span<const std::string> adapters, suite_spec& spec) {
  if (!list.IsSequence() || list.size() == 0) {
    r.fail(list,
           list.IsSequence() ? std::string("candidates must not be empty")
                             : fmt::format("candidates must be a list, found {}", type_name(list)),
           "add at least one `- {id: ..., adapter: ...}`");
    return;
  }
  std::map<std::string, source_location> ids;
  for (size_t i = 0; i < list.size(); ++i) {
    auto c = parse_candidate(r, list[i], i, base_dir, adapters);
    if (!c) continue;
    if (!c->id.empty()) {
      auto [it, fresh] = ids.emplace(c->id, c->where);
      if (!fresh)
        r.fail(c->where, fmt::format("candidate id '{}' is used twice", c->id),
               fmt::format("the first is at {}; give each candidate its own id",
                           it->second.to_string()));
    }
    for (const auto& h : c->credentials) {
      if (!spec.credentials.contains(h))
        r.fail(c->where,
               fmt::format("candidate '{}' uses credential '{}', which the suite does not "
                           "define",
                           c->id, h),
               fmt::format("add `credentials: {{{}: PATH}}` at the top level of the suite", h));
    }
    spec.candidates.push_back(std::move(*c));
  }
}

// baseline: a candidate id (so candidates are parsed first).
void parse_baseline(reader& r, const YAML::Node& n, suite_spec& spec) {
  auto b = r.string(n, "baseline");
  if (!b) return;
  spec.baseline = *b;
  if (!spec.candidates.empty() && !spec.find_candidate(*b)) {
    std::set<std::string> ids;
    for (const auto& c : spec.candidates)
      if (!c.id.empty()) ids.insert(c.id);
    r.fail(n, fmt::format("baseline '{}' is not a candidate", *b),
           fmt::format("name one of: {}", fmt::join(ids, ", ")));
  }
}

}  // namespace parsing
}  // namespace config
}  // namespace evalbox::harness
