// The launcher: turns a prepared session and launch options into a launch plan, hands it to a
// warm helper or starts one (start_host_process: posix_spawn, the mask of the harness kept), waits
// (polling the cancel token) and reads the run record back. launch_in() is the list of steps.
#include "sandbox/launch/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "base/fs.h"
#include "base/json.h"
#include "base/log.h"
#include "base/unique_fd.h"
#include "sandbox/cgroup/cgroup.h"
#include "sandbox/launch/host_program.h"
#include "sandbox/protocol/launch_plan.h"
#include "sandbox/spec/system_paths.h"
#include "sandbox/sys/process.h"
#include "sandbox/sys/syscalls.h"

namespace evalbox::sandbox {
inline namespace launch {
namespace fs = std::filesystem;

fs::path helper_path(const launch_settings& settings) {
  if (!settings.helper.empty()) return settings.helper;
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
// posix_spawn (glibc's is a vfork): the caller is often multi-threaded (the runner's workers)
// and large; a fork would copy its page tables only for the child to exec at once (0.4 ms of
// each launch).
// `serve_fd` (a session's control socket, launch_options::serve_fd) goes to fd 4.
result<helper_process> spawn_helper(const fs::path& helper, const std::vector<std::string>& args,
                                    bool inherit_stdio, int serve_fd = -1) {
  auto [ours, theirs] = EB_TRY(helper_socket());
  std::vector<std::pair<int, int>> fds = {{theirs.get(), 3}};
  unique_fd serve;  // above the targets, so that no dup2 before it overwrites it
  if (serve_fd >= 0) {
    serve.reset(::fcntl(serve_fd, F_DUPFD_CLOEXEC, 10));
    if (!serve) return sys_error(errno, "fcntl(F_DUPFD_CLOEXEC)");
    fds.emplace_back(serve.get(), 4);
  }
  auto process = EB_TRY(start_host_process({helper, args, fds, !inherit_stdio}));
  return helper_process{std::move(process), std::move(ours), helper};
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
    if (!w || w->path != helper) return std::nullopt;  // another helper binary: killed
    if (has_exited(w->process)) {
      ++replaced;
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
        ++replaced;
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

  std::atomic<uint64_t> warm{0}, cold{0}, replaced{0};  // so far (warm_helper_stats)

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

// The cgroup options of the session's launch settings.
cgroup::host_options cgroup_options(const launch_settings& s) {
  return {.v2_root = s.cgroup_v2_root, .ahead = s.cgroup_ahead};
}

// The image the new root is stacked from, as the helper reads it.
launch_image image_of(const session_image& img) {
  launch_image pi;
  for (const auto& l : img.lowers) pi.lowers.push_back(l.string());
  pi.upper = img.upper.string();
  pi.work = img.work.string();
  pi.id = img.id;
  pi.reference = img.reference;
  pi.manifest_digest = img.manifest_digest;
  pi.layers = img.layers;
  return pi;
}

// The session's binds (its credential leases only `with_secrets`), then the caller's extra ones.
std::vector<bind_mount> mounts_of(const session_view& s, const launch_options& options) {
  std::vector<bind_mount> out;
  if (s.mounts)
    for (const auto& m : *s.mounts)
      if (options.with_secrets || !is_secret_mount(m)) out.push_back(m);
  for (const auto& m : options.extra_mounts) out.push_back(m);
  return out;
}

// The standard streams: the caller's own with inherit_stdio; else files, by default
// <base>.stdout and <base>.stderr, one merged file when only stdout is named.
void plan_streams(launch_plan& p, const launch_options& options, const std::string& base) {
  p.inherit_stdio = options.inherit_stdio;
  p.terminal = options.inherit_stdio && options.terminal;
  if (options.stdin_data) p.stdin_path = base + ".stdin";
  if (!options.inherit_stdio) {
    p.stdout_path = options.stdout_path.empty() ? base + ".stdout" : options.stdout_path.string();
    p.stderr_path = options.stderr_path.empty()
                        ? (options.stdout_path.empty() ? base + ".stderr" : p.stdout_path)
                        : options.stderr_path.string();
  }
}

// The launch's files, in the order the helper needs them: the launch directory, the empty mount
// point of the new root, the program's stdin and the plan itself.
status write_launch_files(const planned_launch& l, const launch_options& options) {
  EB_TRY(make_dirs(l.launch_dir, 0700));
  if (::mkdir(l.plan.root_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return sys_error(errno, "mkdir({})", l.plan.root_dir);
  }
  if (options.stdin_data) EB_TRY(write_file(l.plan.stdin_path, *options.stdin_data, 0600));
  EB_TRY(write_file(l.plan_path, pretty_json(l.plan.to_json()), 0600));
  return {};
}

// A helper started for a launch, and who makes the run's cgroup.
struct started_helper {
  helper_process helper;
  bool makes_cgroup = false;  // a warm helper on cgroup v1 makes it itself, ahead
};

// The helper: a warm one (launcher.h) handed the plan's line, else one started now with the plan
// on its command line (a launch that inherits the caller's stdio always starts its own).
result<started_helper> start_helper(const planned_launch& l, const launch_options& options,
                                    const launch_settings& settings) {
  const fs::path helper = helper_path(settings);
  const bool warm_wanted = !options.inherit_stdio && settings.warm_helper && options.serve_fd < 0;
  // On cgroup v1 a warm helper makes the cgroup itself, ahead (cgroup.h, "Cgroups made ahead").
  const bool helper_makes_cgroup = warm_wanted && cgroup::ahead_applies(cgroup_options(settings));
  std::optional<helper_process> h;
  if (warm_wanted) {
    h = warm_pool::get().take(helper);
    if (h && !send_launch(*h, l.plan_path, l.record_path, helper_makes_cgroup)) h.reset();
  }
  if (h) {
    ++warm_pool::get().warm;
    return started_helper{std::move(*h), helper_makes_cgroup};
  }
  ++warm_pool::get().cold;
  if (warm_wanted) log::debug("launch {}: no warm helper ready, starting one", l.plan.label);
  std::vector<std::string> args = {"--plan",      l.plan_path,   "--record",
                                   l.record_path, "--cgroup-fd", "3"};
  if (options.serve_fd >= 0) {
    args.emplace_back("--control-fd");
    args.emplace_back("4");
  }
  auto spawned = spawn_helper(helper, args, options.inherit_stdio, options.serve_fd);
  if (!spawned) return std::unexpected(std::move(spawned.error()));
  return started_helper{std::move(*spawned), false};
}

// The run's cgroup, made here while the helper starts (its plan and compile: ~0.3 ms that would
// otherwise come one after the other) and handed over on the helper's fd 3 (docs/sandbox.md,
// "Order of steps"), or why none could be made, which the helper reports — unless the helper
// makes its own. Nothing follows on the socket, which is closed.
void hand_over_cgroup(started_helper& s, const launch_plan& p, const cgroup::host_options& host) {
  if (!s.makes_cgroup) {
    json msg;
    if (auto cg = cgroup::create_for_host(host, p.run_id, fmt::format("{}-{}", p.label, p.seq),
                                          {p.limits.memory_bytes, p.limits.pids})) {
      msg = {{"cgroup", (*cg)->describe()}};
      (*cg)->release();  // the helper's now (and the teardown's, should it die first)
    } else {
      msg = {{"error", cg.error().message}};
    }
    const std::string text = msg.dump();
    (void)!::send(s.helper.socket.get(), text.data(), text.size(), MSG_NOSIGNAL);
  }
  s.helper.socket.reset();
}

// Waits for the helper to exit — through a pidfd (a fixed sleep here added 12.5 ms to the
// average launch); the timeout only bounds how late a cancel is noticed, and a cancel becomes
// SIGTERM — then reads the record it wrote.
result<run_record> await_record(helper_process& h, const planned_launch& l,
                                const cancel_token* cancel) {
  while (!has_exited(h.process)) {
    if (cancel && cancel->requested.load()) {
      // The helper kills the run, tears down and records outcome `cancelled`. Sent again at
      // every wake-up until it exits: a warm helper ignores SIGTERM until it has read its plan
      // (main.cpp), and a second one changes nothing.
      (void)h.process.signal(SIGTERM);
    }
    if (h.process.pidfd() >= 0) {
      pollfd pfd{h.process.pidfd(), POLLIN, 0};
      ::poll(&pfd, 1, 25);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
  }
  int wait_status = 0;
  (void)h.process.reap(&wait_status, nullptr);
  const int exit_code = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1;
  ::rmdir(l.plan.root_dir.c_str());
  auto j = read_json_file(l.record_path);
  if (!j) {
    return make_error(error_kind::internal, "{} exited with code {} and wrote no record: {}",
                      h.path.string(), exit_code, j.error().message);
  }
  auto rec = run_record::from_json(*j);
  if (!rec)
    return make_error(error_kind::internal, "{} wrote a record evalbox cannot read ({}): {}",
                      h.path.string(), l.record_path, rec.error().message);
  return std::move(*rec);
}

}  // namespace

session_view view_of(const prepared_session& session) {
  session_view v;
  v.request = &session.request();
  v.sandbox_uid = session.sandbox_uid();
  v.sandbox_gid = session.sandbox_gid();
  v.launch_dir = session.launch_dir();
  v.workspace_dir = session.workspace_dir();
  v.workspace_target = session.workspace_target();
  v.home_dir = session.home_dir();
  v.image = session.image();
  v.mounts = &session.mounts();
  v.disk_quota_enforced = session.disk_quota_enforced();
  v.quota_dirs = &session.quota_dirs();
  v.binding_digest = session.binding_digest();
  return v;
}

planned_launch plan_launch(const session_view& session, const launch_options& options, int seq) {
  const session_request& req = *session.request;
  planned_launch l;
  launch_plan& p = l.plan;
  p.run_id = req.run_id;
  p.label = options.label;
  p.seq = seq;
  l.launch_dir = session.launch_dir;
  const std::string base = (session.launch_dir / fmt::format("{}-{}", p.label, p.seq)).string();
  l.plan_path = base + ".plan.json";
  l.record_path = base + ".record.json";
  // The root and what is bound into it, as the session's ids own them.
  p.host_uid = session.sandbox_uid;
  p.host_gid = session.sandbox_gid;
  p.root_dir = base + ".root";
  p.workspace_dir = session.workspace_dir.string();
  p.workspace_target = session.workspace_target.string();
  if (session.image && !options.host_root) {
    p.image = image_of(*session.image);
    if (!options.root_upper.empty()) {
      // A session's root: its frozen layers and the session's own upper (the setup's writes)
      // under the live upper.
      std::vector<std::string> lowers;
      for (const auto& d : options.root_layers) lowers.push_back(d.string());
      lowers.push_back(p.image->upper);
      lowers.insert(lowers.end(), p.image->lowers.begin(), p.image->lowers.end());
      p.image->lowers = std::move(lowers);
      p.image->upper = options.root_upper.string();
      p.image->work = options.root_work.string();
    }
  }
  p.workspace_overlay = options.workspace_overlay;
  p.home_overlay = options.home_overlay;
  p.home_dir = session.home_dir.string();
  p.mounts = mounts_of(session, options);
  // The program and its fences: the request's unless the launch overrides them.
  p.serve = options.serve_fd >= 0;
  if (!p.serve) p.argv = options.argv.empty() ? req.argv : options.argv;
  p.env = options.env ? *options.env : req.env;
  p.cwd = options.cwd.empty() ? p.workspace_target : options.cwd.string();
  p.limits = options.limits_override ? *options.limits_override : req.limits;
  p.network = options.network_override ? *options.network_override : req.network;
  p.landlock = req.landlock;
  p.disk_quota = session.disk_quota_enforced;
  if (session.quota_dirs)
    for (const auto& d : *session.quota_dirs) p.quota_dirs.push_back(d.string());
  p.tmp_bytes =
      std::min<uint64_t>(p.limits.disk_bytes ? p.limits.disk_bytes : (1ull << 30), 1ull << 30);
  plan_streams(p, options, base);
  p.binding_digest = session.binding_digest;
  return l;
}

std::optional<pid_t> wait_for_warm_helper(const launch_settings& settings,
                                          std::chrono::milliseconds timeout) {
  if (!settings.warm_helper) return std::nullopt;
  return warm_pool::get().wait_ready(helper_path(settings), timeout);
}

warm_helper_counts warm_helper_stats() {
  const warm_pool& p = warm_pool::get();
  return {p.warm.load(), p.cold.load(), p.replaced.load()};
}

// The steps of a launch, in order. The settings (which helper, warm or cold, where cgroups go)
// are the session's, read from the environment at the edge.
result<run_record> launch_in(const prepared_session& session, const launch_options& options,
                             const cancel_token* cancel) {
  const launch_settings& settings = session.options().launch;
  const planned_launch l = plan_launch(view_of(session), options, ++next_seq);
  EB_TRY(write_launch_files(l, options));
  started_helper started = EB_TRY(start_helper(l, options, settings));
  hand_over_cgroup(started, l.plan, cgroup_options(settings));
  return await_record(started.helper, l, cancel);
}

}  // namespace launch
}  // namespace evalbox::sandbox
