// Every raw system call evalbox makes that glibc does not wrap, and the kernel constants that
// Debian 12's headers lack. Nothing outside sandbox/sys calls syscall(2) directly.
// The wrappers return -1 and set errno like libc; callers turn that into result<> with context.
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdint>

#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif
#ifndef MOUNT_ATTR_IDMAP
#define MOUNT_ATTR_IDMAP 0x00100000
#endif
#ifndef MOUNT_ATTR_NOSYMFOLLOW
#define MOUNT_ATTR_NOSYMFOLLOW 0x00200000
#endif
#ifndef FICLONE
#define FICLONE _IOW(0x94, 9, int)
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif

namespace evalbox::sys {

// clone3 with a full clone_args; returns the child's pid in the parent and 0 in the child.
// The child runs on a copy of the caller's stack (no new stack is given), like fork().
inline pid_t clone3(struct clone_args* args) noexcept {
  return static_cast<pid_t>(::syscall(SYS_clone3, args, sizeof(struct clone_args)));
}

inline int openat2(int dirfd, const char* path, struct open_how* how) noexcept {
  return static_cast<int>(::syscall(SYS_openat2, dirfd, path, how, sizeof(struct open_how)));
}

inline int pivot_root(const char* new_root, const char* put_old) noexcept {
  return static_cast<int>(::syscall(SYS_pivot_root, new_root, put_old));
}

inline int open_tree(int dirfd, const char* path, unsigned int flags) noexcept {
  return static_cast<int>(::syscall(SYS_open_tree, dirfd, path, flags));
}

inline int move_mount(int from_dirfd, const char* from_path, int to_dirfd, const char* to_path,
                      unsigned int flags) noexcept {
  return static_cast<int>(
      ::syscall(SYS_move_mount, from_dirfd, from_path, to_dirfd, to_path, flags));
}

inline int mount_setattr(int dirfd, const char* path, unsigned int flags,
                         struct mount_attr* attr) noexcept {
  return static_cast<int>(
      ::syscall(SYS_mount_setattr, dirfd, path, flags, attr, sizeof(struct mount_attr)));
}

inline int landlock_create_ruleset(const struct landlock_ruleset_attr* attr, size_t size,
                                   uint32_t flags) noexcept {
  return static_cast<int>(::syscall(SYS_landlock_create_ruleset, attr, size, flags));
}

inline int landlock_add_rule(int ruleset_fd, enum landlock_rule_type type, const void* attr,
                             uint32_t flags) noexcept {
  return static_cast<int>(::syscall(SYS_landlock_add_rule, ruleset_fd, type, attr, flags));
}

inline int landlock_restrict_self(int ruleset_fd, uint32_t flags) noexcept {
  return static_cast<int>(::syscall(SYS_landlock_restrict_self, ruleset_fd, flags));
}

inline int pidfd_open(pid_t pid, unsigned int flags) noexcept {
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, flags));
}

inline int pidfd_send_signal(int pidfd, int sig, siginfo_t* info, unsigned int flags) noexcept {
  return static_cast<int>(::syscall(SYS_pidfd_send_signal, pidfd, sig, info, flags));
}

// capset(2): glibc does not wrap it (libcap does, but the sandbox child must not allocate).
// `hdr` and `data` are struct __user_cap_header_struct / __user_cap_data_struct[2].
inline int capset(void* hdr, const void* data) noexcept {
  return static_cast<int>(::syscall(SYS_capset, hdr, data));
}

inline int close_range(unsigned int first, unsigned int last, unsigned int flags) noexcept {
  return static_cast<int>(::syscall(SYS_close_range, first, last, flags));
}

// Closes every fd above the standard streams except `keep` (all of them when keep < 3).
// 0, or the errno of the close_range that failed.
inline int close_all_but_stdio_and(int keep) noexcept {
  const unsigned k = keep < 3 ? 2u : static_cast<unsigned>(keep);
  if (k > 3 && close_range(3, k - 1, 0) != 0) return errno;
  return close_range(k + 1, ~0U, 0) == 0 ? 0 : errno;
}

// The new mount API: an overlay built with fsconfig(FSCONFIG_SET_STRING, "lowerdir+", dir)
// takes its lowers one at a time (Linux 6.8+), with no limit on their number or path length.
inline int fsopen(const char* fs_name, unsigned int flags) noexcept {
  return static_cast<int>(::syscall(SYS_fsopen, fs_name, flags));
}

inline int fsconfig(int fs_fd, unsigned int cmd, const char* key, const void* value,
                    int aux) noexcept {
  return static_cast<int>(::syscall(SYS_fsconfig, fs_fd, cmd, key, value, aux));
}

inline int fsmount(int fs_fd, unsigned int flags, unsigned int attr_flags) noexcept {
  return static_cast<int>(::syscall(SYS_fsmount, fs_fd, flags, attr_flags));
}

}  // namespace evalbox::sys
