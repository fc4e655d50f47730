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
#include "harness/cli/image_store.h"
#include "harness/cli/registry.h"
#include "harness/cli/suite_command.h"
#include "harness/fixture/harbor_images.h"
#include "harness/validate/validate.h"
#include "sandbox/prepare/preparer.h"

namespace evalbox::harness::cli {

namespace {

struct validate_args {
  std::vector<std::string> paths;
  bool json = false;
  image_args images;  // --image, --pull, --force-build, --images-lock
};

int validate_command(const validate_args& a) {
  auto policy = sandbox::image::parse_pull_policy(a.images.pull);
  if (!policy) {
    fmt::print(stderr, "{}\n", policy.error().message);
    return exit_usage;
  }
  auto started = harness::start_registry_pins(a.images.force_build, a.images.images_lock);
  if (!started) {
    fmt::print(stderr, "{}\n", started.error().message);
    return exit_usage;
  }
  harness::registry_pins pins = std::move(*started);
  sandbox::preparer_options po = sandbox::default_preparer_options();
  if (auto settings = cli_registry_settings()) po.registry = std::move(*settings);
  auto registry = make_registry();
  // Made on first need: only inputs that name an image use the store.
  std::optional<sandbox::preparer> preparer;
  harness::validate_options o;
  o.images = a.images.images;
  o.adapters = &registry;
  o.state_root = po.state_root;
  o.preparer = [&preparer, &po]() -> sandbox::preparer& {
    if (!preparer) preparer.emplace(po);
    return *preparer;
  };
  // validate pulls what runs will use (with progress); under --pull never it only checks that
  // each registry reference resolves.
  o.pull = *policy;
  pins.pin = [&o, &policy](const std::string& reference) {
    return pin_with(o.preparer(), *policy, nullptr,
                    *policy == sandbox::image::pull_policy::never)(reference);
  };
  o.pins = &pins;
  o.say = say_progress;
  const auto report = harness::validate_inputs(a.paths, o);
  if (a.json) {
    fmt::print("{}", pretty_json(harness::to_json(report)));
  } else {
    for (const auto& in : report.inputs) {
      if (in.valid()) {
        fmt::print("ok   {} ({})\n", in.summary, in.path);
        for (const auto& i : in.images) fmt::print("{}\n", harness::describe(i));
        for (const auto& n : in.notes) fmt::print("note {}\n", n);
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
  add_image_options(cmd, a->images);
  cmd->callback([&out, a] { out = [a] { return validate_command(*a); }; });
}

}  // namespace evalbox::harness::cli
