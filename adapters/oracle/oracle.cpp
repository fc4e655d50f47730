// adapter: oracle (see oracle.h). The solution directory is projected read-only at
// /evalbox/solution as a content-addressed bundle; its stdout becomes one shell step.
#include "adapters/oracle/oracle.h"

#include "base/digest.h"
#include "base/fs.h"
#include "harness/agent/extensions.h"
#include "harness/agent/native.h"

namespace evalbox::adapters::oracle {

namespace {

constexpr std::string_view solution_target = "/evalbox/solution";

class oracle_adapter final : public harness::adapter {
 public:
  std::string_view id() const override { return "oracle"; }

  std::vector<harness::config_error> validate(const harness::candidate_spec& c) const override {
    std::vector<harness::config_error> errors;
    for (const auto& [key, value] : c.settings)
      errors.push_back(harness::unknown_setting(c, key, {}));
    const std::string why = "it runs the fixture's solution, not an agent client";
    for (auto& e : harness::unsupported_extensions(c, {why, why, why}))
      errors.push_back(std::move(e));
    return errors;
  }

  result<harness::agent_plan> plan(const harness::run_context& ctx) const override {
    if (!ctx.fixture.has_solution)
      return make_error(error_kind::invalid_argument,
                        "fixture {} has no solution/solve.sh: the oracle has nothing to run "
                        "(add one, or drop the oracle candidate)",
                        ctx.fixture.id);
    auto dir = ctx.fixture.solution_script().parent_path();
    harness::agent_plan p;
    // A Harbor task's solve.sh is a bash script (Harbor runs `bash solve.sh`): bash from the
    // task's image; evalbox's own fixtures' run under /bin/sh.
    p.argv = {ctx.fixture.harbor ? "bash" : "/bin/sh", std::string(solution_target) + "/solve.sh"};
    p.home.adapter = "oracle";
    p.runs_fixture_solution = true;
    p.bundles.push_back(sandbox::bundle{dir, EB_TRY(tree_digest(dir)), solution_target});
    return p;
  }

  result<harness::transcript> read_transcript(
      const harness::run_context& ctx,
      const std::vector<harness::agent_output>& outputs) const override {
    harness::transcript t;
    t.agent = "oracle";
    for (const auto& out : outputs) {
      harness::step s;
      s.index = static_cast<int>(t.steps.size());
      harness::tool_call call;
      call.id = fmt::format("solve-{}", s.index);
      call.tool = "shell";
      call.command = ctx.fixture.harbor ? "bash solution/solve.sh" : "sh solution/solve.sh";
      call.input = json{{"command", *call.command}};
      s.tool_calls.push_back(call);
      harness::observation obs;
      obs.call_id = call.id;
      if (out.exited) obs.exit_code = out.exit_code;
      obs.output = harness::truncate_output(EB_TRY(harness::read_native_stream(out.stdout_path)));
      obs.is_error = !out.exited || out.exit_code != 0;
      s.observations.push_back(std::move(obs));
      t.steps.push_back(std::move(s));
    }
    t.completed = !outputs.empty() && outputs.back().exited;
    return t;
  }
};

}  // namespace

std::unique_ptr<harness::adapter> make_adapter() { return std::make_unique<oracle_adapter>(); }

}  // namespace evalbox::adapters::oracle
