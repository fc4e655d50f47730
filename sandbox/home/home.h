// The managed home (/home/agent inside): laid out from the request's home_layout on the
// run's disk, directories 0700, files with their modes, everything owned by the sandbox id,
// plus an empty 0600 placeholder at each credential target for the launcher to bind the
// lease over.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <vector>

#include "base/error.h"
#include "sandbox/spec/request.h"

namespace evalbox::sandbox::home {

// Creates `dir` and the layout below it. Paths are validated (safe relative) beforehand;
// intermediate directories are created 0700.
status lay_out(const std::filesystem::path& dir, const home_layout& layout,
               const std::vector<secret_mount>& secrets, uid_t uid, gid_t gid);

}  // namespace evalbox::sandbox::home
