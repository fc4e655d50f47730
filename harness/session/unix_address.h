// The address of a Unix socket at a path of any length. sun_path holds 107 bytes; a session's
// socket lives under the state directory, which may be deeper than that. A longer path is
// reached through its directory, opened O_PATH and named /proc/self/fd/N/<name> — the same
// socket, for bind and connect alike.
#pragma once
#include <sys/socket.h>
#include <sys/un.h>

#include <filesystem>

#include "base/error.h"
#include "base/unique_fd.h"

namespace evalbox::harness {
inline namespace sessions {

struct unix_address {
  sockaddr_un addr{};
  unique_fd dir;  // the directory of a long path, held until the bind or connect is done

  [[nodiscard]] const sockaddr* get() const noexcept {
    return reinterpret_cast<const sockaddr*>(&addr);
  }
  [[nodiscard]] static constexpr socklen_t size() noexcept { return sizeof(sockaddr_un); }
};

// `path`'s address; invalid_argument when even its file name is too long, not_found when its
// directory is missing.
result<unix_address> unix_address_of(const std::filesystem::path& path);

}  // namespace sessions
}  // namespace evalbox::harness
