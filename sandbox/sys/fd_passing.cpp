// SCM_RIGHTS send and receive (see fd_passing.h).
#include "sandbox/sys/fd_passing.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace evalbox::sys {

ssize_t send_fds(int socket, const void* data, size_t len, const int* fds, size_t n) noexcept {
  if (len == 0 || n > max_fds) {
    errno = EINVAL;
    return -1;
  }
  iovec iov{const_cast<void*>(data), len};
  alignas(cmsghdr) char control[CMSG_SPACE(max_fds * sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (n > 0) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(n * sizeof(int));
    cmsghdr* cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(n * sizeof(int));
    std::memcpy(CMSG_DATA(cm), fds, n * sizeof(int));
  }
  return ::sendmsg(socket, &msg, MSG_NOSIGNAL);
}

ssize_t send_fd(int socket, const void* data, size_t len, int fd) noexcept {
  return send_fds(socket, data, len, &fd, 1);
}

ssize_t recv_fds(int socket, void* data, size_t len, int* fds, size_t max, size_t* n) noexcept {
  *n = 0;
  if (max > max_fds) {
    errno = EINVAL;
    return -1;
  }
  iovec iov{data, len};
  // Room for one descriptor more than allowed, so that an extra one is seen and closed rather
  // than dropped silently by the kernel (MSG_CTRUNC).
  alignas(cmsghdr) char control[CMSG_SPACE((max_fds + 1) * sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = CMSG_SPACE((max + 1) * sizeof(int));
  ssize_t got;
  do got = ::recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
  while (got < 0 && errno == EINTR);
  if (got < 0) return -1;
  // Every descriptor that arrived is ours to keep or close: up to `max` are kept, the rest
  // (and all of them when the message was cut) closed.
  bool refused = (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0;
  for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int received = -1;
      std::memcpy(&received, CMSG_DATA(cm) + i * sizeof(int), sizeof received);
      if (*n < max && !refused) {
        fds[(*n)++] = received;
      } else {
        refused = true;
        ::close(received);
      }
    }
  }
  if (refused) {
    for (size_t i = 0; i < *n; ++i) ::close(fds[i]);
    *n = 0;
    errno = EMSGSIZE;
    return -1;
  }
  return got;
}

ssize_t recv_fd(int socket, void* data, size_t len, int* fd) noexcept {
  size_t n = 0;
  *fd = -1;
  const ssize_t got = recv_fds(socket, data, len, fd, 1, &n);
  if (n == 0) *fd = -1;
  return got;
}

}  // namespace evalbox::sys
