// The system paths (see system_paths.h).
#include "sandbox/spec/system_paths.h"

#include "base/fs.h"

namespace evalbox::sandbox {
inline namespace spec {

bool below_system_path(const std::filesystem::path& path) {
  for (std::string_view p : system_paths)
    if (is_within(path, p)) return true;
  return false;
}

}  // namespace spec
}  // namespace evalbox::sandbox
