// adapter: gemini (see gemini.h): settings, ~/.gemini/settings.json, argv, and the transcript.
#include "adapters/gemini/gemini.h"

#include <filesystem>
#include <iterator>

#include "adapters/gemini/transcript.h"
#include "base/fs.h"
#include "harness/agent/client_exit.h"
#include "harness/agent/extensions.h"
#include "harness/agent/native.h"
#include "harness/agent/settings.h"

namespace evalbox::adapters::gemini {

namespace {

namespace fs = std::filesystem;
using harness::config_error;
using harness::string_setting;

constexpr std::string_view config_dir = ".gemini";  // relative to /home/agent
// The hook events Gemini CLI 0.61 runs hooks on (its settings' `hooks` keys).
const std::vector<std::string> hook_events = {"BeforeTool",   "AfterTool",   "BeforeAgent",
                                              "AfterAgent",   "BeforeModel", "AfterModel",
                                              "SessionStart", "SessionEnd",  "BeforeToolSelection",
                                              "Notification", "PreCompress"};
const std::vector<std::string> known_settings = {"binary", "model", "base_url", "api_key_env",
                                                 "approval_mode"};
const std::vector<std::string> approval_modes = {"yolo", "auto_edit", "default", "plan"};

// Where scripts/install-agents puts the pinned client.
fs::path default_binary() {
  return harness::agent_cache_dir() / fmt::format("gemini-{}", gemini_pinned_version) / "bin" /
         "gemini";
}

// How exits are explained: the client's own chatter on every run says nothing about it.
const harness::agent_client client{
    "gemini", [](std::string_view line) {
      return line.find("YOLO mode is enabled") == std::string_view::npos &&
             !line.starts_with("[STARTUP]") &&
             line.find("Ripgrep is not available") == std::string_view::npos;
    }};

// Copies tmp/<project>/chats/* below ~/.gemini into native/gemini-chats/<project>/.
void keep_native_sessions(const harness::agent_output& out) {
  harness::copy_native_files(out.home_dir, fs::path(config_dir) / "tmp",
                             out.native_dir / "gemini-chats",
                             [](const fs::path& rel) -> std::optional<fs::path> {
                               auto part = rel.begin();
                               if (std::distance(part, rel.end()) != 3) return std::nullopt;
                               fs::path project = *part++;
                               if (*part++ != "chats") return std::nullopt;
                               return project / *part;
                             });
}

class gemini_adapter final : public harness::adapter {
 public:
  std::string_view id() const override { return "gemini"; }

  std::vector<config_error> validate(const harness::candidate_spec& c) const override {
    harness::settings_checker check(c);
    check.known_keys(known_settings);
    check.binary("gemini executable", "scripts/install-agents gemini");
    check.non_empty_string("model", "e.g. model: gemini-2.5-flash");
    check.url("base_url", "http://127.0.0.1:8080");
    check.set_by_gateway("base_url");
    check.env_name("api_key_env", "GEMINI_API_KEY");
    check.choice("approval_mode", approval_modes);
    for (const auto& h : c.hooks)
      if (!harness::one_of(h.event, hook_events))
        check.add({h.where, fmt::format("Gemini CLI has no hook event '{}'", h.event),
                   fmt::format("one of: {}", harness::comma_list(hook_events))});
    const fs::path settings = fs::path(config_dir) / "settings.json";
    if (!c.mcp_servers.empty() && c.home_files.count(settings.string()))
      check.add({c.mcp_servers_where,
                 fmt::format("MCP servers go in {}, which home_files gives as a file of its own",
                             settings.string()),
                 "add mcpServers to that file, or drop it from home_files"});
    if (!c.hooks.empty() && c.home_files.count(settings.string()))
      check.add({c.hooks_where,
                 fmt::format("hooks go in {}, which home_files gives as a file of its own",
                             settings.string()),
                 "put the hooks in that file, or drop it from home_files"});
    return check.take();
  }

  result<harness::agent_plan> plan(const harness::run_context& ctx) const override {
    auto p = EB_TRY(base_plan(ctx));
    // `--prompt=` keeps a prompt that starts with '-' from being read as an option.
    p.argv.push_back("--prompt=" + ctx.fixture.prompt);
    return p;
  }

