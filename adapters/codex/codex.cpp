// adapter: codex (see codex.h): settings, CODEX_HOME and config.toml, argv, and the transcript.
#include "adapters/codex/codex.h"

#include <unistd.h>

#include "adapters/codex/transcript.h"
#include "base/fs.h"
#include "harness/agent/client_exit.h"
#include "harness/agent/extensions.h"
#include "harness/agent/native.h"
#include "harness/agent/settings.h"
#include "sandbox/spec/system_paths.h"

namespace evalbox::adapters::codex {

namespace fs = std::filesystem;
using harness::comma_list;
using harness::config_error;
using harness::is_env_name;
using harness::one_of;
using harness::string_setting;

namespace {

constexpr std::string_view codex_home = ".codex";  // relative to /home/agent
const std::vector<std::string> known_settings = {
    "binary", "model", "effort", "provider", "api_key_env", "auth_file", "codex_sandbox"};
const std::vector<std::string> sandbox_modes = {"workspace-write", "read-only", "bypass"};
const std::vector<std::string> efforts = {"minimal", "low", "medium", "high", "xhigh"};
const std::vector<std::string> wire_apis = {"responses", "chat"};

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

// Where Codex reads a user's skills: $HOME/.agents/skills/NAME/SKILL.md (the open agent skills
// layout; https://developers.openai.com/codex/skills).
constexpr std::string_view skills_dir = ".agents/skills";

// Where scripts/install-agents puts the pinned client.
fs::path default_binary() {
  return harness::agent_cache_dir() / fmt::format("codex-{}", codex_pinned_version) / "bin" /
         "codex";
}

// The native client inside the npm package that `binary` (bin/codex -> codex.js) belongs to:
// codex.js is a Node launcher that only picks this binary and execs it. In a fixture's image
// there may be no Node, and the binary (static, musl) needs nothing: it is run directly, with
// the variables the launcher would set. Empty when the layout is not the npm package's.
fs::path native_client(const fs::path& binary) {
  std::error_code ec;
  const fs::path script = fs::canonical(binary, ec);
  if (ec || script.extension() != ".js") return {};
  const fs::path package = script.parent_path().parent_path();
#if defined(__aarch64__)
  const char* platform = "codex-linux-arm64/vendor/aarch64-unknown-linux-musl";
#else
  const char* platform = "codex-linux-x64/vendor/x86_64-unknown-linux-musl";
#endif
  const fs::path native = package / "node_modules/@openai" / platform / "bin/codex";
  return ::access(native.c_str(), X_OK) == 0 ? native : fs::path();
}

// [mcp_servers.NAME] tables: each server's command, arguments and environment. Its tools are
// approved: `codex exec` runs with the approval policy "never" (evalbox's sandbox is the
// fence), under which a tool that needs approval is refused ("MCP tool call requires approval,
// but approval policy is never") — the candidate's own server would be offered and never run.
std::string mcp_tables(const std::vector<harness::mcp_server_spec>& servers) {
  std::string out;
  for (const auto& m : servers) {
    const auto cmd = m.sandbox_command();
    std::string args;
    for (size_t i = 1; i < cmd.size(); ++i) args += (i > 1 ? ", " : "") + toml_string(cmd[i]);
    out += fmt::format(
        "\n[mcp_servers.{}]\ncommand = {}\nargs = [{}]\ndefault_tools_approval_mode = "
        "\"approve\"\n",
        toml_string(m.name), toml_string(cmd.front()), args);
    if (!m.env.empty()) {
      std::string env;
      for (const auto& [k, v] : m.env)
        env += fmt::format("{}{} = {}", env.empty() ? "" : ", ", toml_string(k), toml_string(v));
      out += fmt::format("env = {{ {} }}\n", env);
    }
  }
  return out;
}

bool overridden_by_home_files(const harness::candidate_spec& c, const fs::path& target) {
  return c.home_files.count(target.string()) != 0;
}

// The thread id from a finished `codex exec --json` stream (its thread.started event).
std::optional<std::string> thread_id(const fs::path& stdout_path) {
  auto text = harness::read_native_stream(stdout_path);
  if (!text) return std::nullopt;
  auto t = codex::parse_codex_exec_json(*text);
  if (!t || t->session_id.empty()) return std::nullopt;
  return t->session_id;
}

// How exits are explained: the client's stdin notice says nothing about the run.
const harness::agent_client client{"codex", [](std::string_view line) {
                                     return line != "Reading additional input from stdin...";
                                   }};

// Copies every sessions/**/rollout-*.jsonl below CODEX_HOME into native/codex-sessions/.
void keep_native_sessions(const harness::agent_output& out) {
  harness::copy_native_files(
      out.home_dir, fs::path(codex_home) / "sessions", out.native_dir / "codex-sessions",
      [](const fs::path& rel) -> std::optional<fs::path> {
        if (!rel.filename().string().starts_with("rollout-") || rel.extension() != ".jsonl")
          return std::nullopt;
        return rel.filename();
      });
}

class codex_adapter final : public harness::adapter {
 public:
  std::string_view id() const override { return "codex"; }

