// The caller's terminal in raw mode and put back (harness/cli/terminal.h), on a pseudo-terminal
// made for the test.
#include "harness/cli/terminal.h"

#include <gtest/gtest.h>
#include <pty.h>
#include <unistd.h>

#include <cstring>

namespace evalbox::harness::cli {
namespace {

struct pty_pair {
  int master = -1, slave = -1;
  pty_pair() { EXPECT_EQ(::openpty(&master, &slave, nullptr, nullptr, nullptr), 0); }
  ~pty_pair() {
    ::close(master);
    ::close(slave);
  }
};

termios settings(int fd) {
  termios t{};
  EXPECT_EQ(::tcgetattr(fd, &t), 0);
  return t;
}

bool same(const termios& a, const termios& b) {
  return a.c_iflag == b.c_iflag && a.c_oflag == b.c_oflag && a.c_cflag == b.c_cflag &&
         a.c_lflag == b.c_lflag && std::memcmp(a.c_cc, b.c_cc, sizeof a.c_cc) == 0;
}

TEST(RawMode, TurnsOffEchoLineEditingAndSignalKeys) {
  pty_pair p;
  const termios cooked = settings(p.slave);
  ASSERT_TRUE(cooked.c_lflag & ICANON);
  const termios raw = raw_mode_of(cooked);
  EXPECT_FALSE(raw.c_lflag & (ECHO | ICANON | ISIG | IEXTEN));
  EXPECT_FALSE(raw.c_iflag & (ICRNL | IXON));
  EXPECT_FALSE(raw.c_oflag & OPOST);
  EXPECT_EQ(raw.c_cc[VMIN], 1);
}

TEST(RawTerminal, IsRawWhileLiveAndRestoredExactlyWhenDestroyed) {
  pty_pair p;
  const termios before = settings(p.slave);
  {
    auto guard = raw_terminal::enter(p.slave);
    ASSERT_TRUE(guard) << guard.error().message;
    EXPECT_FALSE(settings(p.slave).c_lflag & (ICANON | ECHO | ISIG));
    EXPECT_TRUE(same(guard->saved(), before));
    // Moved (as a result is), the settings are still put back once, by the live one.
    raw_terminal moved(std::move(*guard));
    EXPECT_FALSE(settings(p.slave).c_lflag & ICANON);
  }
  EXPECT_TRUE(same(settings(p.slave), before));
}

TEST(RawTerminal, TheSignalPathRestoresWhileTheGuardIsLive) {
  pty_pair p;
  const termios before = settings(p.slave);
  auto guard = raw_terminal::enter(p.slave);
  ASSERT_TRUE(guard);
  restore_terminal_now();  // what a SIGTERM/SIGHUP/SIGINT handler calls
  EXPECT_TRUE(same(settings(p.slave), before));
}

TEST(RawTerminal, OneAtATimeAndNotOnAFileThatIsNoTerminal) {
  pty_pair p;
  auto first = raw_terminal::enter(p.slave);
  ASSERT_TRUE(first);
  EXPECT_FALSE(raw_terminal::enter(p.slave));
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  { raw_terminal done(std::move(*first)); }
  auto not_a_tty = raw_terminal::enter(pipe_fds[0]);
  EXPECT_FALSE(not_a_tty);
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  restore_terminal_now();  // nothing live: does nothing
}

}  // namespace
}  // namespace evalbox::harness::cli
