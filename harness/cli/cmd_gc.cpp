// `evalbox gc`: reclaims what crashed runs left behind (mounts, cgroups, run directories)
// in the state root — the same reclaim every preparer runs at start-up.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "harness/cli/commands.h"
#include "sandbox/base/json.h"
#include "sandbox/base/log.h"
#include "sandbox/preparer/preparer.h"

namespace evalbox::cli {

void register_gc(CLI::App& app, action& out) {
  auto* cmd = app.add_subcommand(
      "gc",
      "Reclaim stale runs: every run directory whose lock is free (its process died) has its "
      "mounts unmounted, its cgroups removed and its files deleted. Live runs are left alone; "
      "credential leases are kept.");
  auto json_out = std::make_shared<bool>(false);
  auto state = std::make_shared<std::string>();
  cmd->add_flag("--json", *json_out, "print evalbox.gc.v1 JSON instead of a summary");
  cmd->add_option("--state-dir", *state,
                  "state root to clean (default: EVALBOX_STATE_DIR or the standard location)");
  cmd->callback([&out, json_out, state] {
    out = [json_out, state] {
      auto options = sandbox::default_preparer_options();
      if (!state->empty()) options.state_root = *state;
      sandbox::preparer preparer(options);
      auto report = preparer.reclaim_stale();
      if (!report) {
        log::error("gc {}: {}", options.state_root.string(), report.error().message);
        return exit_execution_failed;
      }
      if (*json_out) {
        json j{{"schema", "evalbox.gc.v1"},
               {"state_root", options.state_root.string()},
               {"runs_reclaimed", report->runs_reclaimed},
               {"mounts_unmounted", report->mounts_unmounted},
               {"cgroups_removed", report->cgroups_removed},
               {"errors", report->errors}};
        fmt::print("{}", pretty_json(j));
      } else {
        fmt::print("evalbox gc — {}: {} stale run(s) reclaimed, {} mount(s) unmounted, {} "
                   "cgroup(s) removed\n",
                   options.state_root.string(), report->runs_reclaimed,
                   report->mounts_unmounted, report->cgroups_removed);
        for (const auto& e : report->errors) fmt::print("  error: {}\n", e);
      }
      return report->errors.empty() ? exit_ok : exit_execution_failed;
    };
  });
}

}  // namespace evalbox::cli
