// The launcher: turns a prepared session and launch options into a launch plan, hands it to a
// warm helper or runs one with Boost.Process (this is the only file that includes it), waits
// (polling the cancel token) and reads the run record back.
#include "sandbox/launch/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

// Boost.Process compiles its vfork launcher only under an old _POSIX_C_SOURCE; glibc has vfork.
#define BOOST_POSIX_HAS_VFORK 1
#include <boost/process.hpp>
#include <boost/process/posix.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "sandbox/base/fs.h"
#include "sandbox/base/json.h"
#include "sandbox/base/log.h"
#include "sandbox/base/unique_fd.h"
#include "sandbox/cgroup/cgroup.h"
#include "sandbox/launch/plan.h"
#include "sandbox/spec/system_paths.h"
#include "sandbox/sys/process.h"
#include "sandbox/sys/syscalls.h"

namespace evalbox::sandbox {
namespace fs = std::filesystem;
namespace bp = boost::process;

fs::path helper_path() {
  if (const char* env = std::getenv("EVALBOX_HELPER"); env && *env) return env;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path beside = self.parent_path() / "evalbox-sandbox";
    if (fs::exists(beside, ec)) return beside;
  }
  return EVALBOX_HELPER_BUILD_PATH;
}

namespace {

std::atomic<int> next_seq{0};

// Credential leases are the writable file binds inside the managed home.
bool is_secret_mount(const bind_mount& m) {
  return m.writable && m.is_file && is_within(m.target, sandbox_home);
}

// A started helper and the launcher's end of its socket (fd 3 in the helper): the cgroup
// hand-over, and for a warm helper first its plan.
struct helper_process {
  sys::owned_process process;
  unique_fd socket;
  fs::path path;  // the binary, to match the launch's helper_path()
};

// A connected pair: the launcher's end, and the helper's end above the standard streams, so
// that binding it to fd 3 in the child is a real dup2 (which clears close-on-exec). Both
// close-on-exec here, so no other thread's child inherits them (a warm helper notices that its
// launcher is gone by end of file). A socket rather than a pipe: sending to a helper that died
// raises no SIGPIPE.
result<std::pair<unique_fd, unique_fd>> helper_socket() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return sys_error(errno, "socketpair");
  unique_fd ours(sv[1]);
  unique_fd low(sv[0]);
  unique_fd theirs(::fcntl(low.get(), F_DUPFD_CLOEXEC, 10));
  if (!theirs) return sys_error(errno, "fcntl(F_DUPFD_CLOEXEC)");
  return std::pair{std::move(ours), std::move(theirs)};
}

// Spawns the helper with `args`, its socket on fd 3 and stdin /dev/null unless `inherit_stdio`.
// vfork: the caller is often multi-threaded (the runner's workers) and large; a fork would copy
// its page tables only for the child to exec at once (0.4 ms of each launch).
result<helper_process> spawn_helper(const fs::path& helper, const std::vector<std::string>& args,
                                    bool inherit_stdio) {
  auto [ours, theirs] = EB_TRY(helper_socket());
  try {
    std::error_code ec;
    const auto sock = bp::posix::fd.bind(3, theirs.get());
    bp::child c = inherit_stdio
                      ? bp::child(helper.string(), bp::args(args), sock, bp::posix::use_vfork, ec)
                      : bp::child(helper.string(), bp::args(args), sock, bp::std_in < bp::null,
                                  bp::posix::use_vfork, ec);
    if (ec) return make_error(error_kind::io, "start {}: {}", helper.string(), ec.message());
    // From here the owned_process waits for it, kills it on every early return and reaps it.
    c.detach();
    const pid_t pid = c.id();
    return helper_process{sys::owned_process(pid, unique_fd(sys::pidfd_open(pid, 0))),
                          std::move(ours), helper};
  } catch (const std::exception& e) {
    return make_error(error_kind::io, "start {}: {}", helper.string(), e.what());
  }
}

