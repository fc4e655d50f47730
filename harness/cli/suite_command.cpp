// Running a planned suite from the command line (see session.h).
#include "harness/cli/suite_command.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <set>
#include <thread>

#include <CLI/CLI.hpp>

#include "base/fs.h"
#include "base/log.h"
#include "base/units.h"
#include "harness/cli/commands.h"
#include "harness/cli/image_store.h"
#include "harness/cli/registry.h"
#include "harness/fixture/harbor_images.h"
#include "harness/fixture/load.h"
#include "harness/runner/caches.h"
#include "harness/runner/runner.h"
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

void add_image_options(CLI::App* cmd, image_args& a) {
  cmd->add_option("--image", a.images,
                  "REF=SOURCE: the image for a Harbor task's docker_image REF (repeatable; over "
                  "the suite's images:), e.g. org/task:1.0=docker-archive:task.tar "
                  "(docs/harbor.md)");
  cmd->add_option("--pull", a.pull,
                  "when registry images (docker://, a Harbor task's docker_image) are pulled: "
                  "missing (the image store's copy when it has one), always (ask the registry "
                  "what the tag names now), never (the store only)")
      ->check(CLI::IsMember({"missing", "always", "never"}));
  cmd->add_flag("--force-build", a.force_build,
                "Harbor tasks with environment/Dockerfile: build it even when the task names a "
                "docker_image");
  cmd->add_option("--images-lock", a.images_lock,
                  "an images.lock (evalbox.images-lock.v1, written into every results "
                  "directory): use its digest for each registry reference it names, so that "
                  "another machine or shard runs on exactly those images");
}

int resolve_suite_images(harness::suite_spec& suite, image_args& a) {
  auto policy = sandbox::image::parse_pull_policy(a.pull);
  if (!policy) {
    fmt::print(stderr, "{}\n", policy.error().message);
    return exit_usage;
  }
  auto started = harness::start_registry_pins(a.force_build, a.images_lock);
  if (!started) {
    fmt::print(stderr, "{}\n", started.error().message);
    return exit_usage;
  }
  harness::registry_pins pins = std::move(*started);
  sandbox::preparer_options po = sandbox::default_preparer_options();
  if (auto settings = cli_registry_settings()) po.registry = std::move(*settings);
  sandbox::preparer prep(po);
  // Ctrl-C during a pull stops it at its next block, keeping no partial layer.
  sandbox::cancel_token cancel;
  signal_watch watch(cancel);
  pins.pin = pin_with(prep, *policy, &cancel.requested);
  auto errors = harness::resolve_suite_images(suite, a.images, po.state_root, say_progress, &pins);
  a.pinned = pins.pinned;
  if (watch.signal() != 0) return harness::exit_status_of_signal(watch.signal());
  if (!errors) {
    fmt::print(stderr, "{}\n", errors.error().message);
    return exit_usage;
  }
  if (errors->empty()) return exit_ok;
  fmt::print(stderr, "{}\n", harness::join_messages(*errors));
  return exit_usage;
}

std::function<result<std::string>(const std::string&)> pin_with(sandbox::preparer& prep,
                                                                sandbox::image::pull_policy policy,
                                                                const std::atomic<bool>* cancel,
                                                                bool check_only) {
  return [&prep, policy, cancel, check_only](const std::string& reference) -> result<std::string> {
    auto img = prep.resolve_image(reference, {}, cancel, say_progress, policy);
    if (!img && check_only && img.error().kind == error_kind::not_found)
      return prep.registry_digest(reference);
    if (!img) return std::unexpected(std::move(img).error());
    if (img->pulled)
      say_progress(fmt::format("image {}: {} ({})", reference, img->reference_digest,
                               img->blob_bytes > 0 ? format_bytes(img->blob_bytes) + " downloaded"
                                                   : std::string("every layer was in the store")));
    if (img->pinned.empty())
      return make_error(error_kind::internal, "image {}: no digest recorded", reference);
    return img->pinned;
  };
}

std::map<std::string, std::string> pin_for_elsewhere(const harness::suite_spec& suite) {
  sandbox::preparer_options po = sandbox::default_preparer_options();
  if (auto settings = cli_registry_settings()) po.registry = std::move(*settings);
  sandbox::preparer prep(po);
  harness::registry_pins pins;
  pins.pin = pin_with(prep, sandbox::image::pull_policy::never, nullptr, true);
  std::vector<harness::fixture_spec> fixtures;
  for (const auto& f : suite.fixtures) {
    if (!f.environment) continue;
    harness::fixture_spec copy = f;
    auto& env = *copy.environment;
    if (env.image_ref.empty() && !env.registry_ref.empty() &&
        !harness::lookup_image(suite.images, env.registry_ref))
      env.image_ref = "docker://" + env.registry_ref;
    if (env.image_ref.starts_with("docker://")) fixtures.push_back(std::move(copy));
  }
  for (const auto& e : harness::pin_registry_images(fixtures, pins))
    say_progress(fmt::format("{} (left to each machine to resolve)", e.what));
  return pins.pinned;
}

