// Opening a path beneath a directory with openat2(2), under RESOLVE_* rules the caller chooses
// (staying beneath it, following no symbolic link, crossing no mount...). The kernel answers
// EAGAIN when a concurrent rename might have raced the lookup; this retries it. Used wherever a
// tree someone else wrote is read or written: image layers (sandbox/image) and the run files
// report.html embeds. Like the wrappers in syscalls.h it returns -1 and sets errno.
#pragma once

#include <cstdint>

namespace evalbox::sys {

// `mode`: the new file's mode with O_CREAT (openat2 refuses a mode without it).
int open_beneath(int dirfd, const char* path, uint64_t flags, uint64_t resolve,
                 uint64_t mode = 0) noexcept;

}  // namespace evalbox::sys
