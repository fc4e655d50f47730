// What a run keeps of its final state, so that it can be graded again without its agent
// (`evalbox regrade`; docs/results.md, "The final state"): the entries of its workspace that
// differ from the fixture's (the setup's changes included) and the image root's writable
// layers, listed in runs/<run_id>/final-state.json, the files' bytes stored once per results
// directory under objects/sha256/<2 hex>/<62 hex> by their SHA-256 — the same file of a
// hundred runs is one object. A regrade writes each tree back as an overlay layer
// (write_state_layer) and stacks it over a fresh session of the fixture.
//
// The trees were written by the agent and the manifest may have been edited since: the walk
// follows no link and keeps no special file, and reading a manifest back checks every path,
// type and digest before anything is written, and every object's bytes against its digest.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/json_fwd.h"

namespace evalbox::harness {
inline namespace results {

inline constexpr std::string_view final_state_schema = "evalbox.final-state.v1";
inline constexpr std::string_view final_state_file = "final-state.json";
// Where objects lie under the results root.
inline constexpr std::string_view objects_dir = "objects";
// The default cap on one run's kept state: the bytes of its files (stored or already there).
inline constexpr uint64_t default_final_state_bytes = 256ull << 20;
// At most this many entries per run (a manifest line is ~200 bytes).
inline constexpr size_t max_final_state_entries = 200'000;

struct state_entry {
  enum class kind { file, directory, symlink, deleted };
  std::string path;  // relative, '/'-separated, no empty, "." or ".." component
  kind type = kind::file;
  uint32_t mode = 0;    // permission bits; setuid and setgid are never kept
  uint64_t size = 0;    // file
  std::string digest;   // file: SHA-256 (hex) of its bytes, the object's name
  std::string target;   // symlink: its text
  bool opaque = false;  // directory: hides whatever the layers below hold beneath it
};

// One tree of the final state: the workspace (its differences from the fixture's), or one
// writable layer of the image's root, as the overlay holds it.
struct state_tree {
  // "workspace"; "setup" (the workspace as the setup commands left it, which git checks
  // compare with: only for a fixture with setup); "root" (top-most first)
  std::string name;
  std::string target;                // where the run saw it: "/workspace", "/"
  std::vector<state_entry> entries;  // sorted by path
};

// Where a tree's final state is read from.
struct state_source {
  std::string name, target;
  // Compare (the workspace): `final_root` is a read-only view of the final tree, `base_root`
  // one of the tree as the fixture gave it, and `candidates` the relative paths that may
  // differ between them (prepared_session::changed_paths); an entry is kept where they do.
  // Layer (a root's writable layer): `base_root` is empty and `final_root` is an overlay
  // layer (whiteouts, opaque directories) whose every entry is kept.
  std::filesystem::path final_root, base_root;
  std::vector<std::string> candidates;
};

// Keeps the final state of run `run_id` from `sources` under `results_root`, returning what
// run.json records as `final_state`: {"path", "digest" (of the manifest), "entries", "bytes"
// (of its files), "stored_bytes" (new objects), "max_bytes", "skipped" (special files left
// out)} — or, when the files are above `max_bytes` or the entries above
// max_final_state_entries, {"path": null, "reason", "bytes", "max_bytes"} and nothing at all
// is kept. An error only when the host fails (the results directory cannot be written).
result<json> keep_final_state(const std::filesystem::path& results_root, std::string_view run_id,
                              const std::vector<state_source>& sources, uint64_t max_bytes);

// The kept state of `run_id`, read and checked (paths, types, digests, counts): an
// invalid_argument error naming the file and what is wrong; not_found when there is none.
result<std::vector<state_tree>> read_final_state(const std::filesystem::path& results_root,
                                                 std::string_view run_id);

// Writes `tree` into the new directory `to` as an overlay layer: files (from the objects,
// each checked against its digest), directories, symlinks, whiteouts for deletions and
// user.overlay.opaque on opaque directories, everything owned by `uid`:`gid`. A directory the
// layer needs but does not list (a parent of a changed file) takes its mode from the same path
// beneath `base` (the tree the layer goes over), else 0755. An object that is missing or whose
// bytes do not match is an invalid_argument error naming it.
status write_state_layer(const std::filesystem::path& results_root, const state_tree& tree,
                         const std::filesystem::path& base, const std::filesystem::path& to,
                         uid_t uid, gid_t gid);

// The objects a results directory holds (`evalbox gc --results`).
struct object_totals {
  uint64_t objects = 0;
  uint64_t bytes = 0;
};
object_totals count_objects(const std::filesystem::path& results_root);

}  // namespace results
}  // namespace evalbox::harness
