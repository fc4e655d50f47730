// Landlock rule construction (helper side) and application (child side, allocation-free).
#include "sandbox/landlock/landlock.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/unique_fd.h"
#include "sandbox/sys/syscalls.h"

namespace evalbox::sandbox::landlock {
namespace {

// The ruleset attribute as of ABI 6 (Debian 12's header stops at handled_access_fs). The
// kernel accepts a shorter size from older ABIs, so the size passed follows the ABI.
struct ruleset_attr_v6 {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
};

constexpr uint64_t scope_abstract_unix_socket = 1ULL << 0;
constexpr uint64_t scope_signal = 1ULL << 1;

constexpr uint64_t fs_read = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
constexpr uint64_t fs_exec = LANDLOCK_ACCESS_FS_EXECUTE;
// Rights that may be granted on a file (not a directory); others make add_rule fail.
constexpr uint64_t file_rights = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                                 LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE |
                                 LANDLOCK_ACCESS_FS_IOCTL_DEV;

uint64_t handled_for(int abi) {
  uint64_t h = (1ULL << 13) - 1;  // ABI 1: EXECUTE .. MAKE_SYM
  if (abi >= 2) h |= LANDLOCK_ACCESS_FS_REFER;
  if (abi >= 3) h |= LANDLOCK_ACCESS_FS_TRUNCATE;
  if (abi >= 5) h |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
  return h;
}

}  // namespace

int kernel_abi() noexcept {
  int v = sys::landlock_create_ruleset(nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return v < 0 ? 0 : v;
}

ruleset make_ruleset(int abi, const std::vector<path_rule>& rules) {
  ruleset rs;
  if (abi <= 0) return rs;
  rs.abi = abi > max_abi ? max_abi : abi;
  rs.handled_fs = handled_for(rs.abi);
  if (rs.abi >= 6) rs.scoped = scope_abstract_unix_socket | scope_signal;
  for (const auto& r : rules) {
    uint64_t rights = 0;
    switch (r.kind) {
      case access::read_only:
        rights = fs_read | fs_exec;
        break;
      case access::read_write:
        rights = rs.handled_fs;
        break;
      case access::device:
        rights = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                 LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV | fs_read;
        break;
    }
    rs.paths.push_back(r.path);
    rs.rights.push_back(rights & rs.handled_fs);
  }
  return rs;
}

int apply(const ruleset& rs) noexcept {
  if (rs.abi <= 0) return 0;
  ruleset_attr_v6 attr{rs.handled_fs, 0, rs.scoped};
  const size_t size = rs.abi >= 6 ? sizeof(attr) : sizeof(uint64_t);
  unique_fd fd(
      sys::landlock_create_ruleset(reinterpret_cast<const landlock_ruleset_attr*>(&attr), size, 0));
  if (!fd) return errno;
  for (size_t i = 0; i < rs.paths.size(); ++i) {
    unique_fd path(::open(rs.paths[i].c_str(), O_PATH | O_CLOEXEC));
    if (!path) {
      if (errno == ENOENT) continue;
      return errno;
    }
    struct stat st {};
    uint64_t rights = rs.rights[i];
    if (::fstat(path.get(), &st) == 0 && !S_ISDIR(st.st_mode)) rights &= file_rights;
    struct landlock_path_beneath_attr pb {};
    pb.allowed_access = rights;
    pb.parent_fd = path.get();
    if (sys::landlock_add_rule(fd.get(), LANDLOCK_RULE_PATH_BENEATH, &pb, 0) != 0) return errno;
  }
  return sys::landlock_restrict_self(fd.get(), 0) == 0 ? 0 : errno;
}

}  // namespace evalbox::sandbox::landlock
