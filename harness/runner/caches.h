// A suite's caches (`caches:` of its fixtures and of the suite, harness/config/spec.h
// cache_spec): each keyed by what fills it, warmed once — its warm commands in a throwaway
// sandbox of the fixture's environment, with the cache at its target, network as the cache
// declares — and stored (sandbox/prepare/caches.h); then held for the suite's runs, which see
// it as the read-only lower of an ephemeral-write mount (request.cpp). `evalbox cache warm`
// and `evalbox run` both come through here.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/json_fwd.h"
#include "base/unique_fd.h"
#include "harness/config/spec.h"
#include "sandbox/launch/launcher.h"
#include "sandbox/prepare/caches.h"
#include "sandbox/prepare/preparer.h"

namespace evalbox::harness {
inline namespace runner {

// One cache as a fixture's runs mount it.
struct cache_use {
  std::string name;
  std::string target;
  uint64_t max_bytes = 0;
  sandbox::stored_cache stored;  // its key, tree and digest

  [[nodiscard]] json to_json() const;  // {name, target, key, digest, bytes} (run.json "caches")
};

// What filled a cache, as the 64-hex key it is stored under: its target, warm commands,
// network and cap; the environment they ran in (the image's id, or the host's root); and what
// they saw at /workspace (the context's or the fixture's workspace digest, or nothing).
// `workspace_digest`: the tree digest of the directory warm commands see ("" for an empty one,
// or the image's working directory).
std::string cache_key(const cache_spec& cache, const fixture_spec& fixture,
                      const sandbox::image_summary* image, const std::string& workspace_digest);

// The names of the caches the suite's fixtures declare (their own and the suite's), sorted.
std::set<std::string> declared_cache_names(const suite_spec& suite);
// A not_found error for the first of `names` the suite does not declare, listing those it does.
status check_cache_names(const suite_spec& suite, const std::set<std::string>& names);

struct cache_options {
  const limits_spec& suite_limits;  // with the fixture's: the warm commands' limits
  std::vector<std::filesystem::path> protected_roots;
  bool force = false;          // warm again (replacing what is stored) even when stored
  std::set<std::string> only;  // only the caches of these names (the rest left out); empty: all
  std::function<void(const std::string&)> say;  // progress, one line each
  sandbox::cancel_token* cancel = nullptr;
};

// Per fixture (suite.fixtures' order), its caches as stored — warmed first where they are not;
// the fixtures `used` says false of are left out (an empty list). Each cache of the same key is
// warmed once, under the store's lock (another evalbox warming it is waited for). A warm
// command that fails (or is cut short by a limit or Ctrl-C) is an error that says which cache,
// which fixture and the end of its output; nothing of it is stored.
struct suite_caches {
  std::vector<std::vector<cache_use>> per_fixture;
  std::vector<unique_fd> holds;  // shared holds on every cache used: kept for the suite's runs
  int warmed = 0;                // how many were warmed now
};
result<suite_caches> ensure_caches(const suite_spec& suite,
                                   const std::vector<std::optional<sandbox::image_summary>>& images,
                                   const std::vector<bool>& used, sandbox::preparer& preparer,
                                   const cache_options& options);

}  // namespace runner
}  // namespace evalbox::harness
