// The plain-data helpers of the specs: messages, merging, JSON forms for digests and records.
#include "harness/config/spec.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace evalbox::harness {
inline namespace config {

std::string source_location::to_string() const {
  if (line <= 0) return file;
  return fmt::format("{}:{}:{}", file, line, column);
}

std::string config_error::message() const {
  if (hint.empty()) return fmt::format("{}: {}", where.to_string(), what);
  return fmt::format("{}: {} (hint: {})", where.to_string(), what, hint);
}

std::string join_messages(const std::vector<config_error>& errors) {
  std::string out;
  for (const auto& e : errors) {
    if (!out.empty()) out += '\n';
    out += e.message();
  }
  return out;
}

std::unexpected<error> config_failure(const std::vector<config_error>& errors) {
  return make_error(error_kind::invalid_argument, join_messages(errors));
}

json environment_spec::to_json() const {
  return json{{"image", image_ref.empty() ? image : image_ref},
              {"workdir", workdir ? json(*workdir) : json(nullptr)}};
}

std::string_view to_string(mount_spec::access_kind access) noexcept {
  return access == mount_spec::access_kind::read_only ? "read-only" : "ephemeral-write";
}

json mount_spec::to_json() const {
  json j{{"source", source},
         {"target", target},
         {"access", config::to_string(access)},
         {"digest", source_digest.empty() ? json(nullptr) : json("sha256:" + source_digest)}};
  if (max_bytes) j["max_bytes"] = *max_bytes;
  return j;
}

json cache_spec::to_json() const {
  json j{{"name", name},
         {"target", target},
         {"warm", warm},
         {"network", network.to_json()},
         {"max_bytes", max_bytes}};
  if (!context.empty())
    j["context"] = {
        {"path", context},
        {"digest", context_digest.empty() ? json(nullptr) : json("sha256:" + context_digest)}};
  return j;
}

json bundle_spec::to_json() const {
  return json{{"source", source}, {"target", target}, {"digest", digest}};
}

limits_spec limits_spec::merged_with(const limits_spec& over) const {
  limits_spec out = *this;
  if (over.wall_ms) out.wall_ms = over.wall_ms;
  if (over.cpu_ms) out.cpu_ms = over.cpu_ms;
  if (over.memory_bytes) out.memory_bytes = over.memory_bytes;
  if (over.pids) out.pids = over.pids;
  if (over.disk_bytes) out.disk_bytes = over.disk_bytes;
  if (over.output_bytes) out.output_bytes = over.output_bytes;
  return out;
}

json limits_spec::to_json() const {
  json j = json::object();
  if (wall_ms) j["wall_ms"] = *wall_ms;
  if (cpu_ms) j["cpu_ms"] = *cpu_ms;
  if (memory_bytes) j["memory_bytes"] = *memory_bytes;
  if (pids) j["pids"] = *pids;
  if (disk_bytes) j["disk_bytes"] = *disk_bytes;
  if (output_bytes) j["output_bytes"] = *output_bytes;
  return j;
}

json network_spec::to_json() const {
  if (mode == mode_kind::none) return "none";
  if (mode == mode_kind::host) return "host";
  return json{{"allow", allow}};
}

std::string_view to_string(check_kind kind) noexcept {
  switch (kind) {
    case check_kind::shell:
      return "shell";
    case check_kind::file:
      return "file";
    case check_kind::git:
      return "git";
    case check_kind::transcript:
      return "transcript";
    case check_kind::verifier:
      return "verifier";
    case check_kind::tests:
      return "tests";
    case check_kind::judge:
      return "judge";
  }
  return "unknown";
}

std::string judge_check::evidence_spec::label() const {
  switch (kind) {
    case evidence_kind::final_message:
      return "final_message";
    case evidence_kind::diff:
      return "diff";
    case evidence_kind::commands:
      return "commands";
    case evidence_kind::file:
      return "file:" + path;
  }
  return "unknown";
}

std::string proposition_id(size_t index) { return fmt::format("p{}", index + 1); }

std::string_view to_string(judge_spec::adapter_kind kind) noexcept {
  switch (kind) {
    case judge_spec::adapter_kind::openai_responses:
      return "openai-responses";
    case judge_spec::adapter_kind::anthropic_messages:
      return "anthropic-messages";
    case judge_spec::adapter_kind::command:
      return "command";
  }
  return "unknown";
}

json judge_spec::to_json() const {
  json j{{"name", name},
         {"adapter", std::string(harness::to_string(adapter))},
         {"model", model},
         {"votes", votes},
         {"timeout_ms", timeout_ms},
         {"retries", retries}};
  if (adapter == adapter_kind::command)
    j["argv"] = argv;
  else
    j["base_url"] = base_url;
  return j;
}

std::string_view to_string(file_check::predicate_kind kind) noexcept {
  using k = file_check::predicate_kind;
  switch (kind) {
    case k::exists:
      return "exists";
    case k::absent:
      return "absent";
    case k::equals:
      return "equals";
    case k::contains:
      return "contains";
    case k::matches:
      return "matches";
    case k::json:
      return "json";
  }
  return "unknown";
}

std::string_view to_string(transcript_check::predicate_kind kind) noexcept {
  using k = transcript_check::predicate_kind;
  switch (kind) {
    case k::command_matches:
      return "command_matches";
    case k::final_message_matches:
      return "final_message_matches";
    case k::tool_used:
      return "tool_used";
    case k::forbid_command:
      return "forbid_command";
    case k::max_steps:
      return "max_steps";
  }
  return "unknown";
}

json check_spec::to_json() const {
  json j{{"id", id}, {"weight", weight}, {"kind", to_string(kind)}};
  switch (kind) {
    case check_kind::shell:
      j["shell"] = shell;
      break;
    case check_kind::file: {
      json f{{"path", file.path}};
      using k = file_check::predicate_kind;
      switch (file.predicate) {
        case k::exists:
          f["exists"] = true;
          break;
        case k::absent:
          f["absent"] = true;
          break;
        case k::equals:
          f["equals"] = file.text;
          break;
        case k::contains:
          f["contains"] = file.text;
          break;
        case k::matches:
          f["matches"] = file.regex.source();
          break;
        case k::json:
          f["json"] = {{"pointer", file.pointer}, {"equals", file.expected}};
          break;
      }
      j["file"] = f;
      break;
    }
    case check_kind::git:
      j["git"] = {{"paths", git.paths},
                  {"state", git.state == git_check::state_kind::changed ? "changed" : "unchanged"}};
      break;
    case check_kind::transcript: {
      json t = json::object();
      const std::string key(to_string(transcript.predicate));
      switch (transcript.predicate) {
        case transcript_check::predicate_kind::max_steps:
          t[key] = transcript.max_steps;
          break;
        case transcript_check::predicate_kind::tool_used:
          t[key] = transcript.tool;
          break;
        default:
          t[key] = transcript.regex.source();
          break;
      }
      j["transcript"] = t;
      break;
    }
    case check_kind::verifier:
      j["verifier"] = "bash /tests/test.sh";
      break;
    case check_kind::tests: {
      json t{{"command", tests.command},
             {"fail_to_pass", tests.fail_to_pass},
             {"pass_to_pass", tests.pass_to_pass}};
      if (!tests.patch.empty()) t["patch"] = tests.patch;
      if (tests.report == tests_check::report_kind::junit)
        t["report"] = {{"junit", tests.junit_path}};
      else if (tests.log_format != "pytest")
        t["report"] = {{"format", tests.log_format}};
      else
        t["report"] = "pytest";
      j["tests"] = t;
      break;
    }
    case check_kind::judge: {
      json ev = json::array();
      for (const auto& e : judge.evidence) ev.push_back(e.label());
      j["judge"] = {{"propositions", judge.propositions}, {"evidence", ev}, {"judge", judge.judge}};
      break;
    }
  }
  return j;
}

const setting* candidate_spec::find(std::string_view key) const {
  auto it = settings.find(std::string(key));
  return it == settings.end() ? nullptr : &it->second;
}

std::string candidate_spec::gateway_key_handle() const {
  if (!gateway || !gateway->key_env.empty()) return {};
  if (credentials.size() == 1) return credentials.front();
  for (const auto key : login_setting_keys)
    if (const auto* s = find(key);
        s && s->value.is_string() && !s->value.get_ref<const std::string&>().empty())
      return s->value.get<std::string>();
  return {};
}

bool candidate_spec::uses_credential(std::string_view handle) const {
  if (std::find(credentials.begin(), credentials.end(), handle) != credentials.end()) return true;
  for (const auto key : login_setting_keys)
    if (const auto* s = find(key);
        s && s->value.is_string() && s->value.get_ref<const std::string&>() == handle)
      return true;
  return false;
}

json candidate_spec::to_json() const {
  json s = json::object();
  for (const auto& [k, v] : settings) s[k] = v.value;
  json h = json::object();
  for (const auto& [k, v] : home_files) h[k] = v.string();
  json j{{"id", id},        {"adapter", adapter}, {"settings", s},
         {"home_files", h}, {"env", env},         {"credentials", credentials}};
  j["network"] = network ? network->to_json() : json(nullptr);
  // Only when set: the digests of candidates without them stay what they were.
  if (gateway) j["gateway"] = gateway->to_json();
  if (budget && !budget->empty()) j["budget"] = budget->to_json();
  // As written, without host paths: the content of what they name enters the candidate's
  // digest (harness/plan: candidate_digest), so a changed skill makes new run ids.
  if (!skills.empty()) {
    json names = json::array();
    for (const auto& sk : skills) names.push_back(sk.name);
    j["skills"] = names;
  }
  if (!mcp_servers.empty()) {
    json servers = json::object();
    for (const auto& m : mcp_servers) servers[m.name] = {{"command", m.command}, {"env", m.env}};
    j["mcp_servers"] = servers;
  }
  if (!hooks.empty()) {
    json list = json::array();
    for (const auto& hook : hooks)
      list.push_back({{"event", hook.event}, {"matcher", hook.matcher}, {"command", hook.command}});
    j["hooks"] = list;
  }
  return j;
}

std::filesystem::path mcp_server_spec::sandbox_file(size_t index) const {
  auto it = files.find(index);
  if (it == files.end()) return {};
  return std::filesystem::path("/evalbox/mcp") / name / it->second.filename();
}

std::vector<std::string> mcp_server_spec::sandbox_command() const {
  std::vector<std::string> out = command;
  for (const auto& [index, file] : files)
    if (index < out.size()) out[index] = sandbox_file(index).string();
  return out;
}

std::filesystem::path candidate_spec::sandbox_hook(size_t index) const {
  if (index >= hooks.size()) return {};
  return std::filesystem::path("/evalbox/hooks") / std::to_string(index) /
         hooks[index].script.filename();
}

bool budget_spec::empty() const {
  return !cost && !input_tokens && !output_tokens && !tokens && !requests;
}

namespace {

// "2.00", "0.10", "0.00015": cents, and four significant digits for what cents cannot say.
std::string dollars(double v) {
  const double cents = v * 100;
  if (v >= 1 || std::abs(cents - std::round(cents)) < 1e-9) return fmt::format("{:.2f}", v);
  return fmt::format("{:.4g}", v);
}

}  // namespace

std::optional<std::string> budget_spec::reached(double cost_usd, uint64_t input, uint64_t output,
                                                uint64_t request_count) const {
  if (requests && request_count >= *requests)
    return fmt::format("requests: {} of {}", request_count, *requests);
  if (cost && cost_usd >= *cost)
    return fmt::format("cost: ${} of ${}", dollars(cost_usd), dollars(*cost));
  if (input_tokens && input >= *input_tokens)
    return fmt::format("input tokens: {} of {}", input, *input_tokens);
  if (output_tokens && output >= *output_tokens)
    return fmt::format("output tokens: {} of {}", output, *output_tokens);
  if (tokens && input + output >= *tokens)
    return fmt::format("tokens: {} of {}", input + output, *tokens);
  return std::nullopt;
}

budget_spec budget_spec::merged_with(const budget_spec& over) const {
  budget_spec b = *this;
  if (over.cost) b.cost = over.cost;
  if (over.input_tokens) b.input_tokens = over.input_tokens;
  if (over.output_tokens) b.output_tokens = over.output_tokens;
  if (over.tokens) b.tokens = over.tokens;
  if (over.requests) b.requests = over.requests;
  if (!over.where.file.empty()) b.where = over.where;
  return b;
}

json budget_spec::to_json() const {
  json j = json::object();
  if (cost) j["cost"] = *cost;
  if (input_tokens) j["input_tokens"] = *input_tokens;
  if (output_tokens) j["output_tokens"] = *output_tokens;
  if (tokens) j["tokens"] = *tokens;
  if (requests) j["requests"] = *requests;
  return j;
}

json gateway_spec::to_json() const {
  json cas = json::array();
  for (const auto& f : ca_files) cas.push_back(f.string());
  json j = {{"upstream", upstream}, {"ca_files", cas}, {"key_env", key_env}};
  if (!token_url.empty()) j["token_url"] = token_url;
  return j;
}

double price_spec::cost(uint64_t input, uint64_t cached, uint64_t cache_write,
                        uint64_t output) const {
  const auto d = [](uint64_t v) { return static_cast<double>(v); };
  cached = std::min(cached, input);
  cache_write = std::min(cache_write, input - cached);
  const double plain = d(input - cached - cache_write) * input_per_mtok;
  const double read = d(cached) * cached_input_per_mtok.value_or(input_per_mtok);
  const double write = d(cache_write) * cache_write_per_mtok.value_or(input_per_mtok);
  return (plain + read + write + d(output) * output_per_mtok) / 1e6;
}

const price_spec* suite_spec::price_for(const candidate_spec& candidate,
                                        std::string_view model) const {
  std::string setting_model;
  if (const auto* m = candidate.find("model"); m && m->value.is_string())
    setting_model = m->value.get<std::string>();
  for (const std::string& key : {std::string(model), candidate.id, setting_model}) {
    if (key.empty()) continue;
    if (auto it = prices.find(key); it != prices.end()) return &it->second;
  }
  return nullptr;
}

int suite_spec::max_concurrent(const std::string& handle) const {
  auto it = shared_credentials.find(handle);
  return it == shared_credentials.end() ? 1 : it->second.max_concurrent;
}

const candidate_spec* suite_spec::find_candidate(std::string_view id) const {
  for (const auto& c : candidates)
    if (c.id == id) return &c;
  return nullptr;
}

}  // namespace config
}  // namespace evalbox::harness
