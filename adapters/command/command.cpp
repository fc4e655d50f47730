// adapter: command (see command.h).
#include "adapters/command/command.h"

#include <unistd.h>

#include "base/fs.h"
#include "harness/agent/extensions.h"
#include "harness/agent/native.h"
#include "harness/transcripts/events.h"

namespace evalbox::adapters::command {

namespace {

class command_adapter final : public harness::adapter {
 public:
  std::string_view id() const override { return "command"; }

  std::vector<harness::config_error> validate(const harness::candidate_spec& c) const override {
    std::vector<harness::config_error> errors;
    for (const auto& [key, value] : c.settings)
      if (key != "argv" && key != "transcript")
        errors.push_back(harness::unknown_setting(c, key, {"argv", "transcript"}));
    for (auto& e : harness::validate_argv(c, "[agents/my-agent.sh, \"{prompt}\"]"))
      errors.push_back(std::move(e));
    if (const auto* t = c.find("transcript")) {
      if (!t->value.is_string() ||
          (t->value.get<std::string>() != "jsonl" && t->value.get<std::string>() != "none"))
        errors.push_back({t->where, "transcript must be 'jsonl' or 'none'",
                          "jsonl: stdout carries evalbox.events.v1 events"});
    }
    const std::string why =
        "evalbox does not know where a command reads them (give it its files with home_files)";
    for (auto& e : harness::unsupported_extensions(c, {why, why, why}))
      errors.push_back(std::move(e));
    return errors;
  }

  result<harness::agent_plan> plan(const harness::run_context& ctx) const override {
    harness::agent_plan p;
    p.argv = EB_TRY(harness::planned_argv(ctx.candidate, ctx.fixture.prompt));
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
