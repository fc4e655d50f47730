// adapter: claude-code (see claude_code.h): settings, CLAUDE_CONFIG_DIR, argv, and the
// transcript.
#include "adapters/claude-code/claude_code.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "adapters/claude-code/transcript.h"
#include "sandbox/base/fs.h"
#include "sandbox/base/log.h"

namespace evalbox::adapters {

namespace {

namespace fs = std::filesystem;
using harness::config_error;

constexpr std::string_view config_dir = ".claude";  // relative to /home/agent
const std::vector<std::string> known_settings = {
    "binary",           "model",           "base_url",     "api_key_env",
    "credentials_file", "permission_mode", "allowed_tools"};
const std::vector<std::string> permission_modes = {"bypass",  "acceptEdits", "auto",
                                                   "default", "dontAsk",     "plan"};

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

bool one_of(const std::string& s, const std::vector<std::string>& v) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string string_setting(const harness::candidate_spec& c, std::string_view key,
                           std::string fallback = {}) {
  const auto* s = c.find(key);
  return s && s->value.is_string() ? s->value.get<std::string>() : fallback;
}

bool is_env_name(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
  });
}

fs::path agent_cache() {
  const char* env = std::getenv("EVALBOX_AGENT_CACHE");
  return env && *env ? fs::path(env) : fs::path("/var/cache/evalbox/agents");
}

fs::path resolve_binary(const harness::candidate_spec& c) {
  std::string b = string_setting(c, "binary");
  if (b.empty())
    return agent_cache() / fmt::format("claude-{}", claude_code_pinned_version) / "bin" / "claude";
  if (b.front() == '/') return fs::path(b);
  return normalize(fs::path(c.where.file).parent_path() / b);
}

fs::path install_prefix(const fs::path& binary) {
  fs::path dir = binary.parent_path();
  return dir.filename() == "bin" ? dir.parent_path() : dir;
}

std::optional<std::string> credentials_handle(const harness::candidate_spec& c) {
  if (auto h = string_setting(c, "credentials_file"); !h.empty()) return h;
  if (c.credentials.size() == 1 && !c.find("api_key_env")) return c.credentials.front();
  return std::nullopt;
}

// The permission mode in effect: the setting, else `default` when allowed_tools names the
// tools, else `bypass` (the evalbox sandbox is the boundary; headless prompts cannot be
// answered).
std::string permission_mode(const harness::candidate_spec& c) {
  if (auto m = string_setting(c, "permission_mode"); !m.empty()) return m;
  return c.find("allowed_tools") ? "default" : "bypass";
}

std::optional<std::string> session_id(const fs::path& stdout_path) {
  auto text = read_file(stdout_path);
  if (!text) return std::nullopt;
  auto t = claude_code::parse_claude_stream_json(*text);
  if (!t || t->session_id.empty()) return std::nullopt;
  return t->session_id;
}

std::string tail_lines(const fs::path& path, size_t max_lines) {
  std::string text = read_file(path, 1u << 20).value_or("");
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  std::string out;
  for (size_t i = lines.size() > max_lines ? lines.size() - max_lines : 0; i < lines.size(); ++i)
    out += (out.empty() ? "" : " | ") + lines[i];
  return log::scrub(out);
}

// Copies projects/<project>/<session>.jsonl below CLAUDE_CONFIG_DIR into
// native/claude-projects/<project>/.
void keep_native_sessions(const harness::agent_output& out) {
  std::error_code ec;
  fs::path projects = out.home_dir / config_dir / "projects";
  if (!fs::is_directory(projects, ec)) return;
  for (const auto& project : fs::directory_iterator(projects, ec)) {
    if (project.is_symlink(ec) || !project.is_directory(ec)) continue;
    for (const auto& f : fs::directory_iterator(project.path(), ec)) {
      if (f.is_symlink(ec) || !f.is_regular_file(ec) || f.path().extension() != ".jsonl") continue;
      fs::path dest = out.native_dir / "claude-projects" / project.path().filename();
      (void)make_dirs(dest);
      fs::copy_file(f.path(), dest / f.path().filename(), fs::copy_options::overwrite_existing, ec);
    }
  }
}

