// The caller's terminal while a sandbox's pseudo-terminal is relayed to it (sandbox shell,
// fixture shell, runs shell): raw mode for the session's life, and the terminal put back as it
// was on every way out — the guard's destructor on a normal end (the program exited, the wall
// limit, the sandbox killed), restore_terminal_now() from a signal handler (SIGTERM, SIGHUP,
// SIGINT of evalbox itself). A SIGKILL of evalbox leaves the terminal raw: `stty sane` (or
// `reset`) puts it back, as after any program killed so.
#pragma once

#include <termios.h>

#include <optional>

#include "base/error.h"

namespace evalbox::harness::cli {

// Raw mode as cfmakeraw sets it: no echo, no line editing, no signals from keys (Ctrl-C and
// Ctrl-Z travel as bytes to the sandbox's terminal, whose line discipline makes them signals
// for the foreground job inside), output passed unchanged.
termios raw_mode_of(const termios& cooked);

// Puts the terminal at `fd` in raw mode and restores the saved settings when destroyed.
// Move-only; one at a time per process (the signal-safe restore reads the saved settings from
// static storage).
class raw_terminal {
 public:
  static result<raw_terminal> enter(int fd);
  raw_terminal(raw_terminal&& other) noexcept;
  raw_terminal& operator=(raw_terminal&&) = delete;
  raw_terminal(const raw_terminal&) = delete;
  ~raw_terminal();

  const termios& saved() const { return saved_; }

 private:
  raw_terminal(int fd, const termios& saved) : fd_(fd), saved_(saved) {}
  int fd_ = -1;
  termios saved_{};
};

// Async-signal-safe: puts back the settings the live raw_terminal saved (tcsetattr only), or
// does nothing when none is live.
void restore_terminal_now() noexcept;

}  // namespace evalbox::harness::cli
