// Passing file descriptors over a unix socket (SCM_RIGHTS): pid 1 of a run creates listening
// sockets inside the run's network namespace and hands them to the helper, which serves them
// from the host's (network `allow`, sandbox/net); the helper hands pid 1 the run's cgroup v1
// `tasks` files with its release (pid 1 moves itself in). One message is a few payload bytes
// with a few descriptors attached.
//
// All calls are allocation-free and async-signal-safe: they run in the sandbox child.
// Like the wrappers in syscalls.h they return -1 and set errno; callers add the context.
#pragma once

#include <sys/types.h>

#include <cstddef>

namespace evalbox::sys {

// Sends `len` bytes of `data` (at least one: a message must carry data for the descriptor to
// travel) with `fd` attached. Returns the bytes sent. Never raises SIGPIPE.
ssize_t send_fd(int socket, const void* data, size_t len, int fd) noexcept;
// The same with the `n` descriptors of `fds` attached (none when n is 0; at most max_fds).
ssize_t send_fds(int socket, const void* data, size_t len, const int* fds, size_t n) noexcept;

// Receives one message into `data` (at most `len` bytes) and sets `*fd` to the descriptor that
// came with it (close-on-exec; the caller owns it), or -1 when none did. Returns the bytes
// received, 0 at the end of the stream. A message that does not fit — more payload than
// `len`, or more than one descriptor — is refused whole: every descriptor it carried is closed
// and the call fails with EMSGSIZE.
ssize_t recv_fd(int socket, void* data, size_t len, int* fd) noexcept;
// The same for up to `max` descriptors (at most max_fds), stored in `fds`; `*n` says how many
// came. More than `max` is refused whole, as above.
ssize_t recv_fds(int socket, void* data, size_t len, int* fds, size_t max, size_t* n) noexcept;

inline constexpr size_t max_fds = 8;

}  // namespace evalbox::sys
