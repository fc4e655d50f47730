// adapter: loop (see loop.h).
#include "adapters/loop/loop.h"

#include "harness/agent/extensions.h"

namespace evalbox::adapters::loop {
namespace {

class loop_adapter final : public harness::adapter {
 public:
  std::string_view id() const override { return "loop"; }

  std::vector<harness::config_error> validate(const harness::candidate_spec& c) const override {
    std::vector<harness::config_error> errors;
    for (const auto& [key, value] : c.settings)
      if (key != "argv") errors.push_back(harness::unknown_setting(c, key, {"argv"}));
    for (auto& e : harness::validate_argv(c, "[agents/loop-agent.py, \"{prompt}\"]"))
      errors.push_back(std::move(e));
    const std::string why =
        "evalbox does not know where a loop reads them (give it its files with home_files)";
    for (auto& e : harness::unsupported_extensions(c, {why, why, why}))
      errors.push_back(std::move(e));
    return errors;
  }

  result<harness::agent_plan> plan(const harness::run_context& ctx) const override {
    harness::agent_plan p;
    p.argv = EB_TRY(harness::planned_argv(ctx.candidate, ctx.fixture.prompt));
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
