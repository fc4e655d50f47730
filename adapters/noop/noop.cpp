// adapter: noop (see noop.h).
#include "adapters/noop/noop.h"

#include "harness/agent/extensions.h"

namespace evalbox::adapters::noop {

namespace {

class noop_adapter final : public harness::adapter {
 public:
  std::string_view id() const override { return "noop"; }

  std::vector<harness::config_error> validate(const harness::candidate_spec& c) const override {
    std::vector<harness::config_error> errors;
    for (const auto& [key, value] : c.settings)
      errors.push_back(harness::unknown_setting(c, key, {}));
    const std::string why = "it runs no agent client";
    for (auto& e : harness::unsupported_extensions(c, {why, why, why}))
      errors.push_back(std::move(e));
    return errors;
  }

  result<harness::agent_plan> plan(const harness::run_context&) const override {
    harness::agent_plan p;
    p.argv = {"/bin/true"};
    p.home.adapter = "noop";
    return p;
  }

  result<harness::transcript> read_transcript(
      const harness::run_context&,
      const std::vector<harness::agent_output>& outputs) const override {
    harness::transcript t;
    t.agent = "noop";
    t.completed = !outputs.empty() && outputs.back().exited;
    return t;
  }
};

}  // namespace

std::unique_ptr<harness::adapter> make_adapter() { return std::make_unique<noop_adapter>(); }

}  // namespace evalbox::adapters::noop
