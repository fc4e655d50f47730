// adapter: loop (see loop.h).
#include "adapters/loop/loop.h"

#include <unistd.h>

#include "base/fs.h"

namespace evalbox::adapters::loop {
namespace {

namespace fs = std::filesystem;

// argv[0] as the command adapter reads it: absolute, relative to the suite file, or a bare name
// found on the loop sandbox's PATH (the host's system directories).
std::optional<fs::path> resolve_program(const std::string& name, const fs::path& suite_file) {
  if (name.empty()) return std::nullopt;
  if (name.front() == '/') return fs::path(name);
  if (name.find('/') != std::string::npos)
    return normalize(fs::path(suite_file).parent_path() / name);
  return fs::path(name);
}

class loop_adapter final : public harness::adapter {
 public:
  std::string_view id() const override { return "loop"; }

  std::vector<harness::config_error> validate(const harness::candidate_spec& c) const override {
    std::vector<harness::config_error> errors;
    for (const auto& [key, value] : c.settings)
      if (key != "argv") errors.push_back(harness::unknown_setting(c, key, {"argv"}));
    const harness::setting* argv = c.find("argv");
    if (!argv) {
      errors.push_back({c.where, fmt::format("candidate '{}' (adapter loop) has no argv", c.id),
                        "add argv: [program, args...]; the program drives the task through "
                        "the session at $EVALBOX_SESSION"});
      return errors;
    }
    if (!argv->value.is_array() || argv->value.empty()) {
      errors.push_back({argv->where, "argv must be a non-empty list of strings",
                        "e.g. argv: [agents/loop-agent.py, \"{prompt}\"]"});
      return errors;
    }
    for (const auto& a : argv->value)
      if (!a.is_string()) {
        errors.push_back({argv->where, "argv must be a list of strings", "quote numbers"});
        return errors;
      }
    auto prog = resolve_program(argv->value.at(0).get<std::string>(), c.where.file);
    if (!prog || (prog->is_absolute() && ::access(prog->c_str(), X_OK) != 0))
      errors.push_back({argv->where,
                        fmt::format("program '{}' is not an executable file",
                                    argv->value.at(0).get<std::string>()),
                        "give an absolute path, a path relative to the suite file, or a bare "
                        "name to find on the loop sandbox's PATH; check chmod +x"});
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
    p.home.adapter = "loop";
    p.drives_session = true;
    return p;
  }

  // The runner reads a loop's transcript from its task session's commands.
  result<harness::transcript> read_transcript(
      const harness::run_context&, const std::vector<harness::agent_output>&) const override {
    harness::transcript t;
    t.agent = "loop";
    return t;
  }
};

}  // namespace

std::unique_ptr<harness::adapter> make_adapter() { return std::make_unique<loop_adapter>(); }

}  // namespace evalbox::adapters::loop
