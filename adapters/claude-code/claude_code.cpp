// adapter: claude-code (see claude_code.h): settings, CLAUDE_CONFIG_DIR, argv, and the
// transcript.
#include "adapters/claude-code/claude_code.h"

#include <filesystem>
#include <iterator>

#include "adapters/claude-code/transcript.h"
#include "base/fs.h"
#include "harness/agent/client_exit.h"
#include "harness/agent/extensions.h"
#include "harness/agent/native.h"
#include "harness/agent/settings.h"
#include "sandbox/spec/system_paths.h"

namespace evalbox::adapters::claude_code {

namespace {

namespace fs = std::filesystem;
using harness::config_error;
using harness::string_setting;

constexpr std::string_view config_dir = ".claude";  // relative to /home/agent
const std::vector<std::string> known_settings = {
    "binary",           "model",           "base_url",     "api_key_env",
    "credentials_file", "permission_mode", "allowed_tools"};
const std::vector<std::string> permission_modes = {"bypass",  "acceptEdits", "auto",
                                                   "default", "dontAsk",     "plan"};

// The hook events Claude Code 2.1 runs hooks on (its settings' `hooks` keys).
const std::vector<std::string> hook_events = {
    "PreToolUse",   "PostToolUse",      "PostToolUseFailure", "PermissionRequest",
    "Notification", "UserPromptSubmit", "SessionStart",       "SessionEnd",
    "Stop",         "SubagentStart",    "SubagentStop",       "PreCompact",
    "PostCompact"};
// Below CLAUDE_CONFIG_DIR: user skills (skills/NAME/SKILL.md), user settings (hooks), and the
// file --mcp-config reads.
constexpr std::string_view skills_dir = "skills";
constexpr std::string_view settings_file = "settings.json";
constexpr std::string_view mcp_file = "evalbox-mcp.json";

// Where scripts/install-agents puts the pinned client.
fs::path default_binary() {
  return harness::agent_cache_dir() / fmt::format("claude-{}", claude_code_pinned_version) / "bin" /
         "claude";
}

// The permission mode in effect: the setting, else `default` when allowed_tools names the
// tools, else `bypass` (the evalbox sandbox is the boundary; headless prompts cannot be
// answered).
std::string permission_mode(const harness::candidate_spec& c) {
  if (auto m = string_setting(c, "permission_mode"); !m.empty()) return m;
  return c.find("allowed_tools") ? "default" : "bypass";
}

std::optional<std::string> session_id(const fs::path& stdout_path) {
  auto text = harness::read_native_stream(stdout_path);
  if (!text) return std::nullopt;
  auto t = claude_code::parse_claude_stream_json(*text);
  if (!t || t->session_id.empty()) return std::nullopt;
  return t->session_id;
}

// How exits are explained: every stderr line of the client may say why.
const harness::agent_client client{"claude", {}};

// Copies projects/<project>/<session>.jsonl below CLAUDE_CONFIG_DIR into
// native/claude-projects/<project>/.
void keep_native_sessions(const harness::agent_output& out) {
  harness::copy_native_files(
      out.home_dir, fs::path(config_dir) / "projects", out.native_dir / "claude-projects",
      [](const fs::path& rel) -> std::optional<fs::path> {
        if (std::distance(rel.begin(), rel.end()) != 2 || rel.extension() != ".jsonl")
          return std::nullopt;
        return rel;
      });
}

class claude_code_adapter final : public harness::adapter {
 public:
  std::string_view id() const override { return "claude-code"; }

