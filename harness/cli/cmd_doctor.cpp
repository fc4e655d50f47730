// `evalbox doctor`: what this host lets the sandbox use, each missing feature with a hint.
#include <unistd.h>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "base/json.h"
#include "base/units.h"
#include "harness/cli/commands.h"
#include "harness/cli/image_store.h"
#include "sandbox/prepare/preparer.h"
#include "sandbox/sys/probe.h"

namespace evalbox::harness::cli {

namespace {

// The image store's path, size and whiteout form — if there is one: doctor creates none.
std::string image_store_line(const std::filesystem::path& state) {
  const auto where = state / "images";
  if (!std::filesystem::exists(where / "store.json"))
    return fmt::format("image store {}: none yet (evalbox image import creates it)",
                       where.string());
  auto store = open_image_store(state.string());
  if (!store) return fmt::format("image store {}: {}", where.string(), store.error().message);
  auto size = store->size();
  auto images = store->list();
  if (!size || !images)
    return fmt::format("image store {}: {}", where.string(),
                       !size ? size.error().message : images.error().message);
  return fmt::format("image store {}: {} image(s), {} of layers, whiteouts as {}", where.string(),
                     images->size(), format_bytes(*size), sys::to_string(store->whiteout()));
}

}  // namespace

void register_doctor(CLI::App& app, action& out) {
  auto* cmd = app.add_subcommand(
      "doctor",
      "Probe this host: namespaces, overlayfs, idmapped mounts, Landlock, seccomp, cgroups "
      "and reflink. Exits 1 when a feature the default sandbox needs is missing.");
  auto json_out = std::make_shared<bool>(false);
  auto state = std::make_shared<std::string>();
  cmd->add_flag("--json", *json_out, "print evalbox.host.v1 JSON instead of a table");
  cmd->add_option("--state-dir", *state,
                  "state directory to probe for reflink/idmap (default: EVALBOX_STATE_DIR or "
                  "the standard location)");
  cmd->callback([&out, json_out, state] {
    out = [json_out, state] {
      std::filesystem::path dir = state->empty() ? sandbox::default_preparer_options().state_root
                                                 : std::filesystem::path(*state);
      auto host = sys::probe_host(dir);
      if (*json_out) {
        fmt::print("{}", pretty_json(host.to_json()));
      } else {
        fmt::print("evalbox doctor — kernel {}, {}\n\n", host.kernel,
                   host.root ? "running as root" : fmt::format("running as uid {}", host.uid));
        for (const auto& f : host.features()) {
          fmt::print("  {:<4} {:<18} {}\n", f.available ? "ok" : (f.required ? "FAIL" : "--"),
                     f.name, f.detail);
          if (!f.available) fmt::print("       {:<18} hint: {}\n", "", f.hint);
        }
        fmt::print("\n  {}\n", image_store_line(dir));
        fmt::print("\n{}\n", host.sandbox_ready()
                                 ? "The default sandbox can run on this host."
                                 : "The default sandbox cannot run here: fix the FAIL lines.");
      }
      return host.sandbox_ready() ? exit_ok : exit_task_failed;
    };
  });
}

}  // namespace evalbox::harness::cli