// Whether the helper has exited (and waits to be reaped), without waiting.
bool has_exited(const sys::owned_process& p) {
  if (p.pidfd() < 0) {  // a kernel without pidfds
    siginfo_t si{};
    return ::waitid(P_PID, static_cast<id_t>(p.pid()), &si, WEXITED | WNOHANG | WNOWAIT) != 0 ||
           si.si_pid == p.pid();
  }
  pollfd pfd{p.pidfd(), POLLIN, 0};
  return ::poll(&pfd, 1, 0) == 1;
}

// The one warm helper of the process, and the thread that starts it (launcher.h). Created at the
// first launch and never destroyed: the thread lives until the process exits, and with it ends
// every warm helper (their parent-death signal) — no destructor at exit to race a launch.
class warm_pool {
 public:
  // The process's pool. A child made by fork() has none of its parent's threads: it sees its
  // parent's pool as not its own (owner_) and launches cold, never touching that pool's lock.
  static warm_pool& get() {
    static warm_pool* const pool = new warm_pool;
    return *pool;
  }

  // The warm helper, if one of `helper` is waiting and alive; in any case the thread starts
  // the next one. Nothing: the launch starts its own.
  std::optional<helper_process> take(const fs::path& helper) {
    if (::getpid() != owner_) return std::nullopt;
    std::optional<helper_process> w;
    {
      std::lock_guard lock(m_);
      if (!started_) {
        std::thread([this] { keep_one(); }).detach();
        started_ = true;
      }
      path_ = helper;
      failed_ = false;
      w.swap(ready_);
      cv_.notify_all();
    }
    if (!w || w->path != helper) return std::nullopt;  // a changed EVALBOX_HELPER: killed
    if (has_exited(w->process)) {
      ++replaced_;
      return std::nullopt;  // reaped by its owned_process; the thread starts another
    }
    return w;
  }

  std::optional<pid_t> wait_ready(const fs::path& helper, std::chrono::milliseconds timeout) {
    if (::getpid() != owner_) return std::nullopt;
    std::unique_lock lock(m_);
    if (!started_) {
      std::thread([this] { keep_one(); }).detach();
      started_ = true;
    }
    if (path_ != helper) {
      path_ = helper;
      ready_.reset();
    }
    failed_ = false;
    cv_.notify_all();
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (ready_ && has_exited(ready_->process)) {
        ++replaced_;
        ready_.reset();
        cv_.notify_all();
      }
      if (ready_) return ready_->process.pid();
      if (failed_ || cv_.wait_until(lock, deadline) == std::cv_status::timeout) {
        if (ready_ && !has_exited(ready_->process)) return ready_->process.pid();
        return std::nullopt;
      }
    }
  }

  std::atomic<uint64_t> warm_{0}, cold_{0}, replaced_{0};

 private:
  warm_pool() = default;

  // The thread: whenever no helper is waiting, start one. It blocks every signal, so that a
  // process-directed signal (the CLI waits for SIGINT on a thread of its own) never lands here;
  // the helper sets its own mask.
  void keep_one() {
    sigset_t all;
    sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, nullptr);
    std::unique_lock lock(m_);
    for (;;) {
      cv_.wait(lock, [&] { return !ready_ && !failed_; });
      const fs::path helper = path_;
      lock.unlock();
      auto w = spawn_helper(helper, {"--warm-fd", "3"}, /*inherit_stdio=*/false);
      lock.lock();
      if (w && helper == path_) {
        ready_ = std::move(*w);
      } else if (!w) {
        // Retried at the next launch; meanwhile launches start cold and report the error.
        failed_ = true;
      }
      cv_.notify_all();
    }
  }

  const pid_t owner_ = ::getpid();
  std::mutex m_;
  std::condition_variable cv_;
  std::optional<helper_process> ready_;
  fs::path path_;         // the helper binary to keep warm: the last launch's
  bool started_ = false;  // the thread runs
  bool failed_ = false;   // the last start failed: wait for a launch before trying again
};