  std::vector<config_error> validate(const harness::candidate_spec& c) const override {
    harness::settings_checker check(c);
    check.known_keys(known_settings);
    check.binary("claude executable", "scripts/install-agents");
    check.non_empty_string("model", "e.g. model: claude-sonnet-4-5");
    check.url("base_url", "http://127.0.0.1:8080");
    check.set_by_gateway("base_url");
    check.env_name("api_key_env", "ANTHROPIC_API_KEY");
    check.credential("credentials_file");
    check.choice("permission_mode", permission_modes);
    if (const auto* t = c.find("allowed_tools")) {
      bool ok = t->value.is_array() && !t->value.empty();
      if (ok)
        for (const auto& v : t->value) ok = ok && v.is_string() && !v.get<std::string>().empty();
      if (!ok)
        check.add({t->where, "allowed_tools must be a non-empty list of tool names",
                   "e.g. allowed_tools: [Bash, Edit, \"Bash(git diff:*)\"]"});
      else if (string_setting(c, "permission_mode") == "bypass")
        check.add({t->where, "allowed_tools has no effect with permission_mode: bypass",
                   "drop one of them"});
    }
    for (const auto& h : c.hooks)
      if (!harness::one_of(h.event, hook_events))
        check.add({h.where, fmt::format("Claude Code has no hook event '{}'", h.event),
                   fmt::format("one of: {}", harness::comma_list(hook_events))});
    const fs::path settings = fs::path(config_dir) / settings_file;
    if (!c.hooks.empty() && c.home_files.count(settings.string()))
      check.add({c.hooks_where,
                 fmt::format("hooks go in {}, which home_files gives as a file of its own",
                             settings.string()),
                 "put the hooks in that file, or drop it from home_files"});
    return check.take();
  }

  result<harness::agent_plan> plan(const harness::run_context& ctx) const override {
    auto p = EB_TRY(base_plan(ctx));
    p.argv.insert(p.argv.end(), {"--", ctx.fixture.prompt});
    return p;
  }

  result<std::optional<harness::agent_plan>> plan_follow_up(
      const harness::run_context& ctx, const harness::agent_output& first) const override {
    if (!ctx.fixture.follow_up) return std::optional<harness::agent_plan>{};
    auto p = EB_TRY(base_plan(ctx));
    if (auto id = session_id(first.stdout_path)) {
      p.argv.insert(p.argv.end(), {"--resume", *id});
    } else {
      p.argv.push_back("--continue");
    }
    p.argv.insert(p.argv.end(), {"--", *ctx.fixture.follow_up});
    return std::optional<harness::agent_plan>(std::move(p));
  }

  result<harness::transcript> read_transcript(
      const harness::run_context&,
      const std::vector<harness::agent_output>& outputs) const override {
    // The parser reads a resumed session's stream appended to the first one.
    std::string all;
    for (const auto& out : outputs) {
      keep_native_sessions(out);
      std::string text = EB_TRY(harness::read_native_stream(out.stdout_path));
      if (!text.empty() && text.back() != '\n') text += '\n';
      all += text;
    }
    auto t = EB_TRY(claude_code::parse_claude_stream_json(all));
    t.agent = "claude-code";
    // One stream for all launches, so the last launch's exit is the one that ended it.
    if (!outputs.empty()) harness::explain_client_exit(t, outputs.back(), client);
    harness::finish_run_transcript(t);
    return t;
  }

