// adapter: codex (see codex.h): settings, CODEX_HOME and config.toml, argv, and the transcript.
#include "adapters/codex/codex.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <set>

#include "adapters/codex/transcript.h"
#include "sandbox/base/fs.h"
#include "sandbox/base/log.h"

namespace evalbox::adapters {

namespace fs = std::filesystem;
using harness::config_error;

fs::path agent_cache_dir() {
  const char* env = std::getenv("EVALBOX_AGENT_CACHE");
  return env && *env ? fs::path(env) : fs::path("/var/cache/evalbox/agents");
}

namespace {

constexpr std::string_view codex_home = ".codex";  // relative to /home/agent
const std::vector<std::string> known_settings = {
    "binary", "model", "effort", "provider", "api_key_env", "auth_file", "codex_sandbox"};
const std::vector<std::string> sandbox_modes = {"workspace-write", "read-only", "bypass"};
const std::vector<std::string> efforts = {"minimal", "low", "medium", "high", "xhigh"};
const std::vector<std::string> wire_apis = {"responses", "chat"};

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

bool one_of(const std::string& s, const std::vector<std::string>& v) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// A TOML basic string: quotes, backslashes and control characters escaped.
std::string toml_string(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\u{:04x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string string_setting(const harness::candidate_spec& c, std::string_view key,
                           std::string fallback = {}) {
  const auto* s = c.find(key);
  return s && s->value.is_string() ? s->value.get<std::string>() : fallback;
}

// An environment variable name: [A-Za-z_][A-Za-z0-9_]*.
bool is_env_name(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
  });
}

// A relative `binary` resolves against the suite file's directory.
fs::path resolve_binary(const harness::candidate_spec& c) {
  std::string b = string_setting(c, "binary");
  if (b.empty())
    return agent_cache_dir() / fmt::format("codex-{}", codex_pinned_version) / "bin" / "codex";
  if (b.front() == '/') return fs::path(b);
  return normalize(fs::path(c.where.file).parent_path() / b);
}

// The npm install prefix holding `binary` (<prefix>/bin/codex), mounted read-only: the launcher
// only adds argv[0]'s own directory, and the script needs the package and its native binary.
fs::path install_prefix(const fs::path& binary) {
  fs::path dir = binary.parent_path();
  return dir.filename() == "bin" ? dir.parent_path() : dir;
}

// The credential handle holding auth.json: `auth_file`, else the candidate's only handle.
std::optional<std::string> auth_handle(const harness::candidate_spec& c) {
  if (auto h = string_setting(c, "auth_file"); !h.empty()) return h;
  if (c.credentials.size() == 1 && !c.find("api_key_env")) return c.credentials.front();
  return std::nullopt;
}

bool overridden_by_home_files(const harness::candidate_spec& c, const fs::path& target) {
  return c.home_files.count(target.string()) != 0;
}

// The thread id from a finished `codex exec --json` stream (its thread.started event).
std::optional<std::string> thread_id(const fs::path& stdout_path) {
  auto text = read_file(stdout_path);
  if (!text) return std::nullopt;
  auto t = codex::parse_codex_exec_json(*text);
  if (!t || t->session_id.empty()) return std::nullopt;
  return t->session_id;
}

// The last `max_lines` non-empty lines of a file, scrubbed of registered secrets.
std::string tail_lines(const fs::path& path, size_t max_lines) {
  std::string text = read_file(path, 1u << 20).value_or("");
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line != "Reading additional input from stdin...") lines.push_back(line);
    start = end + 1;
  }
  std::string out;
  for (size_t i = lines.size() > max_lines ? lines.size() - max_lines : 0; i < lines.size(); ++i)
    out += (out.empty() ? "" : " | ") + lines[i];
  return log::scrub(out);
}