// Hands the plan to a warm helper: one line, then it runs it. False when the helper cannot
// receive it (it died since take()): it got nothing, and the launch goes cold.
bool send_launch(helper_process& w, const std::string& plan_path, const std::string& record_path,
                 bool helper_makes_cgroup) {
  json j{{"plan", plan_path}, {"record", record_path}};
  if (helper_makes_cgroup) j["cgroup"] = "helper";
  const std::string line = j.dump() + "\n";
  const ssize_t n = ::send(w.socket.get(), line.data(), line.size(), MSG_NOSIGNAL);
  if (n == static_cast<ssize_t>(line.size())) return true;
  // A partial line is never run: the helper waits for its end, which never comes once its
  // socket is closed (it exits at end of file) and the owned_process kills it.
  return false;
}

}  // namespace

bool warm_helper_enabled() {
  const char* v = std::getenv("EVALBOX_WARM_HELPER");
  return !(v && std::string_view(v) == "0");
}

std::optional<pid_t> wait_for_warm_helper(std::chrono::milliseconds timeout) {
  if (!warm_helper_enabled()) return std::nullopt;
  return warm_pool::get().wait_ready(helper_path(), timeout);
}

warm_helper_counts warm_helper_stats() {
  const warm_pool& p = warm_pool::get();
  return {p.warm_.load(), p.cold_.load(), p.replaced_.load()};
}

