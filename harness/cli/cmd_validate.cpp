// `evalbox validate PATH...`: checks fixtures and suites (and each candidate's adapter settings)
// without running anything; every problem is printed as FILE:LINE:COL: what (hint: how).
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/json.h"
#include "harness/cli/commands.h"
#include "harness/cli/registry.h"
#include "harness/cli/suite_command.h"
#include "harness/validate/validate.h"
#include "sandbox/prepare/preparer.h"

namespace evalbox::harness::cli {

namespace {

struct validate_args {
  std::vector<std::string> paths;
  bool json = false;
  std::vector<std::string> images;  // --image REF=SOURCE
};

int validate_command(const validate_args& a) {
  auto registry = make_registry();
  // Made on first need: only inputs that name an image use the store.
  std::optional<sandbox::preparer> preparer;
  harness::validate_options o;
  o.images = a.images;
  o.adapters = &registry;
  o.state_root = sandbox::default_preparer_options().state_root;
  o.preparer = [&preparer]() -> sandbox::preparer& {
    if (!preparer) preparer.emplace(sandbox::default_preparer_options());
    return *preparer;
  };
  o.say = say_progress;
  const auto report = harness::validate_inputs(a.paths, o);
  if (a.json) {
    fmt::print("{}", pretty_json(harness::to_json(report)));
  } else {
    for (const auto& in : report.inputs) {
      if (in.valid()) {
        fmt::print("ok   {} ({})\n", in.summary, in.path);
        for (const auto& i : in.images) fmt::print("{}\n", harness::describe(i));
        continue;
      }
      fmt::print("FAIL {} ({} problem{})\n", in.path, in.errors.size(),
                 in.errors.size() == 1 ? "" : "s");
      for (const auto& e : in.errors) fmt::print(stderr, "{}\n", e.message());
    }
  }
  return report.valid() ? exit_ok : exit_usage;
}

}  // namespace

void register_validate(CLI::App& app, action& out) {
  auto a = std::make_shared<validate_args>();
  auto* cmd = app.add_subcommand(
      "validate",
      "Check fixtures (directories) and suites (files) without running anything. Prints every "
      "problem as FILE:LINE:COL; exits 64 when any input is invalid. An image a fixture names "
      "(environment: {image: ...}) is imported into the store, or checked when it is there, "
      "and what runs will use is printed.");
  cmd->add_option("paths", a->paths,
                  "fixture directories (fixture.yaml, or a Harbor task's task.toml) and suite "
                  "files")
      ->required();
  cmd->add_flag("--json", a->json, "print evalbox.validate.v1 JSON on stdout");
  cmd->add_option("--image", a->images,
                  "REF=SOURCE: the image for a Harbor task's docker_image REF (repeatable; over "
                  "a suite's images:), e.g. org/task:1.0=docker-archive:task.tar "
                  "(docs/harbor.md)");
  cmd->callback([&out, a] { out = [a] { return validate_command(*a); }; });
}

}  // namespace evalbox::harness::cli