  std::vector<config_error> validate(const harness::candidate_spec& c) const override {
    harness::settings_checker check(c);
    check.known_keys(known_settings);
    check.binary("codex executable", "scripts/install-agents");
    check.non_empty_string("model", "e.g. model: gpt-5-codex");
    check.choice("effort", efforts);
    check.choice("codex_sandbox", sandbox_modes);
    check.env_name("api_key_env", "OPENAI_API_KEY");
    check.credential("auth_file");
    if (const auto* p = c.find("provider")) {
      if (!p->value.is_object()) {
        check.add({p->where, "provider must be a mapping",
                   "provider: {base_url: URL, env_key: NAME, wire_api: responses}"});
      } else {
        const std::vector<std::string> keys = {"base_url", "env_key", "wire_api", "name"};
        for (const auto& [k, v] : p->value.items()) {
          if (!one_of(k, keys))
            check.add({p->where, fmt::format("unknown provider key '{}'", k),
                       fmt::format("known keys: {}", comma_list(keys))});
          else if (!v.is_string() || v.get<std::string>().empty())
            check.add({p->where, fmt::format("provider.{} must be a non-empty string", k), ""});
        }
        auto str = [&](const char* k) {
          auto it = p->value.find(k);
          return it != p->value.end() && it->is_string() ? it->get<std::string>() : std::string();
        };
        if (c.gateway && !str("base_url").empty())
          check.add({p->where,
                     "provider.base_url is set by the candidate's gateway (it points Codex at the "
                     "gateway, which forwards to gateway.upstream)",
                     "remove it; the upstream goes in gateway: {upstream: URL}"});
        else if (!c.gateway && str("base_url").empty())
          check.add({p->where, "provider has no base_url",
                     "e.g. base_url: \"http://127.0.0.1:8080/v1\""});
        if (!str("env_key").empty() && !is_env_name(str("env_key")))
          check.add({p->where, "provider.env_key must be an environment variable name", ""});
        if (!str("wire_api").empty() && !one_of(str("wire_api"), wire_apis))
          check.add({p->where, fmt::format("unknown provider.wire_api '{}'", str("wire_api")),
                     fmt::format("one of: {}", comma_list(wire_apis))});
      }
    }
    // Codex 0.171 runs only the hooks whose content it has trusted (a hash per hook in its own
    // state, set interactively); a hook evalbox wrote would never run.
    for (auto& e : harness::unsupported_extensions(
             c, {.skills = {},
                .mcp_servers = {},
                .hooks = "Codex runs only hooks it has trusted in its own state (an "
                         "interactive step), so a hook written for a run would never run"}))
      check.add(std::move(e));
    const fs::path config = fs::path(codex_home) / "config.toml";
    if (!c.mcp_servers.empty() && overridden_by_home_files(c, config))
      check.add({c.mcp_servers_where,
                 fmt::format("MCP servers go in {}, which home_files gives as a file of its own",
                             config.string()),
                 "add [mcp_servers.NAME] tables to that file, or drop it from home_files"});
    return check.take();
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
    auto parse = [](const auto& out) -> result<harness::transcript> {
      keep_native_sessions(out);
      auto text = harness::read_native_stream(out.stdout_path);
      if (!text) return std::unexpected(std::move(text).error());
      return codex::parse_codex_exec_json(*text);
    };
    auto t = EB_TRY(harness::merge_launches("codex", outputs, client, parse));
    // Commands the stream left out (denied by Codex's own sandbox) are in its session file.
    if (!outputs.empty() && !t.session_id.empty()) {
      std::error_code ec;
      for (const auto& f :
           fs::directory_iterator(outputs.back().native_dir / "codex-sessions", ec)) {
        codex::add_unreported_commands(t, EB_TRY(harness::read_native_stream(f.path())));
      }
    }
    harness::finish_run_transcript(t);
    return t;
  }

