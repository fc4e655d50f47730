// What the content-addressed stores under the state root share (private to sandbox/prepare):
// the bundle store (bundles.cpp) and the cache store (caches.cpp) each make an entry in a
// temporary directory and rename it into place, so that a crash leaves only names nothing reads.
#pragma once

#include <filesystem>
#include <string_view>

#include "base/error.h"

namespace evalbox::sandbox {
inline namespace prepare {

// A new directory (0700) in `store` — made, with the state root, when missing — named
// .<kind>-<the first 16 characters of key>-<pid>-<n>: collect_store_leftovers (caches.h) removes
// it once its process is gone. `kind` is "tmp" (an entry being made) or "rm" (being removed).
result<std::filesystem::path> make_store_temporary(const std::filesystem::path& state_root,
                                                   const std::filesystem::path& store,
                                                   std::string_view key, std::string_view kind);

}  // namespace prepare
}  // namespace evalbox::sandbox
