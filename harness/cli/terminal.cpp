// The caller's terminal in raw mode, restored on every way out (terminal.h).
#include "harness/cli/terminal.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>

namespace evalbox::harness::cli {
namespace {

// What restore_terminal_now() reads from a signal handler: written before `live` is set, and
// only read while it is.
termios g_saved{};
int g_fd = -1;
std::atomic<bool> g_live{false};

}  // namespace

termios raw_mode_of(const termios& cooked) {
  termios t = cooked;
  t.c_iflag &=
      ~static_cast<tcflag_t>(IGNBRK | BRKINT | PARMRK | ISTRIP | INLCR | IGNCR | ICRNL | IXON);
  t.c_oflag &= ~static_cast<tcflag_t>(OPOST);
  t.c_lflag &= ~static_cast<tcflag_t>(ECHO | ECHONL | ICANON | ISIG | IEXTEN);
  t.c_cflag &= ~static_cast<tcflag_t>(CSIZE | PARENB);
  t.c_cflag |= CS8;
  t.c_cc[VMIN] = 1;
  t.c_cc[VTIME] = 0;
  return t;
}

result<raw_terminal> raw_terminal::enter(int fd) {
  if (g_live.load()) return make_error(error_kind::internal, "the terminal is already in raw mode");
  termios saved{};
  if (::tcgetattr(fd, &saved) != 0) return sys_error(errno, "tcgetattr({})", fd);
  g_saved = saved;
  g_fd = fd;
  g_live.store(true);
  const termios raw = raw_mode_of(saved);
  if (::tcsetattr(fd, TCSADRAIN, &raw) != 0) {
    const int err = errno;
    g_live.store(false);
    return sys_error(err, "tcsetattr({}, raw)", fd);
  }
  return raw_terminal(fd, saved);
}

raw_terminal::raw_terminal(raw_terminal&& other) noexcept : fd_(other.fd_), saved_(other.saved_) {
  other.fd_ = -1;
}

raw_terminal::~raw_terminal() {
  if (fd_ < 0) return;
  // TCSADRAIN: what the session wrote last reaches the screen under the settings it was
  // written for.
  (void)::tcsetattr(fd_, TCSADRAIN, &saved_);
  g_live.store(false);
}

void restore_terminal_now() noexcept {
  if (g_live.load()) (void)::tcsetattr(g_fd, TCSANOW, &g_saved);
}

}  // namespace evalbox::harness::cli
