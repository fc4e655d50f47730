// adapter: command (see command.h).
#include "adapters/command/command.h"

#include <unistd.h>

#include "base/fs.h"
#include "harness/agent/native.h"
#include "harness/transcripts/events.h"

namespace evalbox::adapters::command {

namespace {

namespace fs = std::filesystem;

// argv[0]: an absolute host path as it is; a relative path with a '/' against the suite's
// directory (the candidate's source file); a bare name as it is — the sandbox looks it up on its
// own PATH when the agent starts (the fixture image's, or the host's system directories), never
// on the PATH of whoever runs evalbox (a pyenv shim in a home directory would be refused as a
// protected root, or run the host's program instead of the image's).
std::optional<fs::path> resolve_program(const std::string& name, const fs::path& suite_file) {
  if (name.empty()) return std::nullopt;
  if (name.front() == '/') return fs::path(name);
  if (name.find('/') != std::string::npos)
    return normalize(fs::path(suite_file).parent_path() / name);
  return fs::path(name);
}

class command_adapter final : public harness::adapter {
 public:
  std::string_view id() const override { return "command"; }

  std::vector<harness::config_error> validate(const harness::candidate_spec& c) const override {
    std::vector<harness::config_error> errors;
    for (const auto& [key, value] : c.settings)
      if (key != "argv" && key != "transcript")
        errors.push_back(harness::unknown_setting(c, key, {"argv", "transcript"}));
    const harness::setting* argv = c.find("argv");
    if (!argv) {
      errors.push_back({c.where, fmt::format("candidate '{}' (adapter command) has no argv", c.id),
                        "add argv: [program, args...]; \"{prompt}\" is replaced by the prompt"});
    } else if (!argv->value.is_array() || argv->value.empty()) {
      errors.push_back({argv->where, "argv must be a non-empty list of strings",
                        "e.g. argv: [agents/my-agent.sh, \"{prompt}\"]"});
    } else {
      bool all_strings = true;
      for (const auto& a : argv->value)
        if (!a.is_string()) {
          errors.push_back({argv->where, "argv must be a list of strings", "quote numbers"});
          all_strings = false;
          break;
        }
      if (all_strings) {
        // A bare name is found in the sandbox when the agent starts; a path must be a host file.
        auto prog = resolve_program(argv->value.at(0).get<std::string>(), c.where.file);
        if (!prog || (prog->is_absolute() && ::access(prog->c_str(), X_OK) != 0))
          errors.push_back({argv->where,
                            fmt::format("program '{}' is not an executable file",
                                        argv->value.at(0).get<std::string>()),
                            "give an absolute path, a path relative to the suite file, or a "
                            "bare name to find on the sandbox's PATH; check chmod +x"});
      }
    }
    if (const auto* t = c.find("transcript")) {
      if (!t->value.is_string() ||
          (t->value.get<std::string>() != "jsonl" && t->value.get<std::string>() != "none"))
        errors.push_back({t->where, "transcript must be 'jsonl' or 'none'",
                          "jsonl: stdout carries evalbox.events.v1 events"});
    }
    return errors;
  }

  result<harness::agent_plan> plan(const harness::run_context& ctx) const override {
    const harness::setting* argv = ctx.candidate.find("argv");
    if (!argv || !argv->value.is_array() || argv->value.empty())
      return make_error(error_kind::invalid_argument, "candidate {} has no argv", ctx.candidate.id);
    std::vector<std::string> args;
    for (const auto& a : argv->value) args.push_back(a.get<std::string>());
    auto prog = resolve_program(args[0], ctx.candidate.where.file);
    if (!prog)
      return make_error(error_kind::not_found, "candidate {}: program '{}' not found",
                        ctx.candidate.id, args[0]);
    args[0] = prog->string();
    harness::agent_plan p;
    p.argv = harness::substitute_prompt(args, ctx.fixture.prompt);
    p.env["EVALBOX_PROMPT"] = ctx.fixture.prompt;
    p.stdin_data = ctx.fixture.prompt;
    p.home.adapter = "command";
    return p;
  }

  result<std::optional<harness::agent_plan>> plan_follow_up(
      const harness::run_context& ctx, const harness::agent_output&) const override {
    if (!ctx.fixture.follow_up) return std::optional<harness::agent_plan>{};
    auto p = EB_TRY(plan(ctx));
    const harness::setting* argv = ctx.candidate.find("argv");
    std::vector<std::string> args;
    for (const auto& a : argv->value) args.push_back(a.get<std::string>());
    args[0] = p.argv[0];
    p.argv = harness::substitute_prompt(args, *ctx.fixture.follow_up);
    p.env["EVALBOX_PROMPT"] = *ctx.fixture.follow_up;
    p.env["EVALBOX_FOLLOW_UP"] = "1";
    p.stdin_data = *ctx.fixture.follow_up;
    return std::optional<harness::agent_plan>(std::move(p));
  }

  result<harness::transcript> read_transcript(
      const harness::run_context& ctx,
      const std::vector<harness::agent_output>& outputs) const override {
    const auto* mode = ctx.candidate.find("transcript");
    bool jsonl = mode && mode->value.is_string() && mode->value.get<std::string>() == "jsonl";
    harness::transcript t;
    t.agent = "command";
    for (const auto& out : outputs) {
      if (!jsonl) continue;
      auto text = EB_TRY(harness::read_native_stream(out.stdout_path));
      auto part = EB_TRY(harness::parse_evalbox_events(text, {.require_final = false}));
      for (auto& s : part.steps) t.steps.push_back(std::move(s));
      t.total += part.total;
      if (part.final_message) t.final_message = part.final_message;
      if (part.error) t.error = part.error;
      for (const auto& [k, v] : part.unknown_events) t.unknown_events[k] += v;
      t.malformed_lines += part.malformed_lines;
      if (!part.session_id.empty()) t.session_id = part.session_id;
      if (!part.model.empty()) t.model = part.model;
    }
    harness::renumber_steps(t);
    if (!t.final_message) t.final_message = harness::final_message(t);
    t.completed = !outputs.empty() && outputs.back().exited;
    return t;
  }
};

}  // namespace

std::unique_ptr<harness::adapter> make_adapter() { return std::make_unique<command_adapter>(); }

}  // namespace evalbox::adapters::command
