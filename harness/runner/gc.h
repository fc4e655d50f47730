// `evalbox gc` below the command line: sessions without a server (or past their TTL) reaped,
// what crashed runs left in the state root reclaimed (the preparer's reclaim), partial git fetches
// and checkouts removed, the image store collected
// (--images, --max-size), the workspaces kept in results directories counted (--results) — one
// typed report, and its two forms: the evalbox.gc.v1 JSON and the text summary.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/json_fwd.h"
#include "harness/fixture/git_source.h"
#include "harness/session/store.h"
#include "sandbox/prepare/preparer.h"

namespace evalbox::harness {
inline namespace runner {

struct gc_options {
  sandbox::preparer_options sandbox = sandbox::default_preparer_options();
  bool images = false;                      // also collect the image store
  std::optional<uint64_t> max_image_bytes;  // with images: LRU images out until this fits
  std::vector<std::string> results;         // results directories whose kept workspaces to count
};

// --max-size as typed ("" when not given): a size, and only with --images. An invalid_argument
// error "--max-size TEXT: ..." otherwise (a usage error).
result<std::optional<uint64_t>> parse_gc_max_size(const std::string& text, bool images);

struct kept_workspaces {
  std::string results;  // the results directory, as given
  int runs = 0;
  uint64_t bytes = 0;
  // The objects of its runs' final states (harness/results/final_state.h).
  uint64_t state_objects = 0;
  uint64_t state_bytes = 0;
};

struct gc_report {
  std::string state_root;
  sandbox::reclaim_report runs;
  reap_report sessions;  // sessions without a server removed, servers past their TTL stopped
  git_store_report git;
  // Half-stored or half-removed caches and bundles, and free warm locks, removed.
  int cache_leftovers = 0;
  std::vector<std::string> cache_errors;
  std::optional<sandbox::image_collection_report> images;  // with --images
  std::vector<kept_workspaces> kept;                       // one per --results

  // True when nothing failed along the way (each part's errors are empty).
  [[nodiscard]] bool clean() const noexcept;
};

// Collects. An error when the reclaim ("STATE_ROOT: ...") or the image store ("images: ...")
// could not run at all; what failed for one run, mirror or layer is in the report's errors.
result<gc_report> collect_garbage(const gc_options& options);

// evalbox.gc.v1 (docs/cli.md): "images" only with --images, "kept_workspaces" only with
// --results.
json gc_json(const gc_report& report);

// The summary `evalbox gc` prints: one line per part, each error indented below it.
std::string gc_text(const gc_report& report);

}  // namespace runner
}  // namespace evalbox::harness
