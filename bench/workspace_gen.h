// Deterministic benchmark workspaces (small, medium, large), generated once into a cache
// directory outside the repository and reused by every benchmark run.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "base/error.h"

namespace evalbox::bench {

struct workspace_shape {
  std::string_view name;
  int files = 0;          // regular files, .git included
  uint64_t bytes = 0;     // total content bytes
  int fanout = 10;        // subdirectories per directory
  int depth = 1;          // directory levels below the root
  bool with_git = false;  // a .git directory with refs, config and loose objects
};

inline constexpr workspace_shape small_workspace{"small", 100, 1ull << 20, 10, 1, false};
inline constexpr workspace_shape medium_workspace{"medium", 2000, 20ull << 20, 8, 3, true};
inline constexpr workspace_shape large_workspace{"large", 20000, 200ull << 20, 12, 3, true};

// EVALBOX_BENCH_CACHE, else <build dir>/bench-cache.
std::filesystem::path cache_dir();

// The workspace of `shape` under cache_dir(), generating it first when absent (into a
// temporary name, renamed when complete, so an interrupted generation is never reused).
result<std::filesystem::path> ensure_workspace(const workspace_shape& shape);

// Looks a shape up by name ("small", "medium", "large").
const workspace_shape* find_shape(std::string_view name);

}  // namespace evalbox::bench