 private:
  result<harness::agent_plan> base_plan(const harness::run_context& ctx) const {
    const auto& c = ctx.candidate;
    harness::agent_plan p;
    const fs::path binary =
        EB_TRY(harness::installed_binary(c, default_binary(), "claude", "scripts/install-agents"));
    p.argv = {binary.string(), "-p", "--output-format", "stream-json", "--verbose"};
    if (binary == default_binary()) p.client_version = std::string(claude_code_pinned_version);
    // Its Bash tool runs commands with bash or zsh (it looks for them and will not use sh).
    p.needs_any_of = {"bash", "zsh"};
    p.needs_why = "Claude Code runs its shell commands with bash or zsh";
    for (auto& path : harness::install_paths(binary)) p.readonly_paths.push_back(std::move(path));
    if (auto m = string_setting(c, "model"); !m.empty())
      p.argv.insert(p.argv.end(), {"--model", m});
    const std::string mode = permission_mode(c);
    if (mode == "bypass") {
      p.argv.push_back("--dangerously-skip-permissions");
      // Claude Code refuses to skip permissions as root unless told it is sandboxed; it is
      // uid 0 only inside our user namespace.
      p.env["IS_SANDBOX"] = "1";
    } else {
      p.argv.insert(p.argv.end(), {"--permission-mode", mode});
    }
    if (const auto* t = c.find("allowed_tools"); t && t->value.is_array()) {
      std::string list;
      for (const auto& v : t->value)
        if (v.is_string()) list += (list.empty() ? "" : ",") + v.get<std::string>();
      // One `=`-joined argument: the option is variadic and would swallow what follows.
      p.argv.push_back("--allowedTools=" + list);
    }

    p.home.adapter = "claude-code";
    p.home.directories = {fs::path(config_dir)};
    p.env["CLAUDE_CONFIG_DIR"] = (fs::path(sandbox::sandbox_home) / config_dir).string();
    p.env["DISABLE_TELEMETRY"] = "1";
    p.env["DISABLE_AUTOUPDATER"] = "1";
    p.env["DISABLE_ERROR_REPORTING"] = "1";
    p.env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] = "1";
    if (ctx.gateway) {
      // The run's gateway holds the key on the host; the client gets a placeholder.
      p.env["ANTHROPIC_BASE_URL"] = ctx.gateway->base_url;
      p.env["ANTHROPIC_API_KEY"] = ctx.gateway->placeholder;
    } else {
      if (auto url = string_setting(c, "base_url"); !url.empty()) p.env["ANTHROPIC_BASE_URL"] = url;
      if (auto key = EB_TRY(harness::api_key_from_host(c))) p.env["ANTHROPIC_API_KEY"] = *key;
    }
    if (auto handle = harness::credential_handle(c, "credentials_file"))
      p.secrets.push_back(EB_TRY(
          harness::credential_mount(ctx, *handle, fs::path(config_dir) / ".credentials.json")));
    EB_TRY(add_extensions(ctx, p));
    p.stdout_name = "stdout.jsonl";
    return p;
  }

  // Skills in CLAUDE_CONFIG_DIR/skills/, MCP servers in a file --mcp-config names, hooks in
  // CLAUDE_CONFIG_DIR/settings.json: where Claude Code reads user skills, servers and hooks.
  static status add_extensions(const harness::run_context& ctx, harness::agent_plan& p) {
    const auto& c = ctx.candidate;
    const auto servers_spec = harness::run_mcp_servers(ctx);
    const fs::path home = fs::path(sandbox::sandbox_home);
    EB_TRY(harness::add_skills(c, fs::path(config_dir) / skills_dir, p));
    for (auto& b : EB_TRY(harness::mcp_bundles(c))) p.bundles.push_back(std::move(b));
    for (auto& b : EB_TRY(harness::hook_bundles(c))) p.bundles.push_back(std::move(b));
    if (!servers_spec.empty()) {
      json servers = json::object();
      for (const auto& m : servers_spec) {
        const auto cmd = m.sandbox_command();
        servers[m.name] = {{"type", "stdio"},
                           {"command", cmd.front()},
                           {"args", std::vector<std::string>(cmd.begin() + 1, cmd.end())},
                           {"env", m.env}};
      }
      const fs::path file = fs::path(config_dir) / mcp_file;
      p.home.files.push_back({file, json{{"mcpServers", servers}}.dump(2) + "\n", 0600});
      // One `=`-joined argument: the option is variadic and would swallow what follows.
      p.argv.push_back("--mcp-config=" + (home / file).string());
    }
    if (!c.hooks.empty())
      p.home.files.push_back({fs::path(config_dir) / settings_file,
                              json{{"hooks", harness::command_hooks(c)}}.dump(2) + "\n", 0600});
    return {};
  }
};

}  // namespace

std::unique_ptr<harness::adapter> make_adapter() { return std::make_unique<claude_code_adapter>(); }

}  // namespace evalbox::adapters::claude_code
