// A suite's candidates (each an adapter with its settings, home files, environment, network
// and credential handles), the credentials they lease and the baseline the report compares
// them against.
#include <algorithm>
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
  static constexpr std::string_view common[] = {"id",          "adapter", "home_files",
                                                "env",         "network", "credential",
                                                "credentials", "gateway", "budget"};
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
  for (const auto& [k, v] : f->entries) {
    if (std::find(std::begin(common), std::end(common), k) != std::end(common)) continue;
    c.settings[k] = setting{r.to_json(v), r.at(v)};
  }
  return c;
}

}  // namespace

// credentials: {handle: path | {path, max_concurrent}, ...}; paths relative to the suite file,
// `~` expanded.
void parse_credentials(reader& r, const YAML::Node& n, const fs::path& base_dir, suite_spec& spec) {
  static constexpr std::string_view keys[] = {"path", "max_concurrent"};
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
            spec.shared_credentials[handle] = {static_cast<int>(*v), r.at(m)};
        }
      }
    }
    if (auto p = r.string(path, value.IsMap() ? what + ".path" : what))
      spec.credentials[handle] = normalize(base_dir / expand_home(*p));
  }
}

namespace {

// The settings by which an adapter mounts a credential as its client's login file (Codex's
// auth_file, Claude Code's credentials_file: docs/agents.md).
constexpr std::string_view login_settings[] = {"auth_file", "credentials_file"};

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
    if (share.max_concurrent <= 1) continue;
    for (const auto& c : spec.candidates)
      for (const auto key : login_settings)
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
