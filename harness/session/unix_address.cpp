// Unix socket addresses of any length (unix_address.h).
#include "harness/session/unix_address.h"

#include <fcntl.h>

#include <cstring>

#include <fmt/format.h>

namespace evalbox::harness {
inline namespace sessions {

result<unix_address> unix_address_of(const std::filesystem::path& path) {
  unix_address a;
  a.addr.sun_family = AF_UNIX;
  std::string p = path.string();
  if (p.size() >= sizeof a.addr.sun_path) {
    const std::filesystem::path dir = path.parent_path().empty() ? "." : path.parent_path();
    a.dir.reset(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!a.dir) return sys_error(errno, fmt::format("open {}", dir.string()));
    p = fmt::format("/proc/self/fd/{}/{}", a.dir.get(), path.filename().string());
    if (p.size() >= sizeof a.addr.sun_path)
      return make_error(error_kind::invalid_argument,
                        "the socket's file name in {} is longer than a Unix socket allows",
                        path.string());
  }
  std::memcpy(a.addr.sun_path, p.c_str(), p.size() + 1);
  return a;
}

}  // namespace sessions
}  // namespace evalbox::harness