 private:
  // Everything but the subcommand: argv[0], env, home, lease, read-only prefix, Landlock.
  result<harness::agent_plan> base_plan(const harness::run_context& ctx) const {
    const auto& c = ctx.candidate;
    harness::agent_plan p;
    const fs::path binary =
        EB_TRY(harness::installed_binary(c, default_binary(), "codex", "scripts/install-agents"));
    p.argv = {binary.string()};
    if (binary == default_binary()) p.client_version = std::string(codex_pinned_version);
    for (auto& path : harness::install_paths(binary)) p.readonly_paths.push_back(std::move(path));
    if (ctx.fixture.environment) {
      if (const fs::path native = native_client(binary); !native.empty()) {
        p.argv = {native.string()};
        p.env["CODEX_MANAGED_PACKAGE_ROOT"] = fs::canonical(binary).parent_path().parent_path();
        p.env["CODEX_MANAGED_BY_NPM"] = "1";
      }
    }

    const std::string mode = string_setting(c, "codex_sandbox", "workspace-write");
    // Codex's own sandbox (bubblewrap) mounts and pivots; a Landlock domain forbids both.
    p.landlock = mode == "bypass";

    p.home.adapter = "codex";
    p.home.directories = {fs::path(codex_home)};
    p.env["CODEX_HOME"] = (fs::path(sandbox::sandbox_home) / codex_home).string();

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
    const auto* prov = c.find("provider");
    if ((prov && prov->value.is_object()) || ctx.gateway) {
      auto str = [&](const char* k, std::string fallback) {
        if (!prov || !prov->value.is_object()) return fallback;
        auto it = prov->value.find(k);
        return it != prov->value.end() && it->is_string() ? it->get<std::string>() : fallback;
      };
      const std::string name = str("name", "evalbox");
      if (!str("env_key", "").empty()) key_var = str("env_key", "");
      std::string base_url = str("base_url", "");
      if (ctx.gateway) {
        // The run's gateway holds the key on the host; the client gets a placeholder.
        base_url = ctx.gateway->base_url;
        key_var = "EVALBOX_GATEWAY_KEY";
        p.env[key_var] = ctx.gateway->placeholder;
      }
      config += fmt::format("model_provider = {}\n", toml_string(name));
      provider_table = fmt::format(
          "\n[model_providers.{}]\nname = {}\nbase_url = {}\nwire_api = {}\n", toml_string(name),
          toml_string(name), toml_string(base_url), toml_string(str("wire_api", "responses")));
      if (!str("env_key", "").empty() || ctx.gateway)
        provider_table += fmt::format("env_key = {}\n", toml_string(key_var));
      // A failed model call is the run's result; retrying it only delays the verdict.
      provider_table += "request_max_retries = 0\nstream_max_retries = 0\n";
    }
    config += "\n[analytics]\nenabled = false\n";
    // apps: with an auth.json present, Codex otherwise starts ChatGPT's apps MCP server and
    // retries it for the whole run (seconds of delay with no network beyond the model).
    config += "\n[features]\nplugins = false\napps = false\n";
    config += provider_table;
    config += mcp_tables(harness::run_mcp_servers(ctx));
    EB_TRY(harness::add_skills(c, skills_dir, p));
    for (auto& b : EB_TRY(harness::mcp_bundles(c))) p.bundles.push_back(std::move(b));
    const fs::path config_target = fs::path(codex_home) / "config.toml";
    if (!overridden_by_home_files(c, config_target))
      p.home.files.push_back({config_target, config, 0600});

    if (!ctx.gateway)
      if (auto key = EB_TRY(harness::api_key_from_host(c))) p.env[key_var] = *key;
    if (auto handle = harness::credential_handle(c, "auth_file"))
      p.secrets.push_back(
          EB_TRY(harness::credential_mount(ctx, *handle, fs::path(codex_home) / "auth.json")));
    p.stdout_name = "stdout.jsonl";
    return p;
  }
};

}  // namespace

std::unique_ptr<harness::adapter> make_adapter() { return std::make_unique<codex_adapter>(); }

}  // namespace evalbox::adapters::codex
