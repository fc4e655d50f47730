// Descriptor passing over a unix socket (sys/fd_passing.h), as pid 1 hands its listening
// sockets to the helper: a descriptor arrives and works, a message without one arrives without
// one, and a message that does not fit is refused whole with nothing leaked.
#include "sandbox/sys/fd_passing.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "base/unique_fd.h"

namespace evalbox::sys {
namespace {

struct socket_pair {
  unique_fd a, b;
};

socket_pair seqpacket_pair() {
  int sv[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  return {unique_fd(sv[0]), unique_fd(sv[1])};
}

int open_fds() {
  int n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  while (dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
  ::closedir(d);
  return n;
}

// Sends `fds` in one SCM_RIGHTS message, the way a peer that does not follow the protocol
// could.
void send_raw(int socket, const std::string& data, const std::vector<int>& fds) {
  iovec iov{const_cast<char*>(data.data()), data.size()};
  std::vector<char> control(CMSG_SPACE(fds.size() * sizeof(int)));
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (!fds.empty()) {
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    cmsghdr* cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
    std::memcpy(CMSG_DATA(cm), fds.data(), fds.size() * sizeof(int));
  }
  ASSERT_EQ(::sendmsg(socket, &msg, 0), static_cast<ssize_t>(data.size()));
}

TEST(FdPassing, APassedDescriptorArrivesCloseOnExecAndWorks) {
  auto sp = seqpacket_pair();
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  unique_fd read_end(p[0]), write_end(p[1]);
  const unsigned char index = 7;
  ASSERT_EQ(send_fd(sp.a.get(), &index, 1, write_end.get()), 1);
  write_end.reset();  // only the passed copy is left

  unsigned char got = 0;
  int fd = -1;
  ASSERT_EQ(recv_fd(sp.b.get(), &got, 1, &fd), 1) << std::strerror(errno);
  unique_fd passed(fd);
  EXPECT_EQ(got, 7);
  ASSERT_TRUE(passed);
  EXPECT_EQ(::fcntl(passed.get(), F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  ASSERT_EQ(::write(passed.get(), "x", 1), 1);
  char c = 0;
  ASSERT_EQ(::read(read_end.get(), &c, 1), 1);
  EXPECT_EQ(c, 'x');
}

TEST(FdPassing, AMessageWithoutADescriptorArrivesWithoutOne) {
  auto sp = seqpacket_pair();
  send_raw(sp.a.get(), "k", {});
  unsigned char got = 0;
  int fd = 123;
  EXPECT_EQ(recv_fd(sp.b.get(), &got, 1, &fd), 1);
  EXPECT_EQ(got, 'k');
  EXPECT_EQ(fd, -1);
}

TEST(FdPassing, TheEndOfTheStreamIsZeroBytes) {
  auto sp = seqpacket_pair();
  sp.a.reset();
  unsigned char got = 0;
  int fd = 123;
  EXPECT_EQ(recv_fd(sp.b.get(), &got, 1, &fd), 0);
  EXPECT_EQ(fd, -1);
}

TEST(FdPassing, MoreDescriptorsThanOneAreRefusedAndAllClosed) {
  auto sp = seqpacket_pair();
  const int before = open_fds();
  {
    unique_fd x(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    unique_fd y(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    send_raw(sp.a.get(), "t", {x.get(), y.get()});
  }
  unsigned char got = 0;
  int fd = 123;
  errno = 0;
  EXPECT_EQ(recv_fd(sp.b.get(), &got, 1, &fd), -1);
  EXPECT_EQ(errno, EMSGSIZE);
  EXPECT_EQ(fd, -1);
  EXPECT_EQ(open_fds(), before) << "a received descriptor was leaked";
}

TEST(FdPassing, MorePayloadThanAskedForIsRefusedAndItsDescriptorClosed) {
  auto sp = seqpacket_pair();
  const int before = open_fds();
  {
    unique_fd x(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    send_raw(sp.a.get(), "four", {x.get()});
  }
  unsigned char got = 0;
  int fd = 123;
  errno = 0;
  EXPECT_EQ(recv_fd(sp.b.get(), &got, 1, &fd), -1);
  EXPECT_EQ(errno, EMSGSIZE);
  EXPECT_EQ(fd, -1);
  EXPECT_EQ(open_fds(), before);
}

// The release of pid 1 carries one `tasks` file per cgroup v1 hierarchy: several descriptors
// in one message arrive together, in order, each usable; one more than the receiver allows is
// refused with all of them closed.
TEST(FdPassing, SeveralDescriptorsArriveTogetherInOrderUpToTheReceiversMaximum) {
  auto sp = seqpacket_pair();
  std::vector<unique_fd> reads, writes;
  std::vector<int> sent;
  for (int i = 0; i < 3; ++i) {
    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
    reads.emplace_back(p[0]);
    writes.emplace_back(p[1]);
    sent.push_back(p[1]);
  }
  ASSERT_EQ(send_fds(sp.a.get(), "x", 1, sent.data(), sent.size()), 1);
  char got = 0;
  int fds[max_fds] = {};
  size_t n = 0;
  ASSERT_EQ(recv_fds(sp.b.get(), &got, 1, fds, 3, &n), 1) << std::strerror(errno);
  ASSERT_EQ(n, 3u);
  for (size_t i = 0; i < n; ++i) {
    unique_fd passed(fds[i]);
    EXPECT_EQ(::fcntl(passed.get(), F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
    const char c = static_cast<char>('a' + i);
    ASSERT_EQ(::write(passed.get(), &c, 1), 1);
    char r = 0;
    ASSERT_EQ(::read(reads[i].get(), &r, 1), 1);
    EXPECT_EQ(r, c) << "descriptor " << i << " is not the one sent at its place";
  }
  // The same three to a receiver that allows two.
  const int before = open_fds();
  ASSERT_EQ(send_fds(sp.a.get(), "y", 1, sent.data(), sent.size()), 1);
  errno = 0;
  EXPECT_EQ(recv_fds(sp.b.get(), &got, 1, fds, 2, &n), -1);
  EXPECT_EQ(errno, EMSGSIZE);
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(open_fds(), before) << "a received descriptor was leaked";
  // A message with none is one byte and no descriptor.
  ASSERT_EQ(send_fds(sp.a.get(), "z", 1, nullptr, 0), 1);
  EXPECT_EQ(recv_fds(sp.b.get(), &got, 1, fds, 3, &n), 1);
  EXPECT_EQ(got, 'z');
  EXPECT_EQ(n, 0u);
  errno = 0;
  EXPECT_EQ(send_fds(sp.a.get(), "w", 1, sent.data(), max_fds + 1), -1) << "more than max_fds";
  EXPECT_EQ(errno, EINVAL);
}

TEST(FdPassing, AMessageNeedsAtLeastOneByte) {
  auto sp = seqpacket_pair();
  errno = 0;
  EXPECT_EQ(send_fd(sp.a.get(), "", 0, 0), -1);
  EXPECT_EQ(errno, EINVAL);
}

TEST(FdPassing, SendingToAClosedPeerFailsWithoutSigpipe) {
  auto sp = seqpacket_pair();
  sp.b.reset();
  const unsigned char index = 1;
  errno = 0;
  EXPECT_EQ(send_fd(sp.a.get(), &index, 1, 0), -1);  // the process is still alive: no SIGPIPE
  EXPECT_EQ(errno, EPIPE);
}

}  // namespace
}  // namespace evalbox::sys
