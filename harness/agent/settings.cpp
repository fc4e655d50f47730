// Shared candidate-setting helpers and checks for the agent adapters (see settings.h).
#include "harness/agent/settings.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "base/fs.h"
#include "base/log.h"

namespace evalbox::harness {
inline namespace agent {

namespace fs = std::filesystem;

std::string comma_list(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

bool one_of(std::string_view s, const std::vector<std::string>& items) {
  return std::find(items.begin(), items.end(), s) != items.end();
}

std::string string_setting(const candidate_spec& c, std::string_view key, std::string fallback) {
  const auto* s = c.find(key);
  return s && s->value.is_string() ? s->value.get<std::string>() : fallback;
}

fs::path agent_cache_dir() {
  const char* env = std::getenv("EVALBOX_AGENT_CACHE");
  return env && *env ? fs::path(env) : fs::path("/var/cache/evalbox/agents");
}

fs::path resolve_binary(const candidate_spec& c, const fs::path& default_binary) {
  std::string b = string_setting(c, "binary");
  if (b.empty()) return default_binary;
  if (b.front() == '/') return fs::path(b);
  return normalize(fs::path(c.where.file).parent_path() / b);
}

result<fs::path> installed_binary(const candidate_spec& c, const fs::path& default_binary,
                                  std::string_view agent, std::string_view install_command) {
  fs::path binary = resolve_binary(c, default_binary);
  if (::access(binary.c_str(), X_OK) != 0)
    return make_error(error_kind::not_found,
                      "candidate {}: {} binary {} is not installed (run {} or set binary:)", c.id,
                      agent, binary.string(), install_command);
  return binary;
}

fs::path install_prefix(const fs::path& binary) {
  fs::path dir = binary.parent_path();
  return dir.filename() == "bin" ? dir.parent_path() : dir;
}

std::vector<fs::path> install_paths(const fs::path& binary) {
  const fs::path prefix = install_prefix(binary);
  std::vector<fs::path> out = {prefix};
  std::error_code ec;
  if (fs::path real = fs::canonical(binary, ec);
      !ec && !real.string().starts_with(prefix.string() + "/"))
    out.push_back(real.parent_path());
  return out;
}

std::optional<std::string> credential_handle(const candidate_spec& c, std::string_view key) {
  if (auto h = string_setting(c, key); !h.empty()) return h;
  if (c.credentials.size() == 1 && !c.find("api_key_env") && !c.gateway)
    return c.credentials.front();
  return std::nullopt;
}

result<gateway_secret> gateway_key(const candidate_spec& c,
                                   const std::map<std::string, fs::path>& credentials) {
  auto from_env = [&](const std::string& var, std::string_view setting) -> result<gateway_secret> {
    const char* value = std::getenv(var.c_str());
    if (!value || !*value)
      return make_error(error_kind::invalid_argument,
                        "candidate {}: {} {} is not set in evalbox's environment", c.id, setting,
                        var);
    log::redact_secret(value);
    return gateway_secret{value, false, {}, {}};
  };
  if (!c.gateway->key_env.empty()) return from_env(c.gateway->key_env, "gateway.key_env");
  // The candidate's one credential, else the login file its client would have been given.
  if (const std::string handle = c.gateway_key_handle(); !handle.empty()) {
    auto it = credentials.find(handle);
    if (it == credentials.end())
      return make_error(error_kind::invalid_argument,
                        "candidate {}: credential '{}' is not in the suite's credentials", c.id,
                        handle);
    auto text = read_file(it->second, 1u << 20);
    if (!text)
      return make_error(text.error().kind, "candidate {}: the gateway's key, credential '{}': {}",
                        c.id, handle, text.error().message);
    std::string key = *text;
    while (!key.empty() && std::isspace(static_cast<unsigned char>(key.back()))) key.pop_back();
    size_t start = 0;
    while (start < key.size() && std::isspace(static_cast<unsigned char>(key[start]))) ++start;
    key.erase(0, start);
    if (key.starts_with('{'))  // a login file: its tokens are read from the run's lease
      return gateway_secret{std::move(*text), true, handle, it->second};
    if (key.empty() || key.find_first_of("\r\n") != std::string::npos)
      return make_error(error_kind::invalid_argument,
                        "candidate {}: credential '{}' ({}) must hold the API key on one line "
                        "(or be a login file) for the gateway",
                        c.id, handle, it->second.string());
    log::redact_secret(key);
    return gateway_secret{std::move(key), false, handle, it->second};
  }
  if (auto var = string_setting(c, "api_key_env"); !var.empty())
    return from_env(var, "api_key_env");
  return make_error(error_kind::invalid_argument,
                    "candidate {}: its gateway has no key: give the candidate one credential (a "
                    "file holding the key), or gateway.key_env",
                    c.id);
}

result<sandbox::secret_mount> credential_mount(const run_context& ctx, const std::string& handle,
                                               const fs::path& target) {
  auto it = ctx.credentials.find(handle);
  if (it == ctx.credentials.end())
    return make_error(error_kind::invalid_argument,
                      "candidate {}: credential '{}' is not in the suite's credentials",
                      ctx.candidate.id, handle);
  return sandbox::secret_mount{handle, it->second, target};
}

result<std::optional<std::string>> api_key_from_host(const candidate_spec& c) {
  std::string var = string_setting(c, "api_key_env");
  if (var.empty()) return std::optional<std::string>{};
  const char* value = std::getenv(var.c_str());
  if (!value || !*value)
    return make_error(error_kind::invalid_argument,
                      "candidate {}: api_key_env {} is not set in evalbox's environment", c.id,
                      var);
  log::redact_secret(value);
  return std::optional<std::string>(value);
}

void settings_checker::set_by_gateway(std::string_view key) {
  if (!c_.gateway) return;
  if (const auto* s = c_.find(key))
    errors_.push_back({s->where,
                       fmt::format("{} is set by the candidate's gateway (it points the client at "
                                   "the gateway, which forwards to gateway.upstream)",
                                   key),
                       "remove it; the upstream goes in gateway: {upstream: URL}"});
}

void settings_checker::known_keys(const std::vector<std::string>& known) {
  for (const auto& [key, value] : c_.settings)
    if (!one_of(key, known)) errors_.push_back(unknown_setting(c_, key, known));
}

const setting* settings_checker::non_empty_string(std::string_view key, std::string_view hint) {
  const auto* s = c_.find(key);
  if (s && (!s->value.is_string() || s->value.get<std::string>().empty())) {
    errors_.push_back(
        {s->where, fmt::format("{} must be a non-empty string", key), std::string(hint)});
    return nullptr;
  }
  return s;
}

const setting* settings_checker::choice(std::string_view key,
                                        const std::vector<std::string>& choices) {
  const auto* s = non_empty_string(key, comma_list(choices));
  if (s && !one_of(s->value.get<std::string>(), choices)) {
    errors_.push_back({s->where, fmt::format("unknown {} '{}'", key, s->value.get<std::string>()),
                       fmt::format("one of: {}", comma_list(choices))});
    return nullptr;
  }
  return s;
}

void settings_checker::binary(std::string_view executable, std::string_view install_command) {
  const auto* b = non_empty_string("binary", fmt::format("the path of the {}", executable));
  if (!b) return;
  // Present, so the default is never used.
  fs::path p = resolve_binary(c_, {});
  if (::access(p.c_str(), X_OK) != 0)
    errors_.push_back({b->where, fmt::format("binary '{}' is not an executable file", p.string()),
                       fmt::format("give the {} (absolute or relative to the suite file), or "
                                   "omit binary and run {}",
                                   executable, install_command)});
}

void settings_checker::env_name(std::string_view key, std::string_view example) {
  const auto* k = non_empty_string(key, "the name of a host environment variable");
  if (k && !is_env_name(k->value.get<std::string>()))
    errors_.push_back({k->where, fmt::format("{} must be an environment variable name", key),
                       fmt::format("e.g. {}: {} (the value is read on the host)", key, example)});
}

void settings_checker::credential(std::string_view key) {
  const auto* a = non_empty_string(key, "a handle from the suite's credentials");
  if (!a) return;
  const std::string h = a->value.get<std::string>();
  if (!one_of(h, c_.credentials))
    errors_.push_back({a->where,
                       fmt::format("{} '{}' is not one of this candidate's credentials", key, h),
                       fmt::format("add credential: {} (a handle of the suite's credentials)", h)});
}

void settings_checker::url(std::string_view key, std::string_view example) {
  const auto* u = non_empty_string(key, fmt::format("e.g. {}: \"{}\"", key, example));
  if (!u) return;
  const std::string value = u->value.get<std::string>();
  if (!value.starts_with("http://") && !value.starts_with("https://"))
    errors_.push_back({u->where, fmt::format("{} must start with http:// or https://", key), ""});
}

}  // namespace agent
}  // namespace evalbox::harness