// Three steps, in order: fill the helper's plan from the session (one line a field), hand it to
// a warm helper or start one, the cgroup handed over on fd 3, then wait for it (a cancel becomes
// SIGTERM) and read its record. One function because the steps share the plan, the paths and the
// child; it is long mostly for the plan's fields.
result<run_record> launch(const prepared_session& session, const launch_options& options,
                          const cancel_token* cancel) {
  const session_request& req = session.request();
  launch_plan p;
  p.run_id = req.run_id;
  p.label = options.label;
  p.seq = ++next_seq;
  p.host_uid = session.sandbox_uid();
  p.host_gid = session.sandbox_gid();
  const fs::path dir = session.launch_dir();
  EB_TRY(make_dirs(dir, 0700));
  const std::string base = (dir / fmt::format("{}-{}", p.label, p.seq)).string();
  p.root_dir = base + ".root";
  if (::mkdir(p.root_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return sys_error(errno, "mkdir({})", p.root_dir);
  }
  p.workspace_dir = session.workspace_dir().string();
  p.workspace_target = session.workspace_target().string();
  if (const session_image* img = options.host_root ? nullptr : session.image()) {
    plan_image pi;
    for (const auto& l : img->lowers) pi.lowers.push_back(l.string());
    pi.upper = img->upper.string();
    pi.work = img->work.string();
    pi.id = img->id;
    pi.reference = img->reference;
    pi.manifest_digest = img->manifest_digest;
    pi.layers = img->layers;
    p.image = std::move(pi);
  }
  p.home_dir = session.home_dir().string();
  for (const auto& m : session.mounts()) {
    if (!options.with_secrets && is_secret_mount(m)) continue;
    p.mounts.push_back(m);
  }
  for (const auto& m : options.extra_mounts) p.mounts.push_back(m);
  p.argv = options.argv.empty() ? req.argv : options.argv;
  p.env = options.env ? *options.env : req.env;
  p.cwd = options.cwd.empty() ? p.workspace_target : options.cwd.string();
  p.limits = options.limits_override ? *options.limits_override : req.limits;
  p.network = options.network_override ? *options.network_override : req.network;
  p.landlock = req.landlock;
  p.disk_quota = session.disk_quota_enforced();
  p.tmp_bytes =
      std::min<uint64_t>(p.limits.disk_bytes ? p.limits.disk_bytes : (1ull << 30), 1ull << 30);
  p.inherit_stdio = options.inherit_stdio;
  p.terminal = options.inherit_stdio && options.terminal;
  if (options.stdin_data) {
    p.stdin_path = base + ".stdin";
    EB_TRY(write_file(p.stdin_path, *options.stdin_data, 0600));
  }
  if (!options.inherit_stdio) {
    p.stdout_path = options.stdout_path.empty() ? base + ".stdout" : options.stdout_path.string();
    p.stderr_path = options.stderr_path.empty()
                        ? (options.stdout_path.empty() ? base + ".stderr" : p.stdout_path)
                        : options.stderr_path.string();
  }
  p.binding_digest = session.binding_digest();
  const std::string plan_path = base + ".plan.json";
  const std::string record_path = base + ".record.json";
  EB_TRY(write_file(plan_path, pretty_json(p.to_json()), 0600));

  const fs::path helper = helper_path();
  // The helper: a warm one (launcher.h), else one started now. The run's cgroup is made here
  // meanwhile (the helper's plan and compile: ~0.3 ms that would otherwise come one after the
  // other), then handed over on the helper's fd 3 (docs/sandbox.md, "Order of steps") — except
  // for a warm helper on cgroup v1, which made its cgroups while it waited.
  std::optional<helper_process> h;
  const bool warm_wanted = !options.inherit_stdio && warm_helper_enabled();
  // On cgroup v1 a warm helper makes the cgroup itself, ahead (cgroup.h, "Cgroups made ahead").
  const bool helper_makes_cgroup = warm_wanted && cgroup::ahead_applies();
  if (warm_wanted) {
    h = warm_pool::get().take(helper);
    if (h && !send_launch(*h, plan_path, record_path, helper_makes_cgroup)) h.reset();
  }
  const bool warm = h.has_value();
  if (warm) {
    ++warm_pool::get().warm_;
  } else {
    ++warm_pool::get().cold_;
    if (warm_wanted) log::debug("launch {}: no warm helper ready, starting one", p.label);
    auto started =
        spawn_helper(helper, {"--plan", plan_path, "--record", record_path, "--cgroup-fd", "3"},
                     options.inherit_stdio);
    if (!started) return std::unexpected(std::move(started.error()));
    h = std::move(*started);
  }
  if (warm && helper_makes_cgroup) {
    h->socket.reset();  // the plan's line said so; nothing follows it
  } else {
    json msg;
    if (auto cg = cgroup::create_for_host(p.run_id, fmt::format("{}-{}", p.label, p.seq),
                                          {p.limits.memory_bytes, p.limits.pids})) {
      msg = {{"cgroup", (*cg)->describe()}};
      (*cg)->release();  // the helper's now (and the teardown's, should it die first)
    } else {
      msg = {{"error", cg.error().message}};
    }
    const std::string text = msg.dump();
    (void)!::send(h->socket.get(), text.data(), text.size(), MSG_NOSIGNAL);
    h->socket.reset();
  }
  // Wake on the helper's exit through a pidfd (a fixed sleep here added 12.5 ms to the average
  // launch); the timeout only bounds how late a cancel is noticed.
  while (!has_exited(h->process)) {
    if (cancel && cancel->requested.load()) {
      // The helper kills the run, tears down and records outcome `cancelled`. Sent again at
      // every wake-up until it exits: a warm helper ignores SIGTERM until it has read its plan
      // (main.cpp), and a second one changes nothing.
      (void)h->process.signal(SIGTERM);
    }
    if (h->process.pidfd() >= 0) {
      pollfd pfd{h->process.pidfd(), POLLIN, 0};
      ::poll(&pfd, 1, 25);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
  }
  int wait_status = 0;
  (void)h->process.reap(&wait_status, nullptr);
  const int exit_code = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1;
  ::rmdir(p.root_dir.c_str());
  auto j = read_json_file(record_path);
  if (!j) {
    return make_error(error_kind::internal, "{} exited with code {} and wrote no record: {}",
                      helper.string(), exit_code, j.error().message);
  }
  auto rec = run_record::from_json(*j);
  if (!rec)
    return make_error(error_kind::internal, "{} wrote a record evalbox cannot read ({}): {}",
                      helper.string(), record_path, rec.error().message);
  return std::move(*rec);
}

}  // namespace evalbox::sandbox
