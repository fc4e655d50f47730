// Files inside a live sandbox, reached from the host through the root directory pid 1 handed
// over (live.h): every path resolved with RESOLVE_IN_ROOT from that root, every access made with
// the sandbox user's filesystem ids. Private to sandbox/live.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "sandbox/live/live.h"

namespace evalbox::sandbox::live_files {

// Where paths are resolved and as whom.
struct place {
  int root_fd = -1;
  std::string workspace;  // a relative path is relative to it
  uid_t uid = 0;          // the sandbox's id outside (its root inside)
  gid_t gid = 0;
};

result<file_content> read(const place& at, const std::string& path, uint64_t max_bytes);
result<uint64_t> write(const place& at, const std::string& path, std::string_view data,
                       uint32_t mode, bool append, bool parents);
result<std::vector<file_entry>> list(const place& at, const std::string& path);

}  // namespace evalbox::sandbox::live_files
