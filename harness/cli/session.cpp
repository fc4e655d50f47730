// Running a planned suite from the command line (see session.h).
#include "harness/cli/session.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string_view>
#include <thread>

#include "harness/cli/commands.h"
#include "harness/cli/registry.h"
#include "harness/fixture/harbor_images.h"
#include "harness/fixture/load.h"
#include "harness/results/results.h"
#include "sandbox/base/fs.h"
#include "sandbox/base/log.h"
#include "sandbox/preparer/preparer.h"

namespace evalbox::cli {

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
  auto suite = harness::load_suite(path, make_registry().ids());
  if (!suite) {
    fmt::print(stderr, "{}\n", suite.error().message);
    return std::unexpected(suite.error().kind == error_kind::invalid_argument ||
                                   suite.error().kind == error_kind::not_found
                               ? exit_usage
                               : exit_internal);
  }
  if (auto problems = validate_candidates(*suite); !problems.empty()) {
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

std::vector<harness::config_error> validate_candidates(const harness::suite_spec& suite) {
  auto registry = make_registry();
  std::vector<harness::config_error> errors;
  for (const auto& c : suite.candidates) {
    // An adapter name the registry does not know was reported by load_suite, which checks
    // every candidate against these same names.
    const auto* a = registry.find(c.adapter);
    if (!a) continue;
    auto e = a->validate(c);
    errors.insert(errors.end(), e.begin(), e.end());
  }
  return errors;
}

result<suite_run> run_planned(const harness::suite_spec& suite,
                              const std::vector<harness::run_spec>& runs,
                              const suite_run_options& options) {
  auto registry = make_registry();
  sandbox::cancel_token cancel;
  suite_run out;
  bool tty = ::isatty(STDERR_FILENO) == 1 && !std::getenv("CI");

  harness::runner_options ro;
  ro.results_dir = options.results_dir;
  ro.concurrency = options.concurrency;
  ro.retries = options.retries;
  ro.resume = options.resume;
  ro.keep_workspaces = options.keep_workspaces;
  ro.keep_workspace_bytes = options.keep_workspace_bytes;
  if (options.interactive)
    ro.interactive = [&options, &cancel](const sandbox::prepared_session& s,
                                         sandbox::launch_options o) {
      return options.interactive(s, std::move(o), cancel);
    };
  ro.interactive_grader = options.interactive_grader;
  ro.workspace_override = options.workspace_override;
  ro.sandbox = sandbox::default_preparer_options();
  if (const char* home = std::getenv("HOME"); home && *home && std::string_view(home) != "/")
    ro.protected_roots.push_back(home);
  ro.cancel = &cancel;
  if (!options.quiet) {
    ro.on_notice = [](const std::string& line) { fmt::print(stderr, "evalbox: {}\n", line); };
    ro.on_progress = [tty](const harness::progress& p) {
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
  {
    // A home directory that holds the results or fixtures cannot be protected wholesale.
    auto& roots = ro.protected_roots;
    roots.erase(std::remove_if(roots.begin(), roots.end(),
                               [&](const std::filesystem::path& r) {
                                 if (is_within(normalize(options.results_dir), r)) return true;
                                 if (!options.workspace_override.empty() &&
                                     is_within(normalize(options.workspace_override), r))
                                   return true;
                                 for (const auto& f : suite.fixtures)
                                   if (is_within(f.dir, r)) return true;
                                 return is_within(suite.file, r);
                               }),
                roots.end());
  }
  signal_watch watch(cancel);
  auto totals = harness::run_suite(suite, runs, registry, ro);
  out.signal = watch.signal();
  // Stopped before any run (while an image was imported): the signal is the outcome.
  if (!totals && out.signal && totals.error().kind == error_kind::cancelled) return out;
  if (!totals) return std::unexpected(totals.error());
  out.totals = *totals;
  // One pass over results.jsonl indexes the runs for the reports and notes how the planned
  // runs ended; the reports then read back one record at a time.
  std::vector<std::string_view> planned;  // sorted; views of the run ids in `runs`
  planned.reserve(runs.size());
  for (const auto& r : runs) planned.push_back(r.run_id);
  std::sort(planned.begin(), planned.end());
  std::vector<bool> recorded(planned.size(), false);
  auto note = [&](const json& r) -> status {
    auto id = r.find("run_id");
    if (id == r.end() || !id->is_string()) return {};
    auto at = std::lower_bound(planned.begin(), planned.end(),
                               std::string_view(id->get_ref<const std::string&>()));
    if (at == planned.end() || *at != id->get_ref<const std::string&>()) return {};
    recorded[static_cast<size_t>(at - planned.begin())] = true;
    static const json none;
    const json& exec = r.contains("execution") ? r["execution"] : none;
    const json& grading = r.contains("grading") ? r["grading"] : none;
    if (exec.is_object() && exec.value("status", "") == "error")
      out.planned.execution_error = true;
    else if (grading.is_object() && grading.value("status", "") == "error")
      out.planned.grader_error = true;
    else if (r.value("verdict", "") != "passed")
      out.planned.task_failed = true;
    return {};
  };
  auto index =
      EB_TRY(harness::run_index::of_results(harness::results_dir(options.results_dir), note));
  // An interrupted run's reports say how many of its planned runs have no record yet.
  auto s = harness::summarize_runs(index, suite.baseline);
  if (s) {
    auto missing = static_cast<uint64_t>(std::count(recorded.begin(), recorded.end(), false));
    if (missing > 0) s->missing = harness::stats::missing_runs{planned.size(), missing};
    if (auto w = harness::write_reports(options.results_dir, *s, index, suite.name); !w)
      s = std::unexpected(std::move(w).error());
  }
  if (!s)
    log::warn("reports: {}", s.error().message);
  else
    out.summary = std::move(*s);
  return out;
}

}  // namespace evalbox::cli
