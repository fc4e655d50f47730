// Running a planned suite from the command line (see session.h).
#include "harness/cli/suite_command.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <thread>

#include "harness/cli/commands.h"
#include "harness/cli/registry.h"
#include "harness/fixture/harbor_images.h"
#include "harness/fixture/load.h"
#include "harness/validate/validate.h"
#include "sandbox/prepare/preparer.h"

namespace evalbox::harness::cli {

namespace {

// Blocks SIGINT/SIGTERM in every thread (workers inherit the mask) and waits for them on a
// dedicated thread, which cancels the run. The sandbox helper unblocks them for the program.
class signal_watch {
 public:
  explicit signal_watch(sandbox::cancel_token& token) : token_(token) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGUSR1);  // wakes the watcher at the end
    pthread_sigmask(SIG_BLOCK, &set, &old_);
    thread_ = std::thread([this, set] {
      int sig = 0;
      while (sigwait(&set, &sig) == 0) {
        if (sig == SIGUSR1 && done_.load()) return;
        if (sig == SIGINT || sig == SIGTERM) {
          signal_.store(sig);
          token_.requested.store(true);
          static constexpr char msg[] =
              "\nevalbox: stopping: killing running sandboxes, recording nothing unfinished\n";
          (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
        }
      }
    });
  }
  ~signal_watch() {
    done_.store(true);
    pthread_kill(thread_.native_handle(), SIGUSR1);
    thread_.join();
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  int signal() const { return signal_.load(); }

 private:
  sandbox::cancel_token& token_;
  sigset_t old_{};
  std::thread thread_;
  std::atomic<bool> done_{false};
  std::atomic<int> signal_{0};
};

}  // namespace

std::expected<harness::suite_spec, int> load_runnable_suite(const std::string& path) {
  const auto registry = make_registry();
  auto suite = harness::load_suite(path, registry.ids());
  if (!suite) {
    fmt::print(stderr, "{}\n", suite.error().message);
    return std::unexpected(suite.error().kind == error_kind::invalid_argument ||
                                   suite.error().kind == error_kind::not_found
                               ? exit_usage
                               : exit_internal);
  }
  if (auto problems = harness::validate_candidates(*suite, registry); !problems.empty()) {
    fmt::print(stderr, "{}\n", harness::join_messages(problems));
    return std::unexpected(exit_usage);
  }
  return std::move(*suite);
}

void say_progress(const std::string& line) { fmt::print(stderr, "evalbox: {}\n", line); }

int resolve_suite_images(harness::suite_spec& suite, const std::vector<std::string>& options) {
  auto errors = harness::resolve_suite_images(
      suite, options, sandbox::default_preparer_options().state_root, say_progress);
  if (!errors) {
    fmt::print(stderr, "{}\n", errors.error().message);
    return exit_usage;
  }
  if (errors->empty()) return exit_ok;
  fmt::print(stderr, "{}\n", harness::join_messages(*errors));
  return exit_usage;
}

suite_run_options::suite_run_options() {
  sandbox = sandbox::default_preparer_options();
  if (const char* fault = std::getenv("EVALBOX_FAULT")) grading_fault = fault;
}

result<suite_run> run_planned(const harness::suite_spec& suite,
                              const std::vector<harness::run_spec>& runs,
                              const suite_run_options& options) {
  auto registry = make_registry();
  sandbox::cancel_token cancel;
  harness::runner_options o = options;
  o.cancel = &cancel;
  if (options.shell)
    o.interactive = [&options, &cancel](const sandbox::prepared_session& s,
                                        sandbox::launch_options l) {
      return options.shell(s, std::move(l), cancel);
    };
  if (!options.quiet) {
    const bool tty = ::isatty(STDERR_FILENO) == 1 && !std::getenv("CI");
    o.on_notice = [](const std::string& line) { fmt::print(stderr, "evalbox: {}\n", line); };
    o.on_progress = [tty](const harness::progress& p) {
      double eta = p.done > 0 ? p.elapsed_s / p.done * (p.total - p.done) : 0;
      if (tty) {
        fmt::print(stderr, "\r\033[K[{}/{}] {} passed, {} failed, {} errors, ETA {:.0f}s  {}",
                   p.done, p.total, p.passed, p.failed, p.errors, eta, p.last);
        if (p.done == p.total) fmt::print(stderr, "\n");
      } else {
        fmt::print(stderr, "[{}/{}] {}\n", p.done, p.total, p.last);
      }
    };
  }
  signal_watch watch(cancel);
  auto done = harness::run_and_report(suite, runs, registry, o);
  suite_run out;
  out.signal = watch.signal();
  if (!done) return std::unexpected(std::move(done).error());
  static_cast<harness::suite_run&>(out) = std::move(*done);
  return out;
}

std::expected<std::optional<harness::suite_spec>, int> load_parent_suite(const std::string& file) {
  if (file.empty()) return std::nullopt;
  std::vector<harness::config_error> errors;
  auto s = harness::load_suite(file, make_registry().ids(), &errors);
  if (!s) {
    fmt::print(stderr, "{}\n", errors.empty() ? s.error().message : harness::join_messages(errors));
    return std::unexpected(exit_usage);
  }
  return std::move(*s);
}

}  // namespace evalbox::harness::cli
