// `evalbox gc` below the command line (gc.h).
#include "harness/runner/gc.h"

#include <fmt/format.h>

#include "base/json.h"
#include "base/units.h"
#include "harness/results/final_state.h"
#include "harness/runner/keep_workspace.h"
#include "sandbox/prepare/caches.h"

namespace evalbox::harness {
inline namespace runner {

result<std::optional<uint64_t>> parse_gc_max_size(const std::string& text, bool images) {
  if (text.empty()) return std::nullopt;
  auto bytes = parse_bytes(text);
  if (!bytes || !images)
    return make_error(error_kind::invalid_argument, "--max-size {}: {}", text,
                      bytes ? "needs --images" : bytes.error().message);
  return *bytes;
}

bool gc_report::clean() const noexcept {
  return runs.errors.empty() && sessions.errors.empty() && git.errors.empty() &&
         cache_errors.empty() && (!images || images->errors.empty());
}

result<gc_report> collect_garbage(const gc_options& options) {
  sandbox::preparer preparer(options.sandbox);
  gc_report r;
  r.state_root = options.sandbox.state_root.string();
  // Sessions first: a session whose server died leaves a run whose lock is free, reclaimed next.
  r.sessions = reap_sessions(options.sandbox.state_root);
  auto reclaimed = preparer.reclaim_stale();
  if (!reclaimed)
    return make_error(reclaimed.error().kind, "{}: {}", r.state_root, reclaimed.error().message);
  r.runs = std::move(*reclaimed);
  r.git = collect_git_store(options.sandbox.state_root / "git");
  if (auto left = sandbox::collect_store_leftovers(options.sandbox.state_root))
    r.cache_leftovers = *left;
  else
    r.cache_errors.push_back(left.error().message);
  if (options.images) {
    auto images = preparer.collect_images(options.max_image_bytes);
    if (!images) return make_error(images.error().kind, "images: {}", images.error().message);
    r.images = std::move(*images);
  }
  for (const auto& results : options.results) {
    const auto k = count_kept(results);
    const auto o = count_objects(results);
    r.kept.push_back({results, k.runs, k.bytes, o.objects, o.bytes});
  }
  return r;
}

json gc_json(const gc_report& r) {
  json j{{"schema", "evalbox.gc.v1"},
         {"state_root", r.state_root},
         {"runs_reclaimed", r.runs.runs_reclaimed},
         {"mounts_unmounted", r.runs.mounts_unmounted},
         {"cgroups_removed", r.runs.cgroups_removed},
         {"errors", r.runs.errors}};
  j["sessions"] = {{"removed", r.sessions.removed},
                   {"stopped", r.sessions.stopped},
                   {"errors", r.sessions.errors}};
  j["git"] = {{"temporaries_removed", r.git.temporaries_removed},
              {"mirrors", r.git.mirrors},
              {"trees", r.git.trees},
              {"errors", r.git.errors}};
  j["caches"] = {{"leftovers_removed", r.cache_leftovers}, {"errors", r.cache_errors}};
  if (r.images)
    j["images"] = {{"images_removed", r.images->images_removed},
                   {"layers_removed", r.images->layers_removed},
                   {"temporaries_removed", r.images->temporaries_removed},
                   {"images_in_use", r.images->images_in_use},
                   {"bytes_freed", r.images->bytes_freed},
                   {"bytes_after", r.images->bytes_after},
                   {"errors", r.images->errors}};
  if (!r.kept.empty()) {
    j["kept_workspaces"] = json::array();
    for (const auto& k : r.kept)
      j["kept_workspaces"].push_back({{"results", k.results},
                                      {"runs", k.runs},
                                      {"bytes", k.bytes},
                                      {"final_state_objects", k.state_objects},
                                      {"final_state_bytes", k.state_bytes}});
  }
  return j;
}

std::string gc_text(const gc_report& r) {
  std::string out = fmt::format(
      "evalbox gc — {}: {} stale run(s) reclaimed, {} mount(s) unmounted, {} cgroup(s) "
      "removed\n",
      r.state_root, r.runs.runs_reclaimed, r.runs.mounts_unmounted, r.runs.cgroups_removed);
  for (const auto& e : r.runs.errors) out += fmt::format("  error: {}\n", e);
  out += fmt::format("sessions: {} left by a dead server removed, {} past their TTL stopped\n",
                     r.sessions.removed, r.sessions.stopped);
  for (const auto& e : r.sessions.errors) out += fmt::format("  error: {}\n", e);
  out += fmt::format(
      "git: {} partial fetch(es) or checkout(s) removed; {} mirror(s), {} tree(s) kept\n",
      r.git.temporaries_removed, r.git.mirrors, r.git.trees);
  for (const auto& e : r.git.errors) out += fmt::format("  error: {}\n", e);
  out += fmt::format(
      "caches and bundles: {} half-stored or half-removed entr{} and free warm lock(s) "
      "removed\n",
      r.cache_leftovers, r.cache_leftovers == 1 ? "y" : "ies");
  for (const auto& e : r.cache_errors) out += fmt::format("  error: {}\n", e);
  if (r.images) {
    out += fmt::format(
        "images: {} image(s) and {} layer(s) removed, {} partial layer(s) cleaned, {} freed, {} "
        "left{}\n",
        r.images->images_removed, r.images->layers_removed, r.images->temporaries_removed,
        format_bytes(r.images->bytes_freed), format_bytes(r.images->bytes_after),
        r.images->images_in_use
            ? fmt::format(" ({} image(s) kept: in use by a run)", r.images->images_in_use)
            : "");
    for (const auto& e : r.images->errors) out += fmt::format("  error: {}\n", e);
  }
  for (const auto& k : r.kept)
    out += fmt::format(
        "kept workspaces: {}: {} run(s), {}; final states: {} object(s), {} (under objects/; "
        "they go with the results directory)\n",
        k.results, k.runs, format_bytes(k.bytes), k.state_objects, format_bytes(k.state_bytes));
  return out;
}

}  // namespace runner
}  // namespace evalbox::harness