class claude_code_adapter final : public harness::adapter {
 public:
  std::string_view id() const override { return "claude-code"; }

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
    if (const auto* b = need_string("binary", "the path of the claude executable")) {
      fs::path p = resolve_binary(c);
      if (::access(p.c_str(), X_OK) != 0)
        errors.push_back({b->where,
                          fmt::format("binary '{}' is not an executable file", p.string()),
                          "give the claude executable (absolute or relative to the suite file), "
                          "or omit binary and run scripts/install-agents"});
    }
    need_string("model", "e.g. model: claude-sonnet-4-5");
    if (const auto* u = need_string("base_url", "e.g. base_url: \"http://127.0.0.1:8080\"")) {
      const std::string url = u->value.get<std::string>();
      if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0)
        errors.push_back({u->where, "base_url must start with http:// or https://", ""});
    }
    if (const auto* k = need_string("api_key_env", "the name of a host environment variable"))
      if (!is_env_name(k->value.get<std::string>()))
        errors.push_back({k->where, "api_key_env must be an environment variable name",
                          "e.g. api_key_env: ANTHROPIC_API_KEY (the value is read on the host)"});
    if (const auto* a = need_string("credentials_file", "a handle from the suite's credentials")) {
      const std::string h = a->value.get<std::string>();
      if (std::find(c.credentials.begin(), c.credentials.end(), h) == c.credentials.end())
        errors.push_back(
            {a->where,
             fmt::format("credentials_file '{}' is not one of this candidate's credentials", h),
             fmt::format("add credential: {} (a handle of the suite's credentials)", h)});
    }
    if (const auto* m = need_string("permission_mode", join(permission_modes)))
      if (!one_of(m->value.get<std::string>(), permission_modes))
        errors.push_back({m->where,
                          fmt::format("unknown permission_mode '{}'", m->value.get<std::string>()),
                          fmt::format("one of: {}", join(permission_modes))});
    if (const auto* t = c.find("allowed_tools")) {
      bool ok = t->value.is_array() && !t->value.empty();
      if (ok)
        for (const auto& v : t->value) ok = ok && v.is_string() && !v.get<std::string>().empty();
      if (!ok)
        errors.push_back({t->where, "allowed_tools must be a non-empty list of tool names",
                          "e.g. allowed_tools: [Bash, Edit, \"Bash(git diff:*)\"]"});
      else if (string_setting(c, "permission_mode") == "bypass")
        errors.push_back({t->where, "allowed_tools has no effect with permission_mode: bypass",
                          "drop one of them"});
    }
    return errors;
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
      std::string text = read_file(out.stdout_path).value_or("");
      if (!text.empty() && text.back() != '\n') text += '\n';
      all += text;
    }
    auto t = EB_TRY(claude_code::parse_claude_stream_json(all));
    t.agent = "claude-code";
    if (!outputs.empty()) {
      const auto& last = outputs.back();
      // A client that exits non-zero before its first event writes its reason to stderr only.
      if (last.exited && last.exit_code != 0 && !t.completed &&
          (!t.error || t.error->starts_with("interrupted"))) {
        if (std::string why = tail_lines(last.stderr_path, 5); !why.empty())
          t.error = fmt::format("claude exited with status {}: {}", last.exit_code, why);
        else if (!t.error)
          t.error = fmt::format("claude exited with status {}", last.exit_code);
      }
      // Killed by a limit or a signal: say so, the parser only sees a stream that stops.
      if (!last.exited && !t.completed)
        t.error = fmt::format("claude was killed before it finished ({})",
                              t.error.value_or("no result event"));
      else if (!t.error && !t.completed)
        t.error = "claude stopped without a result event";
    }
    if (t.error) t.final_message.reset();
    return t;
  }

 private:
  result<harness::agent_plan> base_plan(const harness::run_context& ctx) const {
    const auto& c = ctx.candidate;
    harness::agent_plan p;
    fs::path binary = resolve_binary(c);
    if (::access(binary.c_str(), X_OK) != 0)
      return make_error(error_kind::not_found,
                        "candidate {}: claude binary {} is not installed (run "
                        "scripts/install-agents or set binary:)",
                        c.id, binary.string());
    p.argv = {binary.string(), "-p", "--output-format", "stream-json", "--verbose"};
    p.readonly_paths.push_back(install_prefix(binary));
    std::error_code ec;
    if (fs::path real = fs::canonical(binary, ec); !ec) {
      fs::path prefix = install_prefix(binary);
      if (real.string().rfind(prefix.string() + "/", 0) != 0)
        p.readonly_paths.push_back(real.parent_path());
    }
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
    p.env["CLAUDE_CONFIG_DIR"] = "/home/agent/" + std::string(config_dir);
    p.env["DISABLE_TELEMETRY"] = "1";
    p.env["DISABLE_AUTOUPDATER"] = "1";
    p.env["DISABLE_ERROR_REPORTING"] = "1";
    p.env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] = "1";
    if (auto url = string_setting(c, "base_url"); !url.empty()) p.env["ANTHROPIC_BASE_URL"] = url;

    if (auto var = string_setting(c, "api_key_env"); !var.empty()) {
      const char* value = std::getenv(var.c_str());
      if (!value || !*value)
        return make_error(error_kind::invalid_argument,
                          "candidate {}: api_key_env {} is not set in evalbox's environment", c.id,
                          var);
      log::redact_secret(value);
      p.env["ANTHROPIC_API_KEY"] = value;
    }
    if (auto handle = credentials_handle(c)) {
      auto it = ctx.credentials.find(*handle);
      if (it == ctx.credentials.end())
        return make_error(error_kind::invalid_argument,
                          "candidate {}: credential '{}' is not in the suite's credentials", c.id,
                          *handle);
      p.secrets.push_back({*handle, it->second, fs::path(config_dir) / ".credentials.json"});
    }
    p.stdout_name = "stdout.jsonl";
    return p;
  }
};

}  // namespace

std::unique_ptr<harness::adapter> make_claude_code_adapter() {
  return std::make_unique<claude_code_adapter>();
}

}  // namespace evalbox::adapters