// Copies every sessions/**/rollout-*.jsonl below CODEX_HOME into native/codex-sessions/.
void keep_native_sessions(const harness::agent_output& out) {
  std::error_code ec;
  fs::path sessions = out.home_dir / codex_home / "sessions";
  if (!fs::is_directory(sessions, ec)) return;
  fs::path dest = out.native_dir / "codex-sessions";
  for (auto it = fs::recursive_directory_iterator(
           sessions, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const auto& p = it->path();
    if (it->is_symlink(ec) || !it->is_regular_file(ec)) continue;
    std::string name = p.filename().string();
    if (name.rfind("rollout-", 0) != 0 || p.extension() != ".jsonl") continue;
    (void)make_dirs(dest);
    fs::copy_file(p, dest / name, fs::copy_options::overwrite_existing, ec);
  }
}

class codex_adapter final : public harness::adapter {
 public:
  std::string_view id() const override { return "codex"; }

  std::vector<config_error> validate(const harness::candidate_spec& c) const override {
    std::vector<config_error> errors;
    for (const auto& [key, value] : c.settings)
      if (!one_of(key, known_settings))
        errors.push_back(harness::unknown_setting(c, key, known_settings));
    auto need_string = [&](std::string_view key, std::string_view hint) -> const harness::setting* {
      const auto* s = c.find(key);
      if (s && (!s->value.is_string() || s->value.get<std::string>().empty())) {
        errors.push_back(
            {s->where, fmt::format("{} must be a non-empty string", key), std::string(hint)});
        return nullptr;
      }
      return s;
    };
    if (const auto* b = need_string("binary", "the path of the codex executable")) {
      fs::path p = resolve_binary(c);
      if (::access(p.c_str(), X_OK) != 0)
        errors.push_back({b->where,
                          fmt::format("binary '{}' is not an executable file", p.string()),
                          "give the codex executable (absolute or relative to the suite file), "
                          "or omit binary and run scripts/install-agents"});
    }
    need_string("model", "e.g. model: gpt-5-codex");
    if (const auto* e = need_string("effort", join(efforts)))
      if (!one_of(e->value.get<std::string>(), efforts))
        errors.push_back({e->where, fmt::format("unknown effort '{}'", e->value.get<std::string>()),
                          fmt::format("one of: {}", join(efforts))});
    if (const auto* m = need_string("codex_sandbox", join(sandbox_modes)))
      if (!one_of(m->value.get<std::string>(), sandbox_modes))
        errors.push_back({m->where,
                          fmt::format("unknown codex_sandbox '{}'", m->value.get<std::string>()),
                          fmt::format("one of: {}", join(sandbox_modes))});
    if (const auto* k = need_string("api_key_env", "the name of a host environment variable"))
      if (!is_env_name(k->value.get<std::string>()))
        errors.push_back({k->where, "api_key_env must be an environment variable name",
                          "e.g. api_key_env: OPENAI_API_KEY (the value is read on the host)"});
    if (const auto* a = need_string("auth_file", "a handle from the suite's credentials")) {
      const std::string h = a->value.get<std::string>();
      if (std::find(c.credentials.begin(), c.credentials.end(), h) == c.credentials.end())
        errors.push_back(
            {a->where, fmt::format("auth_file '{}' is not one of this candidate's credentials", h),
             fmt::format("add credential: {} (a handle of the suite's credentials)", h)});
    }
    if (const auto* p = c.find("provider")) {
      if (!p->value.is_object()) {
        errors.push_back({p->where, "provider must be a mapping",
                          "provider: {base_url: URL, env_key: NAME, wire_api: responses}"});
      } else {
        const std::vector<std::string> keys = {"base_url", "env_key", "wire_api", "name"};
        for (const auto& [k, v] : p->value.items()) {
          if (!one_of(k, keys))
            errors.push_back({p->where, fmt::format("unknown provider key '{}'", k),
                              fmt::format("known keys: {}", join(keys))});
          else if (!v.is_string() || v.get<std::string>().empty())
            errors.push_back(
                {p->where, fmt::format("provider.{} must be a non-empty string", k), ""});
        }
        auto str = [&](const char* k) {
          auto it = p->value.find(k);
          return it != p->value.end() && it->is_string() ? it->get<std::string>() : std::string();
        };
        if (str("base_url").empty())
          errors.push_back({p->where, "provider has no base_url",
                            "e.g. base_url: \"http://127.0.0.1:8080/v1\""});
        if (!str("env_key").empty() && !is_env_name(str("env_key")))
          errors.push_back({p->where, "provider.env_key must be an environment variable name", ""});
        if (!str("wire_api").empty() && !one_of(str("wire_api"), wire_apis))
          errors.push_back({p->where,
                            fmt::format("unknown provider.wire_api '{}'", str("wire_api")),
                            fmt::format("one of: {}", join(wire_apis))});
      }
    }
    return errors;
  }

  result<harness::agent_plan> plan(const harness::run_context& ctx) const override {
    auto p = EB_TRY(base_plan(ctx));
    p.argv.insert(p.argv.end(),
                  {"exec", "--json", "--skip-git-repo-check", "--", ctx.fixture.prompt});
    return p;
  }

  result<std::optional<harness::agent_plan>> plan_follow_up(
      const harness::run_context& ctx, const harness::agent_output& first) const override {
    if (!ctx.fixture.follow_up) return std::optional<harness::agent_plan>{};
    auto p = EB_TRY(base_plan(ctx));
    p.argv.insert(p.argv.end(), {"exec", "resume", "--json", "--skip-git-repo-check"});
    // By thread id when the first launch reported one: --last would pick whatever session is
    // newest, which is the same one here but says less about intent.
    if (auto id = thread_id(first.stdout_path)) {
      p.argv.insert(p.argv.end(), {"--", *id, *ctx.fixture.follow_up});
    } else {
      p.argv.insert(p.argv.end(), {"--last", "--", *ctx.fixture.follow_up});
    }
    p.stdout_name = "stdout.jsonl";
    return std::optional<harness::agent_plan>(std::move(p));
  }

  result<harness::transcript> read_transcript(
      const harness::run_context&,
      const std::vector<harness::agent_output>& outputs) const override {
    harness::transcript t;
    t.agent = "codex";
    for (const auto& out : outputs) {
      keep_native_sessions(out);
      auto part = EB_TRY(codex::parse_codex_exec_json(read_file(out.stdout_path).value_or("")));
      for (auto& s : part.steps) t.steps.push_back(std::move(s));
      t.total += part.total;
      if (part.final_message) t.final_message = part.final_message;
      // A client that exits non-zero before it finishes a turn (bad config, no credentials)
      // writes its reason to stderr only: that beats the parser's "no final event".
      if (out.exited && out.exit_code != 0 && !part.completed &&
          (!part.error || part.error->starts_with("interrupted"))) {
        if (std::string why = tail_lines(out.stderr_path, 5); !why.empty())
          part.error = fmt::format("codex exited with status {}: {}", out.exit_code, why);
        else if (!part.error)
          part.error = fmt::format("codex exited with status {}", out.exit_code);
      }
      if (!t.error && part.error) t.error = part.error;
      for (const auto& [k, v] : part.unknown_events) t.unknown_events[k] += v;
      t.malformed_lines += part.malformed_lines;
      if (t.session_id.empty()) t.session_id = part.session_id;
      if (!part.model.empty()) t.model = part.model;
      t.completed = part.completed;
    }
    // Commands the stream left out (denied by Codex's own sandbox) are in its session file.
    if (!outputs.empty() && !t.session_id.empty()) {
      std::error_code ec;
      for (const auto& f :
           fs::directory_iterator(outputs.back().native_dir / "codex-sessions", ec)) {
        if (auto text = read_file(f.path())) codex::add_unreported_commands(t, *text);
      }
    }
    // Killed by a limit or a signal: say so, the parser only sees a stream that stops.
    if (!outputs.empty() && !outputs.back().exited && !t.completed)
      t.error = fmt::format("codex was killed before it finished ({})",
                            t.error.value_or("no final event"));
    if (t.error) t.final_message.reset();
    harness::renumber_steps(t);
    return t;
  }

 private:
  // Everything but the subcommand: argv[0], env, home, lease, read-only prefix, Landlock.
  result<harness::agent_plan> base_plan(const harness::run_context& ctx) const {
    const auto& c = ctx.candidate;
    harness::agent_plan p;
    fs::path binary = resolve_binary(c);
    if (::access(binary.c_str(), X_OK) != 0)
      return make_error(
          error_kind::not_found,
          "candidate {}: codex binary {} is not installed (run scripts/install-agents "
          "or set binary:)",
          c.id, binary.string());
    p.argv = {binary.string()};
    p.readonly_paths.push_back(install_prefix(binary));
    std::error_code ec;
    if (fs::path real = fs::canonical(binary, ec); !ec) {
      fs::path prefix = install_prefix(binary);
      if (real.string().rfind(prefix.string() + "/", 0) != 0)
        p.readonly_paths.push_back(real.parent_path());
    }

    const std::string mode = string_setting(c, "codex_sandbox", "workspace-write");
    // Codex's own sandbox (bubblewrap) mounts and pivots; a Landlock domain forbids both.
    p.landlock = mode == "bypass";

    p.home.adapter = "codex";
    p.home.directories = {fs::path(codex_home)};
    p.env["CODEX_HOME"] = "/home/agent/" + std::string(codex_home);

    std::string config = "# Written by evalbox for this run.\n";
    if (auto m = string_setting(c, "model"); !m.empty())
      config += fmt::format("model = {}\n", toml_string(m));
    if (auto e = string_setting(c, "effort"); !e.empty())
      config += fmt::format("model_reasoning_effort = {}\n", toml_string(e));
    config += "approval_policy = \"never\"\n";
    config += fmt::format("sandbox_mode = {}\n",
                          toml_string(mode == "bypass" ? "danger-full-access" : mode));
    config += "check_for_update_on_startup = false\n";

    std::string key_var = "OPENAI_API_KEY";
    std::string provider_table;
    if (const auto* prov = c.find("provider"); prov && prov->value.is_object()) {
      auto str = [&](const char* k, std::string fallback) {
        auto it = prov->value.find(k);
        return it != prov->value.end() && it->is_string() ? it->get<std::string>() : fallback;
      };
      const std::string name = str("name", "evalbox");
      if (!str("env_key", "").empty()) key_var = str("env_key", "");
      config += fmt::format("model_provider = {}\n", toml_string(name));
      provider_table =
          fmt::format("\n[model_providers.{}]\nname = {}\nbase_url = {}\nwire_api = {}\n",
                      toml_string(name), toml_string(name), toml_string(str("base_url", "")),
                      toml_string(str("wire_api", "responses")));
      if (!str("env_key", "").empty())
        provider_table += fmt::format("env_key = {}\n", toml_string(key_var));
      // A failed model call is the run's result; retrying it only delays the verdict.
      provider_table += "request_max_retries = 0\nstream_max_retries = 0\n";
    }
    config += "\n[analytics]\nenabled = false\n";
    // apps: with an auth.json present, Codex otherwise starts ChatGPT's apps MCP server and
    // retries it for the whole run (seconds of delay with no network beyond the model).
    config += "\n[features]\nplugins = false\napps = false\n";
    config += provider_table;
    const fs::path config_target = fs::path(codex_home) / "config.toml";
    if (!overridden_by_home_files(c, config_target))
      p.home.files.push_back({config_target, config, 0600});

    if (auto var = string_setting(c, "api_key_env"); !var.empty()) {
      const char* value = std::getenv(var.c_str());
      if (!value || !*value)
        return make_error(error_kind::invalid_argument,
                          "candidate {}: api_key_env {} is not set in evalbox's environment", c.id,
                          var);
      log::redact_secret(value);
      p.env[key_var] = value;
    }
    if (auto handle = auth_handle(c)) {
      auto it = ctx.credentials.find(*handle);
      if (it == ctx.credentials.end())
        return make_error(error_kind::invalid_argument,
                          "candidate {}: credential '{}' is not in the suite's credentials", c.id,
                          *handle);
      p.secrets.push_back({*handle, it->second, fs::path(codex_home) / "auth.json"});
    }
    p.stdout_name = "stdout.jsonl";
    return p;
  }
};

}  // namespace

std::unique_ptr<harness::adapter> make_codex_adapter() { return std::make_unique<codex_adapter>(); }

}  // namespace evalbox::adapters
