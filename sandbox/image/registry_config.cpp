// Where pulls look for settings and credentials (see registry.h): the environment,
// registries.conf, and the auth files `podman login` and `docker login` write.
#include <toml++/toml.h>

#include <cstdlib>
#include <sstream>

#include "base/base64.h"
#include "base/fs.h"
#include "base/json.h"
#include "base/units.h"
#include "sandbox/http/client.h"
#include "sandbox/image/registry.h"

namespace evalbox::sandbox::image {

namespace fs = std::filesystem;

namespace {

constexpr size_t max_auth_file = 1u << 20;
constexpr size_t max_conf_file = 1u << 20;

std::string env_or(const char* name, std::string fallback = {}) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// "https://host:port/" or "host:port" -> "host:port" (how hosts are compared).
std::string bare_host(std::string s) {
  for (std::string_view scheme : {"https://", "http://"})
    if (s.starts_with(scheme)) s.erase(0, scheme.size());
  while (!s.empty() && s.back() == '/') s.pop_back();
  return s;
}

std::string toml_string(const toml::node* n) {
  if (!n) return {};
  if (auto s = n->value<std::string>()) return *s;
  return {};
}

// The keys under which an auth file may hold `domain`'s credential, most specific first.
std::vector<std::string> auth_keys(const std::string& domain, const std::string& repository) {
  std::vector<std::string> keys;
  std::string path = repository;
  for (;;) {
    keys.push_back(domain + "/" + path);
    auto slash = path.rfind('/');
    if (slash == std::string::npos) break;
    path.erase(slash);
  }
  keys.push_back(domain);
  if (domain == "docker.io")
    for (const char* k : {"index.docker.io", "registry-1.docker.io", "https://index.docker.io/v1/",
                          "https://index.docker.io/v1"})
      keys.emplace_back(k);
  return keys;
}

// An `auths` entry: {"auth": base64(user:password)} or {"username", "password"}, or
// {"identitytoken"}.
result<std::optional<credential>> entry_credential(const json& e, const std::string& from) {
  if (!e.is_object()) return std::nullopt;
  credential c;
  c.from = from;
  if (auto it = e.find("auth");
      it != e.end() && it->is_string() && !it->get<std::string>().empty()) {
    auto decoded = base64_decode(it->get<std::string>());
    if (!decoded)
      return make_error(error_kind::invalid_argument,
                        "{}: an \"auth\" value is not base64 of user:password", from);
    auto colon = decoded->find(':');
    if (colon == std::string::npos)
      return make_error(error_kind::invalid_argument,
                        "{}: an \"auth\" value is not base64 of user:password", from);
    c.username = decoded->substr(0, colon);
    c.secret = decoded->substr(colon + 1);
  } else {
    if (auto u = e.find("username"); u != e.end() && u->is_string()) c.username = *u;
    if (auto p = e.find("password"); p != e.end() && p->is_string()) c.secret = *p;
  }
  if (auto t = e.find("identitytoken"); t != e.end() && t->is_string()) c.identity = *t;
  if (c.username.empty() && c.secret.empty() && c.identity.empty()) return std::nullopt;
  return c;
}

// `docker-credential-NAME get`: {"ServerURL", "Username", "Secret"}.
result<std::optional<credential>> helper_credential(const registry_settings& settings,
                                                    const std::string& helper,
                                                    const std::string& server,
                                                    const std::string& file) {
  const std::string who = "docker-credential-" + helper;
  if (!settings.credential_helper)
    return make_error(error_kind::unsupported,
                      "{} names the credential helper {} for {}, which this command cannot run",
                      file, who, server);
  auto out = settings.credential_helper(helper, server);
  if (!out) {
    // The helper's "credentials not found in native keychain" is no credential, not an error.
    if (out.error().message.find("not found") != std::string::npos) return std::nullopt;
    return make_error(out.error().kind, "{} (named by {}) for {}: {}", who, file, server,
                      out.error().message);
  }
  auto j = parse_json(*out, "a credential helper's answer");
  if (!j || !j->is_object())
    return make_error(error_kind::invalid_argument,
                      "{} (named by {}) answered something that is "
                      "not its JSON",
                      who, file);
  credential c;
  c.from = who;
  if (auto u = j->find("Username"); u != j->end() && u->is_string()) c.username = *u;
  if (auto s = j->find("Secret"); s != j->end() && s->is_string()) c.secret = *s;
  if (c.username == "<token>") {  // how helpers store an identity token
    c.identity = c.secret;
    c.username.clear();
    c.secret.clear();
  }
  if (c.secret.empty() && c.identity.empty()) return std::nullopt;
  return c;
}

}  // namespace

status apply_registries_conf(std::string_view toml_text, std::string_view what,
                             registry_settings& into) {
  toml::parse_result parsed = toml::parse(toml_text, std::string(what));
  if (!parsed)
    return make_error(error_kind::invalid_argument, "{}:{}: {}", what,
                      parsed.error().source().begin.line, parsed.error().description());
  const toml::table& t = parsed.table();
  if (auto* aliases = t["aliases"].as_table()) {
    for (const auto& [k, v] : *aliases)
      if (auto s = v.value<std::string>()) into.aliases.emplace_back(std::string(k.str()), *s);
  }
  if (auto* registries = t["registry"].as_array()) {
    for (const auto& r : *registries) {
      const auto* reg = r.as_table();
      if (!reg) continue;
      std::string location = toml_string(reg->get("location"));
      if (location.empty()) location = toml_string(reg->get("prefix"));
      if (location.empty()) continue;
      const std::string host = bare_host(location.substr(0, location.find('/')));
      if (auto insecure = (*reg)["insecure"].value<bool>(); insecure && *insecure)
        into.insecure.push_back(host);
      if (auto blocked = (*reg)["blocked"].value<bool>(); blocked && *blocked)
        into.blocked.emplace_back(bare_host(location), std::string(what));
      if (const auto* mirrors = (*reg)["mirror"].as_array()) {
        for (const auto& m : *mirrors) {
          const auto* mt = m.as_table();
          if (!mt) continue;
          std::string mloc = toml_string(mt->get("location"));
          if (mloc.empty()) continue;
          into.mirrors[location].push_back(mloc);
          if (auto insecure = (*mt)["insecure"].value<bool>(); insecure && *insecure)
            into.insecure.push_back(bare_host(mloc.substr(0, mloc.find('/'))));
        }
      }
    }
  }
  return {};
}

result<registry_settings> registry_settings_from_host() {
  registry_settings s;
  for (const auto& f : split_list(env_or("EVALBOX_REGISTRY_CA"))) {
    if (!fs::exists(f))
      return make_error(error_kind::invalid_argument,
                        "EVALBOX_REGISTRY_CA: {} does not exist (a PEM file of CA certificates)",
                        f);
    s.ca_files.push_back(f);
  }
  const std::string home = env_or("HOME");
  // registries.conf: the system's, then the user's over it (as containers-registries.conf(5)).
  std::vector<fs::path> confs;
  if (std::string c = env_or("EVALBOX_REGISTRIES_CONF"); !c.empty()) {
    confs.emplace_back(c);
  } else {
    confs.emplace_back("/etc/containers/registries.conf");
    if (!home.empty()) confs.push_back(fs::path(home) / ".config/containers/registries.conf");
  }
  for (const auto& c : confs) {
    auto text = read_file(c, max_conf_file);
    if (!text) {
      if (text.error().kind == error_kind::not_found) continue;
      return std::unexpected(std::move(text).error());
    }
    EB_TRY(apply_registries_conf(*text, c.string(), s));
  }
  for (const auto& h : split_list(env_or("EVALBOX_REGISTRY_INSECURE")))
    s.insecure.push_back(bare_host(h));
  if (std::string m = env_or("EVALBOX_REGISTRY_MIRROR"); !m.empty()) {
    auto& list = s.mirrors["docker.io"];
    auto mine = split_list(m);
    list.insert(list.begin(), mine.begin(), mine.end());
  }
  if (std::string t = env_or("EVALBOX_REGISTRY_TIMEOUT"); !t.empty()) {
    auto d = parse_duration_ms(t);
    if (!d || *d == 0)
      return make_error(error_kind::invalid_argument,
                        "EVALBOX_REGISTRY_TIMEOUT='{}': expected a duration such as 30s", t);
    s.timeout = std::chrono::milliseconds(*d);
  }
  if (std::string f = env_or("REGISTRY_AUTH_FILE"); !f.empty()) s.auth_files.emplace_back(f);
  if (std::string x = env_or("XDG_RUNTIME_DIR"); !x.empty())
    s.auth_files.push_back(fs::path(x) / "containers/auth.json");
  if (!home.empty()) s.auth_files.push_back(fs::path(home) / ".config/containers/auth.json");
  if (std::string d = env_or("DOCKER_CONFIG"); !d.empty()) {
    s.auth_files.push_back(fs::path(d) / "config.json");
  } else if (!home.empty()) {
    s.auth_files.push_back(fs::path(home) / ".docker/config.json");
  }
  return s;
}

result<std::optional<credential>> find_credential(const registry_settings& settings,
                                                  const std::string& domain,
                                                  const std::string& repository) {
  const auto keys = auth_keys(domain, repository);
  for (const auto& file : settings.auth_files) {
    auto text = read_file(file, max_auth_file);
    if (!text) {
      if (text.error().kind == error_kind::not_found) continue;
      return std::unexpected(std::move(text).error());
    }
    auto j = parse_json(*text, file.string());
    if (!j || !j->is_object())
      return make_error(error_kind::invalid_argument, "{}: not a JSON object", file.string());
    // credHelpers for this host, then the file's auths, then its credsStore.
    if (auto h = j->find("credHelpers"); h != j->end() && h->is_object())
      for (const auto& key : keys)
        if (auto it = h->find(key); it != h->end() && it->is_string())
          if (auto c = EB_TRY(helper_credential(settings, *it, key, file.string()))) return c;
    if (auto a = j->find("auths"); a != j->end() && a->is_object()) {
      for (const auto& key : keys) {
        for (const auto& [k, v] : a->items()) {
          if (bare_host(k) != bare_host(key) && k != key) continue;
          if (auto c = EB_TRY(entry_credential(v, file.string()))) return c;
        }
      }
    }
    if (auto store = j->find("credsStore");
        store != j->end() && store->is_string() && !store->get<std::string>().empty()) {
      const std::string server = domain == "docker.io" ? "https://index.docker.io/v1/" : domain;
      if (auto c = EB_TRY(helper_credential(settings, *store, server, file.string()))) return c;
    }
  }
  return std::nullopt;
}

}  // namespace evalbox::sandbox::image
