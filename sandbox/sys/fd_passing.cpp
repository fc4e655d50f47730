// SCM_RIGHTS send and receive (see fd_passing.h).
#include "sandbox/sys/fd_passing.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace evalbox::sys {
namespace {

// Room for one descriptor, and for a second one to be detected and closed rather than
// dropped silently by the kernel (MSG_CTRUNC).
constexpr size_t kControlFds = 2;

}  // namespace

ssize_t send_fd(int socket, const void* data, size_t len, int fd) noexcept {
  if (len == 0) {
    errno = EINVAL;
    return -1;
  }
  iovec iov{const_cast<void*>(data), len};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(cm), &fd, sizeof fd);
  return ::sendmsg(socket, &msg, MSG_NOSIGNAL);
}

ssize_t recv_fd(int socket, void* data, size_t len, int* fd) noexcept {
  *fd = -1;
  iovec iov{data, len};
  alignas(cmsghdr) char control[CMSG_SPACE(kControlFds * sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do n = ::recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n < 0) return -1;
  // Every descriptor that arrived is ours to keep or close: the first is kept, the rest (and
  // all of them when the message was cut) closed.
  bool refused = (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0;
  for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int received = -1;
      std::memcpy(&received, CMSG_DATA(cm) + i * sizeof(int), sizeof received);
      if (*fd < 0 && !refused) {
        *fd = received;
      } else {
        refused = true;
        ::close(received);
      }
    }
  }
  if (refused) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
    errno = EMSGSIZE;
    return -1;
  }
  return n;
}

}  // namespace evalbox::sys
