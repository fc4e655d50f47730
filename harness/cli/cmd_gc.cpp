// `evalbox gc`: reclaims what crashed runs left behind (mounts, cgroups, run directories)
// in the state root — the same reclaim every preparer runs at start-up — and more with
// --images and --results (harness/runner/gc.h).
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "base/json.h"
#include "base/log.h"
#include "harness/cli/commands.h"
#include "harness/runner/gc.h"

namespace evalbox::harness::cli {

void register_gc(CLI::App& app, action& out) {
  auto* cmd = app.add_subcommand(
      "gc",
      "Reclaim stale runs and sessions: sessions whose server is gone are removed (and a server "
      "past its sessions' TTL is stopped); every run directory whose lock is free (its process "
      "died) has its "
      "mounts unmounted, its cgroups removed and its files deleted. Live runs are left alone; "
      "credential leases are kept. Partial git mirrors and checkouts a crashed fetch left "
      "(<state>/git) are removed; whole ones are kept. With --images, also the image store: "
      "partial layers a "
      "crashed import left, layers no image names, and (with --max-size) least recently used "
      "images until the store fits — never an image a live run holds. With --results, also "
      "counts the workspaces `evalbox run --keep-workspaces` kept there (they are evidence: "
      "gc does not remove them; rm -r RESULTS/runs/*/workspace does).");
  auto json_out = std::make_shared<bool>(false);
  auto state = std::make_shared<std::string>();
  cmd->add_flag("--json", *json_out, "print evalbox.gc.v1 JSON instead of a summary");
  cmd->add_option("--state-dir", *state,
                  "state root to clean (default: EVALBOX_STATE_DIR or the standard location)");
  auto images = std::make_shared<bool>(false);
  auto max_size = std::make_shared<std::string>();
  cmd->add_flag("--images", *images, "also collect the image store (<state>/images)");
  auto results = std::make_shared<std::vector<std::string>>();
  cmd->add_option("--results", *results,
                  "a results directory whose kept workspaces and final states to count "
                  "(repeatable)");
  cmd->add_option("--max-size", *max_size,
                  "with --images: remove least recently used images until the store's layers "
                  "take at most SIZE (e.g. 20GiB)");
  cmd->callback([&out, json_out, state, images, max_size, results] {
    out = [json_out, state, images, max_size, results] {
      harness::gc_options options;
      auto limit = harness::parse_gc_max_size(*max_size, *images);
      if (!limit) {
        log::error("gc {}", limit.error().message);
        return exit_usage;
      }
      options.images = *images;
      options.max_image_bytes = *limit;
      options.results = *results;
      if (!state->empty()) options.sandbox.state_root = *state;
      auto report = harness::collect_garbage(options);
      if (!report) {
        log::error("gc {}", report.error().message);
        return exit_execution_failed;
      }
      fmt::print("{}",
                 *json_out ? pretty_json(harness::gc_json(*report)) : harness::gc_text(*report));
      return report->clean() ? exit_ok : exit_execution_failed;
    };
  });
}

}  // namespace evalbox::harness::cli
