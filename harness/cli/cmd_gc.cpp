// `evalbox gc`: reclaims what crashed runs left behind (mounts, cgroups, run directories)
// in the state root — the same reclaim every preparer runs at start-up.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "harness/cli/commands.h"
#include "harness/cli/image_store.h"
#include "harness/fixture/git_source.h"
#include "harness/runner/keep_workspace.h"
#include "sandbox/base/json.h"
#include "sandbox/base/log.h"
#include "sandbox/base/units.h"
#include "sandbox/preparer/preparer.h"

namespace evalbox::cli {

void register_gc(CLI::App& app, action& out) {
  auto* cmd = app.add_subcommand(
      "gc",
      "Reclaim stale runs: every run directory whose lock is free (its process died) has its "
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
                  "a results directory whose kept workspaces to count (repeatable)");
  cmd->add_option("--max-size", *max_size,
                  "with --images: remove least recently used images until the store's layers "
                  "take at most SIZE (e.g. 20GiB)");
  cmd->callback([&out, json_out, state, images, max_size, results] {
    out = [json_out, state, images, max_size, results] {
      std::optional<uint64_t> limit;
      if (!max_size->empty()) {
        auto bytes = parse_bytes(*max_size);
        if (!bytes || !*images) {
          log::error("gc --max-size {}: {}", *max_size,
                     bytes ? "needs --images" : bytes.error().message);
          return exit_usage;
        }
        limit = *bytes;
      }
      auto options = sandbox::default_preparer_options();
      if (!state->empty()) options.state_root = *state;
      sandbox::preparer preparer(options);
      auto report = preparer.reclaim_stale();
      if (!report) {
        log::error("gc {}: {}", options.state_root.string(), report.error().message);
        return exit_execution_failed;
      }
      const auto git = harness::collect_git_store(options.state_root / "git");
      std::optional<sandbox::image::gc_report> image_report;
      if (*images) {
        auto store = open_image_store(options.state_root.string());
        auto r = store ? store->gc(limit)
                       : result<sandbox::image::gc_report>(std::unexpected(store.error()));
        if (!r) {
          log::error("gc images: {}", r.error().message);
          return exit_execution_failed;
        }
        image_report = *r;
      }
      if (*json_out) {
        json j{{"schema", "evalbox.gc.v1"},
               {"state_root", options.state_root.string()},
               {"runs_reclaimed", report->runs_reclaimed},
               {"mounts_unmounted", report->mounts_unmounted},
               {"cgroups_removed", report->cgroups_removed},
               {"errors", report->errors}};
        j["git"] = {{"temporaries_removed", git.temporaries_removed},
                    {"mirrors", git.mirrors},
                    {"trees", git.trees},
                    {"errors", git.errors}};
        if (image_report)
          j["images"] = {{"images_removed", image_report->images_removed},
                         {"layers_removed", image_report->layers_removed},
                         {"temporaries_removed", image_report->temporaries_removed},
                         {"images_in_use", image_report->images_in_use},
                         {"bytes_freed", image_report->bytes_freed},
                         {"bytes_after", image_report->bytes_after},
                         {"errors", image_report->errors}};
        if (!results->empty()) {
          j["kept_workspaces"] = json::array();
          for (const auto& r : *results) {
            const auto k = harness::count_kept(r);
            j["kept_workspaces"].push_back({{"results", r}, {"runs", k.runs}, {"bytes", k.bytes}});
          }
        }
        fmt::print("{}", pretty_json(j));
      } else {
        fmt::print(
            "evalbox gc — {}: {} stale run(s) reclaimed, {} mount(s) unmounted, {} "
            "cgroup(s) removed\n",
            options.state_root.string(), report->runs_reclaimed, report->mounts_unmounted,
            report->cgroups_removed);
        for (const auto& e : report->errors) fmt::print("  error: {}\n", e);
        fmt::print(
            "git: {} partial fetch(es) or checkout(s) removed; {} mirror(s), {} tree(s) kept\n",
            git.temporaries_removed, git.mirrors, git.trees);
        for (const auto& e : git.errors) fmt::print("  error: {}\n", e);
        if (image_report) {
          fmt::print(
              "images: {} image(s) and {} layer(s) removed, {} partial layer(s) cleaned, "
              "{} freed, {} left{}\n",
              image_report->images_removed, image_report->layers_removed,
              image_report->temporaries_removed, format_bytes(image_report->bytes_freed),
              format_bytes(image_report->bytes_after),
              image_report->images_in_use
                  ? fmt::format(" ({} image(s) kept: in use by a run)", image_report->images_in_use)
                  : "");
          for (const auto& e : image_report->errors) fmt::print("  error: {}\n", e);
        }
        for (const auto& r : *results) {
          const auto k = harness::count_kept(r);
          fmt::print("kept workspaces: {}: {} run(s), {}\n", r, k.runs, format_bytes(k.bytes));
        }
      }
      bool clean = report->errors.empty() && git.errors.empty() &&
                   (!image_report || image_report->errors.empty());
      return clean ? exit_ok : exit_execution_failed;
    };
  });
}

}  // namespace evalbox::cli