void record_images_lock(const std::filesystem::path& results_dir,
                        const std::map<std::string, std::string>& pinned) {
  if (pinned.empty()) return;
  if (auto st = harness::merge_images_lock(results_dir / "images.lock", pinned); !st)
    log::warn("{}: {}", (results_dir / "images.lock").string(), st.error().message);
}

// Says which runs were left as they were, and why.
void say_regrade_leftovers(const harness::run_totals& t, const std::filesystem::path& results) {
  if (t.not_run > 0)
    fmt::print(stderr,
               "evalbox: {} planned run(s) are not in {} yet (evalbox run records them; "
               "regrade only grades recorded runs)\n",
               t.not_run, results.string());
  if (!t.stale.empty()) {
    fmt::print(stderr,
               "evalbox: {} run(s) were graded by other checks but kept no final state (recorded "
               "before evalbox kept one, with --final-state-size 0, or over it): their verdicts "
               "stay the old grading's; run them again to grade them anew (evalbox run "
               "--no-resume). Their ids:",
               t.stale.size());
    size_t shown = 0;
    for (const auto& id : t.stale) {
      if (++shown > 20) {
        fmt::print(stderr, " …");
        break;
      }
      fmt::print(stderr, " {}", id);
    }
    fmt::print(stderr, "\n");
  }
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

std::expected<harness::suite_spec, int> one_run_suite(const std::string& dir,
                                                      const std::string& suite_file,
                                                      const std::string& candidate,
                                                      const std::string& default_id,
                                                      image_args& images, std::string_view cmd) {
  if (!candidate.empty() && suite_file.empty()) {
    fmt::print(stderr, "evalbox {}: --candidate {} needs --suite FILE (where it is)\n", cmd,
               candidate);
    return std::unexpected(exit_usage);
  }
  auto loaded = load_parent_suite(suite_file);
  if (!loaded) return std::unexpected(loaded.error());
  const std::optional<harness::suite_spec>& parent = *loaded;
  std::string name(cmd);  // "fixture shell" names the suite fixture-shell
  std::replace(name.begin(), name.end(), ' ', '-');
  auto suite = harness::suite_of_fixtures(name, {dir}, parent ? &*parent : nullptr);
  if (!suite) {
    fmt::print(stderr, "{}\n", suite.error().message);
    return std::unexpected(exit_usage);
  }
  if (int rc = resolve_suite_images(*suite, images); rc != exit_ok) return std::unexpected(rc);
  harness::candidate_spec c;
  if (!candidate.empty()) {
    auto it = std::find_if(parent->candidates.begin(), parent->candidates.end(),
                           [&](const harness::candidate_spec& x) { return x.id == candidate; });
    if (it == parent->candidates.end()) {
      std::string ids;
      for (const auto& x : parent->candidates) ids += (ids.empty() ? "" : ", ") + x.id;
      fmt::print(stderr, "evalbox {}: {} has no candidate '{}' (it has: {})\n", cmd, suite_file,
                 candidate, ids);
      return std::unexpected(exit_usage);
    }
    c = *it;
    // Checked as `evalbox validate` checks it (its argv, its settings): a run's plan assumes so.
    const auto registry = make_registry();
    if (const auto* a = registry.find(c.adapter)) {
      if (auto errors = a->validate(c); !errors.empty()) {
        fmt::print(stderr, "{}\n", harness::join_messages(errors));
        return std::unexpected(exit_usage);
      }
    }
    suite->credentials = parent->credentials;  // the candidate's logins, leased as in a run
    suite->shared_credentials = parent->shared_credentials;
  } else {
    // No candidate: an empty managed home, as the untouched-workspace run of `fixture test`.
    c.id = default_id;
    c.adapter = "noop";
    c.where = {suite->file.string(), 0, 0};
  }
  suite->candidates = {std::move(c)};
  suite->trials = 1;
  return std::move(*suite);
}

int warm_suite_caches(const harness::suite_spec& suite, const std::set<std::string>& only,
                      bool force, const std::filesystem::path& state_root) {
  sandbox::cancel_token cancel;
  signal_watch watch(cancel);
  harness::runner_options ro;
  ro.results_dir = suite.results_dir;
  ro.sandbox = sandbox::default_preparer_options();
  ro.sandbox.state_root = state_root;
  ro.cancel = &cancel;
  ro.on_notice = say_progress;
  auto caches = harness::warm_suite(suite, ro, only, force);
  if (!caches) {
    fmt::print(stderr, "evalbox cache warm: {}\n", caches.error().message);
    if (watch.signal()) return harness::exit_status_of_signal(watch.signal());
    return caches.error().kind == error_kind::not_found
               ? static_cast<int>(exit_usage)
               : static_cast<int>(exit_status_of_error(caches.error()));
  }
  std::set<std::string> shown;
  for (const auto& list : caches->per_fixture)
    for (const auto& c : list)
      if (shown.insert(c.stored.key).second)
        fmt::print("{}  {}  {}  {} files  {}\n", c.stored.key.substr(0, 12), c.name, c.target,
                   c.stored.files, format_bytes(c.stored.bytes));
  fmt::print(stderr, "evalbox: {} cache(s) ready, {} warmed now\n", shown.size(), caches->warmed);
  return exit_ok;
}

}  // namespace evalbox::harness::cli
