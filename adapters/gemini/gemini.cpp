// adapter: gemini (see gemini.h): settings, ~/.gemini/settings.json, argv, and the transcript.
#include "adapters/gemini/gemini.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "adapters/gemini/transcript.h"
#include "sandbox/base/fs.h"
#include "sandbox/base/log.h"

namespace evalbox::adapters {

namespace {

namespace fs = std::filesystem;
using harness::config_error;

constexpr std::string_view config_dir = ".gemini";  // relative to /home/agent
const std::vector<std::string> known_settings = {"binary", "model", "base_url", "api_key_env",
                                                 "approval_mode"};
const std::vector<std::string> approval_modes = {"yolo", "auto_edit", "default", "plan"};

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

fs::path resolve_binary(const harness::candidate_spec& c) {
  std::string b = string_setting(c, "binary");
  if (b.empty()) {
    const char* env = std::getenv("EVALBOX_AGENT_CACHE");
    fs::path cache = env && *env ? fs::path(env) : fs::path("/var/cache/evalbox/agents");
    return cache / fmt::format("gemini-{}", gemini_pinned_version) / "bin" / "gemini";
  }
  if (b.front() == '/') return fs::path(b);
  return normalize(fs::path(c.where.file).parent_path() / b);
}

fs::path install_prefix(const fs::path& binary) {
  fs::path dir = binary.parent_path();
  return dir.filename() == "bin" ? dir.parent_path() : dir;
}

std::string tail_lines(const fs::path& path, size_t max_lines) {
  std::string text = read_file(path, 1u << 20).value_or("");
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    // The client's own chatter on every run.
    if (!line.empty() && line.find("YOLO mode is enabled") == std::string::npos &&
        line.rfind("[STARTUP]", 0) != 0 &&
        line.find("Ripgrep is not available") == std::string::npos)
      lines.push_back(line);
    start = end + 1;
  }
  std::string out;
  for (size_t i = lines.size() > max_lines ? lines.size() - max_lines : 0; i < lines.size(); ++i)
    out += (out.empty() ? "" : " | ") + lines[i];
  return log::scrub(out);
}

// Copies tmp/<project>/chats/*.jsonl below ~/.gemini into native/gemini-chats/<project>/.
void keep_native_sessions(const harness::agent_output& out) {
  std::error_code ec;
  fs::path tmp = out.home_dir / config_dir / "tmp";
  if (!fs::is_directory(tmp, ec)) return;
  for (const auto& project : fs::directory_iterator(tmp, ec)) {
    fs::path chats = project.path() / "chats";
    if (project.is_symlink(ec) || !fs::is_directory(chats, ec)) continue;
    for (const auto& f : fs::directory_iterator(chats, ec)) {
      if (f.is_symlink(ec) || !f.is_regular_file(ec)) continue;
      fs::path dest = out.native_dir / "gemini-chats" / project.path().filename();
      (void)make_dirs(dest);
      fs::copy_file(f.path(), dest / f.path().filename(), fs::copy_options::overwrite_existing, ec);
    }
  }
}

class gemini_adapter final : public harness::adapter {
 public:
  std::string_view id() const override { return "gemini"; }

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
    if (const auto* b = need_string("binary", "the path of the gemini executable")) {
      fs::path p = resolve_binary(c);
      if (::access(p.c_str(), X_OK) != 0)
        errors.push_back({b->where,
                          fmt::format("binary '{}' is not an executable file", p.string()),
                          "give the gemini executable (absolute or relative to the suite file), "
                          "or omit binary and run scripts/install-agents gemini"});
    }
    need_string("model", "e.g. model: gemini-2.5-flash");
    if (const auto* u = need_string("base_url", "e.g. base_url: \"http://127.0.0.1:8080\"")) {
      const std::string url = u->value.get<std::string>();
      if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0)
        errors.push_back({u->where, "base_url must start with http:// or https://", ""});
    }
    if (const auto* k = need_string("api_key_env", "the name of a host environment variable"))
      if (!is_env_name(k->value.get<std::string>()))
        errors.push_back({k->where, "api_key_env must be an environment variable name",
                          "e.g. api_key_env: GEMINI_API_KEY (the value is read on the host)"});
    if (const auto* m = need_string("approval_mode", join(approval_modes)))
      if (!one_of(m->value.get<std::string>(), approval_modes))
        errors.push_back({m->where,
                          fmt::format("unknown approval_mode '{}'", m->value.get<std::string>()),
                          fmt::format("one of: {}", join(approval_modes))});
    return errors;
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
    harness::transcript t;
    t.agent = "gemini";
    for (const auto& out : outputs) {
      keep_native_sessions(out);
      auto part = EB_TRY(gemini::parse_gemini_stream_json(read_file(out.stdout_path).value_or("")));
      if (out.exited && out.exit_code != 0 && !part.completed &&
          (!part.error || part.error->starts_with("interrupted"))) {
        if (std::string why = tail_lines(out.stderr_path, 3); !why.empty())
          part.error = fmt::format("gemini exited with status {}: {}", out.exit_code, why);
      }
      if (!out.exited && !part.completed)
        part.error = fmt::format("gemini was killed before it finished ({})",
                                 part.error.value_or("no result event"));
      for (auto& s : part.steps) t.steps.push_back(std::move(s));
      t.total += part.total;
      t.final_message = part.final_message;
      if (!t.error && part.error) t.error = part.error;
      for (const auto& [k, v] : part.unknown_events) t.unknown_events[k] += v;
      t.malformed_lines += part.malformed_lines;
      if (t.session_id.empty()) t.session_id = part.session_id;
      if (!part.model.empty()) t.model = part.model;
      if (part.duration_ms) t.duration_ms = t.duration_ms.value_or(0) + *part.duration_ms;
      t.completed = part.completed;
    }
    if (t.error) t.final_message.reset();
    harness::renumber_steps(t);
    return t;
  }

 private:
  result<harness::agent_plan> base_plan(const harness::run_context& ctx) const {
    const auto& c = ctx.candidate;
    harness::agent_plan p;
    fs::path binary = resolve_binary(c);
    if (::access(binary.c_str(), X_OK) != 0)
      return make_error(error_kind::not_found,
                        "candidate {}: gemini binary {} is not installed (run "
                        "scripts/install-agents gemini or set binary:)",
                        c.id, binary.string());
    p.argv = {binary.string(), "--output-format", "stream-json", "--skip-trust"};
    p.readonly_paths.push_back(install_prefix(binary));
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
      p.home.files.push_back({settings, j.dump(2) + "\n", 0600});
    }
    if (auto url = string_setting(c, "base_url"); !url.empty())
      p.env["GOOGLE_GEMINI_BASE_URL"] = url;
    if (auto var = string_setting(c, "api_key_env"); !var.empty()) {
      const char* value = std::getenv(var.c_str());
      if (!value || !*value)
        return make_error(error_kind::invalid_argument,
                          "candidate {}: api_key_env {} is not set in evalbox's environment", c.id,
                          var);
      log::redact_secret(value);
      p.env["GEMINI_API_KEY"] = value;
    }
    p.stdout_name = "stdout.jsonl";
    return p;
  }
};

}  // namespace

std::unique_ptr<harness::adapter> make_gemini_adapter() {
  return std::make_unique<gemini_adapter>();
}

}  // namespace evalbox::adapters
