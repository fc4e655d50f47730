// The cache store: directories a fixture or suite names as `caches:`, each filled once (by its
// warm commands, in a sandbox: harness/runner/caches.h) and kept under the key of what filled
// it, immutable after. A run sees a stored cache at its target as the read-only lower of an
// ephemeral-write mount (request.h named_mount): its writes go to its own upper and vanish with
// it, so no run sees another's.
//
// Layout (<state>/caches/, 0700; cache_store_dir in request.h):
//   <key>/tree          the filled cache, owned by evalbox's user, setuid/setgid bits dropped
//   <key>/cache.json    evalbox.cache.v1: name, target, origin, digest, bytes, files, created
//   .warm-<key>.lock    held (flock) while <key> is warmed: a second warmer waits, then finds it
//   .tmp-<key>-<pid>-<n>/, .rm-<key>-<pid>-<n>/
//                       a cache being stored or removed: a crash leaves only these names, which
//                       nothing reads and `evalbox gc` removes once their process is gone
// A run's suite holds a shared flock on <key>/tree while its runs may mount it (hold_cache);
// remove_cache takes it exclusively, so a cache in use is never removed under a run.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/json_fwd.h"
#include "base/unique_fd.h"

namespace evalbox::sandbox {
inline namespace prepare {

// What the caller says of a cache it stores (kept in cache.json, shown by `evalbox cache ls`).
struct cache_meta {
  std::string name;    // as the fixture or suite names it, e.g. "pip"
  std::string target;  // where runs see it, e.g. "/home/agent/.cache/pip"
  std::string origin;  // the file that declared it, e.g. ".../suite.yaml"
  uint64_t warm_ms = 0;
};

struct stored_cache {
  std::string key;             // 64 lowercase hex: the key of what filled it
  std::filesystem::path tree;  // <state>/caches/<key>/tree
  std::string digest;          // tree digest (base/digest.h) of `tree`, taken when stored
  uint64_t bytes = 0;          // regular files' sizes, summed
  uint64_t files = 0;          // entries below the tree
  int64_t created = 0;         // Unix seconds
  cache_meta meta;
};

// True for 64 lowercase hex characters: the only form a cache key takes.
bool valid_cache_key(std::string_view key) noexcept;

// cache.json's record of `c` (evalbox.cache.v1: schema, key, name, target, origin, digest,
// bytes, files, created, warm_ms).
json to_json(const stored_cache& c);

// The stored caches `query` names: a key, 6 or more of a key's first hex digits (lowercase), or
// the name caches were stored under (all of them). A name that is also a key's prefix names both.
std::vector<stored_cache> caches_named(const std::vector<stored_cache>& all,
                                       std::string_view query);

// The cache stored under `key`, or nothing when there is none (or only a half-made one).
result<std::optional<stored_cache>> find_cache(const std::filesystem::path& state_root,
                                               std::string_view key);

// Every stored cache, oldest first. Entries whose cache.json cannot be read are skipped.
result<std::vector<stored_cache>> list_caches(const std::filesystem::path& state_root);

// Stores the tree at `filled` under `key`: copied (links kept as links, special files left out,
// setuid/setgid dropped, owned by the calling user), digested, described by `meta`, and made
// visible by one rename. An existing entry of that key is kept (and returned) unless `replace`,
// which removes it first (refused while a suite holds it).
result<stored_cache> store_cache(const std::filesystem::path& state_root, std::string_view key,
                                 const std::filesystem::path& filled, const cache_meta& meta,
                                 bool replace);

// Removes the cache stored under `key`. error_kind::busy while a suite holds it (hold_cache),
// not_found when there is none.
status remove_cache(const std::filesystem::path& state_root, std::string_view key);

// Whether a suite holds the cache stored under `key` now (false when none is stored): what
// remove_cache and a replacing store_cache would be refused for.
result<bool> cache_in_use(const std::filesystem::path& state_root, std::string_view key);

// A shared hold on the cache stored under `key`, for as long as runs may mount it.
result<unique_fd> hold_cache(const std::filesystem::path& state_root, std::string_view key);

// The exclusive lock of warming `key`, waited for: whoever holds it is filling the cache, and
// the waiter then finds it stored. Released when the fd closes.
result<unique_fd> lock_cache_warm(const std::filesystem::path& state_root, std::string_view key);

// Removes what crashed stores and removals left in the cache store and the bundle store
// (.tmp-*, .rm-* of processes that are gone: both name their temporaries
// .<what>-<16 hex>-<pid>-<n>) and warm locks nobody holds. Returns how many were removed.
result<int> collect_store_leftovers(const std::filesystem::path& state_root);

}  // namespace prepare
}  // namespace evalbox::sandbox