  result<std::optional<harness::agent_plan>> plan_follow_up(
      const harness::run_context& ctx, const harness::agent_output&) const override {
    if (!ctx.fixture.follow_up) return std::optional<harness::agent_plan>{};
    auto p = EB_TRY(base_plan(ctx));
    // The home holds exactly this run's sessions: the latest is the first launch's.
    p.argv.insert(p.argv.end(), {"--resume", "latest", "--prompt=" + *ctx.fixture.follow_up});
    return std::optional<harness::agent_plan>(std::move(p));
  }

  result<harness::transcript> read_transcript(
      const harness::run_context&,
      const std::vector<harness::agent_output>& outputs) const override {
    auto parse = [](const auto& out) -> result<harness::transcript> {
      keep_native_sessions(out);
      auto text = harness::read_native_stream(out.stdout_path);
      if (!text) return std::unexpected(std::move(text).error());
      return gemini::parse_gemini_stream_json(*text);
    };
    auto t = EB_TRY(harness::merge_launches("gemini", outputs, client, parse));
    harness::finish_run_transcript(t);
    return t;
  }

 private:
  result<harness::agent_plan> base_plan(const harness::run_context& ctx) const {
    const auto& c = ctx.candidate;
    harness::agent_plan p;
    const fs::path binary = EB_TRY(
        harness::installed_binary(c, default_binary(), "gemini", "scripts/install-agents gemini"));
    p.argv = {binary.string(), "--output-format", "stream-json", "--skip-trust"};
    if (binary == default_binary()) p.client_version = std::string(gemini_pinned_version);
    p.readonly_paths.push_back(harness::install_prefix(binary));
    if (auto m = string_setting(c, "model"); !m.empty())
      p.argv.insert(p.argv.end(), {"--model", m});
    const std::string mode = string_setting(c, "approval_mode", "yolo");
    p.argv.push_back("--approval-mode=" + mode);

    p.home.adapter = "gemini";
    p.home.directories = {fs::path(config_dir)};
    const fs::path settings = fs::path(config_dir) / "settings.json";
    if (!c.home_files.count(settings.string())) {
      json j = {{"security", {{"auth", {{"selectedType", "gemini-api-key"}}}}},
                {"telemetry", {{"enabled", false}}},
                {"privacy", {{"usageStatisticsEnabled", false}}},
                {"general", {{"disableAutoUpdate", true}, {"disableUpdateNag", true}}}};
      if (const auto list = harness::run_mcp_servers(ctx); !list.empty()) {
        json servers = json::object();
        for (const auto& m : list) {
          const auto cmd = m.sandbox_command();
          servers[m.name] = {{"command", cmd.front()},
                             {"args", std::vector<std::string>(cmd.begin() + 1, cmd.end())},
                             {"env", m.env}};
        }
        j["mcpServers"] = std::move(servers);
      }
      if (!c.hooks.empty()) j["hooks"] = harness::command_hooks(c);
      p.home.files.push_back({settings, j.dump(2) + "\n", 0600});
    }
    if (ctx.gateway) {
      // The run's gateway holds the key on the host; the client gets a placeholder.
      p.env["GOOGLE_GEMINI_BASE_URL"] = ctx.gateway->base_url;
      p.env["GEMINI_API_KEY"] = ctx.gateway->placeholder;
    } else {
      if (auto url = string_setting(c, "base_url"); !url.empty())
        p.env["GOOGLE_GEMINI_BASE_URL"] = url;
      if (auto key = EB_TRY(harness::api_key_from_host(c))) p.env["GEMINI_API_KEY"] = *key;
    }
    // User skills: where Gemini CLI reads them (~/.gemini/skills/NAME/SKILL.md).
    EB_TRY(harness::add_skills(c, fs::path(config_dir) / "skills", p));
    for (auto& b : EB_TRY(harness::mcp_bundles(c))) p.bundles.push_back(std::move(b));
    for (auto& b : EB_TRY(harness::hook_bundles(c))) p.bundles.push_back(std::move(b));
    p.stdout_name = "stdout.jsonl";
    return p;
  }
};

}  // namespace

std::unique_ptr<harness::adapter> make_adapter() { return std::make_unique<gemini_adapter>(); }

}  // namespace evalbox::adapters::gemini
