// open_beneath (see beneath.h).
#include "sandbox/sys/beneath.h"

#include <cerrno>

#include "sandbox/sys/syscalls.h"

namespace evalbox::sys {

int open_beneath(int dirfd, const char* path, uint64_t flags, uint64_t resolve,
                 uint64_t mode) noexcept {
  struct open_how how {};
  how.flags = flags;
  how.mode = mode;
  how.resolve = resolve;
  for (int attempt = 0; attempt < 16; ++attempt) {
    const int fd = openat2(dirfd, path, &how);
    if (fd >= 0 || errno != EAGAIN) return fd;
  }
  return -1;
}

}  // namespace evalbox::sys
