// One interactive launch (interactive.h): signals, the terminal's raw mode, the launch.
#include "harness/cli/interactive.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string_view>

#include "harness/cli/terminal.h"

namespace evalbox::harness::cli {
namespace {

sandbox::cancel_token* g_cancel = nullptr;

extern "C" void on_stop_signal(int) {
  // The terminal first: should evalbox not get to its guard (killed next), it is sane.
  restore_terminal_now();
  if (g_cancel) g_cancel->requested.store(true);
}

// Installs the handlers for the launch's life and puts the old ones back.
class signal_scope {
 public:
  signal_scope(sandbox::cancel_token& cancel, bool terminal) {
    g_cancel = &cancel;
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGTERM, &sa, &old_term_);
    ::sigaction(SIGHUP, &sa, &old_hup_);
    // Without a pseudo-terminal, Ctrl-C at the shared terminal reaches the program itself
    // (same foreground group) and evalbox ignores it; with one, typed keys are bytes, and a
    // SIGINT that still reaches evalbox was sent to it: it ends the run.
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    ::sigaction(SIGINT, terminal ? &sa : &ign, &old_int_);
  }
  ~signal_scope() {
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGHUP, &old_hup_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
    g_cancel = nullptr;
  }
  signal_scope(const signal_scope&) = delete;
  signal_scope& operator=(const signal_scope&) = delete;

 private:
  struct sigaction old_term_ {};
  struct sigaction old_hup_ {};
  struct sigaction old_int_ {};
};

}  // namespace

result<sandbox::run_record> launch_interactive(const sandbox::prepared_session& session,
                                               sandbox::launch_options options,
                                               sandbox::cancel_token& cancel) {
  options.inherit_stdio = true;
  options.terminal = ::isatty(STDIN_FILENO) == 1;
  if (options.argv.empty()) options.argv = interactive_shell_argv();
  // The terminal's type is the caller's (a run's environment says TERM=dumb, which is right
  // for an agent's pipes and wrong for a person's terminal); the locale too, unless the run
  // sets one.
  if (options.env) {
    for (const char* k : {"TERM", "COLORTERM", "LANG", "LC_ALL"}) {
      const bool terminal_type =
          std::string_view(k) == "TERM" || std::string_view(k) == "COLORTERM";
      if (const char* v = std::getenv(k); v && *v && (terminal_type || !options.env->contains(k)))
        (*options.env)[k] = v;
    }
  }
  signal_scope signals(cancel, options.terminal);
  std::optional<raw_terminal> raw;
  if (options.terminal) {
    auto r = raw_terminal::enter(STDIN_FILENO);
    if (!r) return std::unexpected(std::move(r.error()).with_context("the terminal"));
    raw.emplace(std::move(*r));
  }
  return sandbox::launch_in(session, options, &cancel);
}

std::vector<std::string> interactive_shell_argv() {
  return {"/bin/sh", "-c", "command -v bash >/dev/null 2>&1 && exec bash -i; exec sh -i"};
}

}  // namespace evalbox::harness::cli
