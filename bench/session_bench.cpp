// Session benchmarks (docs/sessions.md; docs/performance.md, "Sessions"): sessions started
// with the real CLI (`evalbox session start --json`, a state root of the benchmark's own) and
// driven through the protocol (harness/session/client.h), and in process through
// sandbox/live (live_sandbox::exec), against the floors of the same machine:
//
//   session/exec_true/...        one exec of /bin/true: through the protocol on a connected
//                                client, in process, `evalbox session exec` (the CLI's own
//                                start included), `nsenter -t PID1 -a` into the same
//                                sandbox's namespaces (the floor an exec into a live sandbox
//                                can approach) and `podman exec` into a running busybox
//                                container (the peer). `…/against_nsenter` and
//                                `…/against_podman` alternate them in one process (order
//                                rotating each round) and report the median of the rounds'
//                                ratios: the figure that holds on a host whose speed drifts.
//   session/create/cli           `evalbox session start` until the session serves.
//   session/reset/100_files      reset to a snapshot after an exec changed 100 files (medium).
//   session/fork/32              fork ×32 from a snapshot of the medium workspace.
//   session/memory/10000_execs   the server's and pid 1's RSS before and after 10,000 execs.
//   session/concurrency/16x8     16 sessions, 8 connections each running execs at once.
//
// Root is needed (as for every sandbox benchmark); podman is optional: without it (or
// without the busybox test image) the podman benchmarks skip and say why. Every session is
// owned (`--owner`) by a child that dies with the benchmark, so its sessions end with it;
// Ctrl-C also stops the sessions' servers and removes the podman container before exiting.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/fs.h"
#include "base/json.h"
#include "base/json_get.h"
#include "base/unique_fd.h"
#include "bench/bench_support.h"
#include "harness/session/client.h"
#include "sandbox/live/live.h"
#include "sandbox/mount/mount.h"
#include "sandbox/sys/syscalls.h"

extern char** environ;

namespace evalbox::bench {
namespace {
namespace fs = std::filesystem;
using harness::sessions::client;
using clock_type = std::chrono::steady_clock;

double ms_since(clock_type::time_point t) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t).count();
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The figures of the last run of each benchmark, printed as a table at the end.
std::mutex g_figures_m;
std::map<std::string, double> g_figures;
void figure(const std::string& name, double value) {
  std::lock_guard lock(g_figures_m);
  g_figures[name] = value;
}

// ---- what to clean up, also from a signal handler ----

// Servers of the sessions started here (SIGTERM stops every session of a server), and the
// podman command that removes the container, prepared ahead so that a handler only forks and
// execs.
constexpr int max_servers = 256;
std::atomic<pid_t> g_servers[max_servers];
std::atomic<int> g_server_count{0};
std::vector<std::string> g_podman_rm;
std::vector<char*> g_podman_rm_argv;
std::atomic<bool> g_podman_rm_ready{false};
std::atomic<pid_t> g_owner{0};  // the sessions' owner (owner_pid)

// In a free slot (one a stopped server left, else a new one).
void remember_server(pid_t pid) {
  const int n = std::min(g_server_count.load(), max_servers);
  for (int i = 0; i < n; ++i) {
    pid_t free_slot = 0;
    if (g_servers[i].compare_exchange_strong(free_slot, pid)) return;
  }
  const int i = g_server_count.fetch_add(1);
  if (i < max_servers) g_servers[i].store(pid);
}

void forget_server(pid_t pid) {
  const int n = std::min(g_server_count.load(), max_servers);
  for (int i = 0; i < n; ++i)
    if (g_servers[i].load() == pid) g_servers[i].store(0);
}

// Directories to remove on an interrupt (a shell command made ahead: the handler only forks and
// execs it): their mounts lazily unmounted, then the trees removed.
char g_cleanup_sh[8192];
std::atomic<bool> g_cleanup_ready{false};

void remove_on_interrupt(const fs::path& dir) {
  static std::mutex m;
  static std::string dirs;
  std::lock_guard lock(m);
  dirs += fmt::format(" '{}'", dir.string());
  const std::string cmd = fmt::format(
      "for d in{}; do awk -v d=\"$d/\" 'index($5, d) == 1 {{print $5}}' /proc/self/mountinfo | "
      "sort -r | while read -r m; do umount -l \"$m\"; done; rm -rf \"$d\"; done",
      dirs);
  g_cleanup_ready.store(false);
  if (cmd.size() >= sizeof g_cleanup_sh) return;
  std::memcpy(g_cleanup_sh, cmd.c_str(), cmd.size() + 1);
  g_cleanup_ready.store(true);
}

// Runs argv (async-signal-safe: fork, execve, waitpid), its output discarded.
void run_in_handler(char* const* argv) {
  const pid_t p = ::fork();
  if (p == 0) {
    const int null = ::open("/dev/null", O_RDWR);
    ::dup2(null, 1);
    ::dup2(null, 2);
    ::execve(argv[0], argv, environ);
    ::_exit(127);
  }
  if (p > 0) ::waitpid(p, nullptr, 0);
}

// Ctrl-C (or SIGTERM): the sessions end (their owner killed, their servers asked to stop), the
// container is removed, and once the servers are gone the scratch directories are too.
extern "C" void on_interrupt(int sig) {
  if (const pid_t o = g_owner.load(); o > 0) ::kill(o, SIGKILL);
  const int n = std::min(g_server_count.load(), max_servers);
  for (int i = 0; i < n; ++i)
    if (const pid_t p = g_servers[i].load(); p > 0) ::kill(p, SIGTERM);
  // Our connections closed: a server waits for its idle connections to go before it exits
  // (the in-process live sandbox's pid 1 ends with its control socket too).
  ::close_range(3, ~0U, 0);
  if (g_podman_rm_ready.load()) run_in_handler(g_podman_rm_argv.data());
  // Each server's end (a pidfd is readable once it exited), up to 10 s in all.
  int budget_ms = 10000;
  for (int i = 0; i < n && budget_ms > 0; ++i) {
    const pid_t p = g_servers[i].load();
    const int fd = p > 0 ? sys::pidfd_open(p, 0) : -1;
    if (fd < 0) continue;
    pollfd pf{fd, POLLIN, 0};
    timespec t0{}, t1{};
    ::clock_gettime(CLOCK_MONOTONIC, &t0);
    (void)::poll(&pf, 1, budget_ms);
    ::clock_gettime(CLOCK_MONOTONIC, &t1);
    budget_ms -=
        static_cast<int>((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
    ::close(fd);
  }
  if (g_cleanup_ready.load()) {
    char sh[] = "/bin/sh", dash_c[] = "-c";
    char* argv[] = {sh, dash_c, g_cleanup_sh, nullptr};
    run_in_handler(argv);
  }
  ::_exit(128 + sig);
}

// The benchmarks' scratch root (bench_support.h), removed on an interrupt as well.
bench_env& env() {
  static bench_env e;
  static const bool registered = (remove_on_interrupt(e.dir()), true);
  (void)registered;
  return e;
}

// What the benchmarks made, undone at the end of main() in the reverse order: not from static
// destructors, which run after the sandbox library's own statics (a prepared session closed
// from one crashed in cgroup::run_cgroup_parents, reading host_layout()'s destroyed static).
std::vector<std::function<void()>>& teardowns() {
  static std::vector<std::function<void()>> v;
  return v;
}
void at_teardown(std::function<void()> f) { teardowns().push_back(std::move(f)); }
void teardown_all() {
  auto& v = teardowns();
  while (!v.empty()) {
    auto f = std::move(v.back());
    v.pop_back();
    f();
  }
}

// ---- processes ----

struct captured {
  int status = -1;
  std::string out, err;
};

// Runs argv (argv[0] absolute) and returns its stdout and stderr (stderr through a file, so
// that neither pipe fills while the other is read).
captured capture(const std::vector<std::string>& argv) {
  captured r;
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return r;
  unique_fd rd(p[0]), wr(p[1]);
  const fs::path err_path = env().dir() / fmt::format("capture-{}.err", ::getpid());
  unique_fd err(::open(err_path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  posix_spawn_file_actions_t fa;
  ::posix_spawn_file_actions_init(&fa);
  ::posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  ::posix_spawn_file_actions_adddup2(&fa, wr.get(), 1);
  if (err) ::posix_spawn_file_actions_adddup2(&fa, err.get(), 2);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  ::posix_spawn_file_actions_destroy(&fa);
  wr.reset();
  if (rc != 0) {
    r.err = fmt::format("{}: {}", argv[0], std::strerror(rc));
    return r;
  }
  char buf[65536];
  ssize_t n;
  while ((n = ::read(rd.get(), buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0) r.out.append(buf, static_cast<size_t>(n));
  ::waitpid(pid, &r.status, 0);
  r.err = read_file(err_path, 1 << 20).value_or("");
  std::error_code ec;
  fs::remove(err_path, ec);
  return r;
}

// Waits until `pid` (not necessarily a child) is gone.
bool wait_gone(pid_t pid, std::chrono::milliseconds timeout) {
  unique_fd fd(sys::pidfd_open(pid, 0));
  if (!fd) return errno == ESRCH;
  pollfd p{fd.get(), POLLIN, 0};
  return ::poll(&p, 1, static_cast<int>(timeout.count())) == 1;
}

std::optional<pid_t> parent_of(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/status", pid));
  for (std::string line; std::getline(in, line);)
    if (line.rfind("PPid:", 0) == 0) return static_cast<pid_t>(std::stol(line.substr(5)));
  return std::nullopt;
}

std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(name));
    if (parent_of(pid) == parent) out.push_back(pid);
  }
  return out;
}

// The last field of NSpid: the pid in the innermost pid namespace.
std::optional<pid_t> inner_pid(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/status", pid));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("NSpid:", 0) != 0) continue;
    const auto tab = line.find_last_of(" \t");
    if (line.find_first_of(" \t") == tab) return std::nullopt;  // one field: no namespace
    return static_cast<pid_t>(std::stol(line.substr(tab + 1)));
  }
  return std::nullopt;
}

// A session's pid 1 on the host: the child, in a pid namespace of its own, of the
// evalbox-sandbox helper that the session's server started.
std::optional<pid_t> sandbox_init_of(pid_t server) {
  for (pid_t helper : children_of(server))
    for (pid_t c : children_of(helper))
      if (inner_pid(c) == 1) return c;
  return std::nullopt;
}

uint64_t rss_kib(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/status", pid));
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6));
  return 0;
}

// ---- sessions started with the CLI ----

fs::path cli_state() { return env().dir() / "cli-state"; }

// The sessions' owner (`--owner`): a `sleep` child that dies with this process (its parent-death
// signal), so that every session started here ends when the benchmark does, however it ends,
// and at once when an interrupt kills it.
pid_t owner_pid() {
  static const pid_t pid = [] {
    const pid_t parent = ::getpid();
    const pid_t p = ::fork();
    if (p == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
      if (::getppid() != parent) ::_exit(0);
      const int null = ::open("/dev/null", O_RDWR);
      for (int fd : {0, 1, 2}) ::dup2(null, fd);
      ::execl("/bin/sleep", "sleep", "infinity", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    g_owner.store(p);
    return p;
  }();
  return pid;
}

struct cli_session {
  std::string id;
  fs::path socket;
  pid_t server = 0;
  double start_ms = 0;  // `evalbox session start` until it returned (the session serves)

  static result<cli_session> start(const fs::path& workspace) {
    const auto t0 = clock_type::now();
    auto r = capture({EVALBOX_BENCH_EVALBOX, "session", "start", "--workspace", workspace.string(),
                      "--json", "--ttl", "30m", "--owner", std::to_string(owner_pid()),
                      "--state-dir", cli_state().string()});
    const double ms = ms_since(t0);
    if (r.status != 0)
      return make_error(error_kind::io, "evalbox session start: {}",
                        r.err.empty() ? fmt::format("status {}", r.status) : r.err);
    auto j = EB_TRY(parse_json(r.out, "evalbox session start --json"));
    cli_session s;
    s.id = json_value_or(j, "id", std::string());
    s.socket = json_value_or(j, "socket", std::string());
    s.server = json_value_or(j, "server_pid", 0);
    s.start_ms = ms;
    if (s.id.empty() || s.socket.empty() || s.server <= 0)
      return make_error(error_kind::io, "evalbox session start --json said {}", r.out);
    remember_server(s.server);
    return s;
  }

  // Stops the session and waits for its server to exit (every fork of it stopped before).
  void stop() {
    if (server <= 0) return;
    if (auto c = client::connect(socket)) (void)c->call({{"op", "stop"}});
    if (!wait_gone(server, std::chrono::seconds(20))) ::kill(server, SIGTERM);
    (void)wait_gone(server, std::chrono::seconds(10));
    forget_server(server);
    server = 0;
  }
};

// Sessions shared by the benchmarks, stopped by teardown_all() at the end.
struct shared_sessions {
  std::map<std::string, result<cli_session>> by_name;
  void stop() {
    for (auto& [name, s] : by_name)
      if (s) s->stop();
  }
};

result<cli_session>& shared_session(const workspace_shape& shape) {
  (void)env();
  static shared_sessions all = [] {
    at_teardown([] { all.stop(); });
    return shared_sessions{};
  }();
  const std::string name(shape.name);
  if (auto it = all.by_name.find(name); it != all.by_name.end()) return it->second;
  auto ws = ensure_workspace(shape);
  if (!ws) return all.by_name.emplace(name, std::unexpected(ws.error())).first->second;
  return all.by_name.emplace(name, cli_session::start(*ws)).first->second;
}

// One exec of /bin/true on a connected client; its exit status checked.
status protocol_true(client& c) {
  auto r = c.exec({{"op", "exec"}, {"argv", json::array({"/bin/true"})}, {"stream", true}},
                  [](std::string_view, std::string_view) {});
  if (!r) return make_error(error_kind::io, "exec: {}: {}", r.error().kind, r.error().message);
  if (json_member(*r, "exit_code") != 0)
    return make_error(error_kind::io, "exec /bin/true: {}", r->dump());
  return {};
}

// A connection to the small session (the exec benchmarks' session).
struct exec_target {
  cli_session* session = nullptr;
  std::optional<client> conn;
  pid_t init = 0;  // its pid 1 on the host
  std::string error;
};

exec_target& target() {
  (void)env();
  static exec_target t = [] {
    exec_target x;
    auto& s = shared_session(small_workspace);
    if (!s) {
      x.error = s.error().message;
      return x;
    }
    x.session = &*s;
    auto c = client::connect(s->socket);
    if (!c) {
      x.error = c.error().message;
      return x;
    }
    x.conn.emplace(std::move(*c));
    if (auto p = sandbox_init_of(s->server)) x.init = *p;
    return x;
  }();
  // Closed before the session is stopped (registered after it): a server waits for its
  // connections to go before it exits.
  static const bool registered = (at_teardown([] { t.conn.reset(); }), true);
  (void)registered;
  return t;
}

// ---- the in-process live sandbox ----

struct live_target {
  std::optional<sandbox::prepared_session> prepared;
  std::unique_ptr<sandbox::live_sandbox> live;
  unique_fd null_fd;
  std::string error;
  void close() {
    if (live) (void)live->stop();
    live.reset();
    if (prepared) (void)prepared->close();
    prepared.reset();
  }
};

live_target& live() {
  (void)env();  // made first, so destroyed last: the prepared session is closed before it
  static live_target t;
  static std::once_flag once;
  std::call_once(once, [] {
    at_teardown([] { t.close(); });
    auto ws = ensure_workspace(small_workspace);
    if (!ws) {
      t.error = ws.error().message;
      return;
    }
    auto p = env().preparer().prepare(env().request(*ws, sandbox::workspace_strategy::auto_select));
    if (!p) {
      t.error = p.error().message;
      return;
    }
    t.prepared.emplace(std::move(*p));
    sandbox::launch_options lo;
    lo.label = "session";
    // Lives as long as a session does: no wall or CPU-time limit of a single run.
    sandbox::resource_limits limits = t.prepared->request().limits;
    limits.wall_ms = 3'600'000;
    limits.cpu_ms = 0;
    lo.limits_override = limits;
    auto l = sandbox::live_sandbox::start(*t.prepared, std::move(lo));
    if (!l) {
      t.error = l.error().message;
      return;
    }
    t.live = std::move(*l);
    t.null_fd.reset(::open("/dev/null", O_RDWR | O_CLOEXEC));
  });
  return t;
}

status live_true(live_target& t) {
  sandbox::exec_spec spec;
  spec.argv = {"/bin/true"};
  spec.stdin_fd = spec.stdout_fd = spec.stderr_fd = t.null_fd.get();
  auto h = t.live->exec(spec);
  if (!h) return std::unexpected(h.error());
  pollfd p{(*h)->done_fd(), POLLIN, 0};
  if (::poll(&p, 1, 20000) != 1) return make_error(error_kind::io, "the exec did not end");
  const auto st = (*h)->wait_status();
  if (!st || !WIFEXITED(*st) || WEXITSTATUS(*st) != 0)
    return make_error(error_kind::io, "/bin/true did not exit 0 in the live sandbox");
  return {};
}

// ---- the peers ----

const char* nsenter_path() { return "/usr/bin/nsenter"; }

std::vector<std::string> nsenter_argv(pid_t init) {
  // Every namespace of pid 1 (user, mount, pid, network, ipc, uts, cgroup, time), its root
  // and its working directory.
  return {nsenter_path(), "-t", std::to_string(init), "-a", "/bin/true"};
}

// A running busybox container (the test image, loaded into a containers-storage of this
// process's own) for `podman exec`; removed at exit.
struct podman_target {
  std::vector<std::string> base;  // podman --root … --runroot … [--runtime runc]
  std::string container;
  fs::path root, runroot;
  std::string error;
  void remove() {
    if (!container.empty()) {
      auto rm = base;
      rm.insert(rm.end(), {"rm", "-f", "-t", "0", container});
      (void)capture(rm);
      g_podman_rm_ready.store(false);
    }
    for (const auto& dir : {root, runroot}) {
      if (dir.empty()) continue;
      // containers-storage binds its overlay directory onto itself.
      (void)sandbox::mount::unmount_all_under(dir);
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
    container.clear();
    root.clear();
    runroot.clear();
  }
};

std::string first_line(std::string s) {
  if (const auto nl = s.find('\n'); nl != std::string::npos) s.resize(nl);
  return s;
}

podman_target& podman() {
  (void)env();
  static podman_target t;
  static std::once_flag once;
  std::call_once(once, [] {
    at_teardown([] { t.remove(); });
    const char* bin = "/usr/bin/podman";
    if (::access(bin, X_OK) != 0) {
      t.error = "no /usr/bin/podman (scripts/bootstrap --tests podman)";
      return;
    }
    auto dir = capture(
        {"/bin/sh", "-c", fmt::format("{}/tests/images/make-images busybox", EVALBOX_SOURCE_DIR)});
    const std::string images = first_line(dir.out);
    const fs::path archive = fs::path(images) / "busybox.docker.tar";
    if (dir.status != 0 || images.empty() || !fs::exists(archive)) {
      t.error = "the busybox test image is missing (tests/images/make-images busybox failed)";
      return;
    }
    // Short paths: podman's run root holds sockets.
    char root[] = "/tmp/evalbox-sb-pod-XXXXXX";
    char runroot[] = "/tmp/evalbox-sb-podrun-XXXXXX";
    if (!::mkdtemp(root) || !::mkdtemp(runroot)) {
      t.error = "mkdtemp failed";
      return;
    }
    t.root = root;
    t.runroot = runroot;
    remove_on_interrupt(t.root);
    remove_on_interrupt(t.runroot);
    t.base = {bin, "--root", root, "--runroot", runroot, "--storage-driver", "overlay"};
    // Debian's crun refuses a hybrid cgroup layout (shared/PERFORMANCE-NOTES.md): runc.
    if (::access("/usr/sbin/runc", X_OK) == 0) t.base.insert(t.base.end(), {"--runtime", "runc"});
    auto load = t.base;
    load.insert(load.end(), {"load", "-q", "-i", archive.string()});
    auto loaded = capture(load);
    const auto at = loaded.out.find("Loaded image: ");
    if (loaded.status != 0 || at == std::string::npos) {
      t.error = fmt::format("podman load: {}", first_line(loaded.err));
      return;
    }
    const std::string image = first_line(loaded.out.substr(at + 14));
    auto run = t.base;
    run.insert(run.end(), {"run", "-d", "--network", "none", "--ulimit", "nofile=1024:1024",
                           "--ulimit", "nproc=1000:1000", image, "sleep", "3600"});
    auto started = capture(run);
    if (started.status != 0) {
      t.error = fmt::format("podman run: {}", first_line(started.err));
      return;
    }
    t.container = first_line(started.out);
    g_podman_rm = t.base;
    g_podman_rm.insert(g_podman_rm.end(), {"rm", "-f", "-t", "0", t.container});
    for (auto& a : g_podman_rm) g_podman_rm_argv.push_back(a.data());
    g_podman_rm_argv.push_back(nullptr);
    g_podman_rm_ready.store(true);
  });
  return t;
}

std::vector<std::string> podman_exec_argv() {
  auto a = podman().base;
  a.insert(a.end(), {"exec", podman().container, "/bin/true"});
  return a;
}

status child_true(const std::vector<std::string>& argv) {
  const auto r = run_child(argv);
  if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0)
    return make_error(error_kind::io, "{} failed (status {})", argv[0], r.status);
  return {};
}

// ---- exec of /bin/true, one way per benchmark ----

void bm_fork_exec_true(benchmark::State& state) {
  for (auto _ : state) run_child({"/bin/true"});
}

void bm_exec_protocol(benchmark::State& state) {
  auto& t = target();
  if (!t.conn) return state.SkipWithError(t.error.c_str());
  for (auto _ : state)
    if (auto ok = protocol_true(*t.conn); !ok)
      return state.SkipWithError(ok.error().message.c_str());
}

void bm_exec_live(benchmark::State& state) {
  auto& t = live();
  if (!t.live) return state.SkipWithError(t.error.c_str());
  for (auto _ : state)
    if (auto ok = live_true(t); !ok) return state.SkipWithError(ok.error().message.c_str());
}

void bm_exec_cli(benchmark::State& state) {
  auto& t = target();
  if (!t.conn) return state.SkipWithError(t.error.c_str());
  const std::vector<std::string> argv = {EVALBOX_BENCH_EVALBOX, "session",   "exec", t.session->id,
                                         "--state-dir",         cli_state(), "--",   "/bin/true"};
  for (auto _ : state)
    if (auto ok = child_true(argv); !ok) return state.SkipWithError(ok.error().message.c_str());
}

void bm_exec_nsenter(benchmark::State& state) {
  auto& t = target();
  if (!t.conn) return state.SkipWithError(t.error.c_str());
  if (::access(nsenter_path(), X_OK) != 0) return state.SkipWithError("no /usr/bin/nsenter");
  if (!t.init) return state.SkipWithError("the session's pid 1 was not found under its server");
  const auto argv = nsenter_argv(t.init);
  for (auto _ : state)
    if (auto ok = child_true(argv); !ok) return state.SkipWithError(ok.error().message.c_str());
}

void bm_exec_podman(benchmark::State& state) {
  if (podman().container.empty()) return state.SkipWithError(podman().error.c_str());
  const auto argv = podman_exec_argv();
  for (auto _ : state)
    if (auto ok = child_true(argv); !ok) return state.SkipWithError(ok.error().message.c_str());
}

// ---- the same ways in rounds ----

struct way {
  std::string name;  // the counter: <name>_ms
  std::function<status()> run;
};

// Each iteration runs every way once, in an order that rotates from one iteration to the next;
// the iteration's time is the first way's. Counters: each way's median and the medians of the
// rounds' ratios named in `ratios` ({numerator, denominator}).
void run_rounds(benchmark::State& state, const std::vector<way>& ways,
                const std::vector<std::pair<int, int>>& ratios, const std::string& prefix) {
  std::vector<std::vector<double>> ms(ways.size());
  std::vector<std::vector<double>> r(ratios.size());
  size_t round = 0;
  for (auto _ : state) {
    std::vector<double> t(ways.size());
    for (size_t k = 0; k < ways.size(); ++k) {
      const size_t i = (k + round) % ways.size();
      const auto t0 = clock_type::now();
      if (auto ok = ways[i].run(); !ok)
        return state.SkipWithError(fmt::format("{}: {}", ways[i].name, ok.error().message).c_str());
      t[i] = ms_since(t0);
    }
    ++round;
    state.SetIterationTime(t[0] / 1000);
    for (size_t i = 0; i < ways.size(); ++i) ms[i].push_back(t[i]);
    for (size_t i = 0; i < ratios.size(); ++i)
      r[i].push_back(t[static_cast<size_t>(ratios[i].first)] /
                     t[static_cast<size_t>(ratios[i].second)]);
  }
  for (size_t i = 0; i < ways.size(); ++i) {
    state.counters[ways[i].name + "_ms"] = median_of(ms[i]);
    figure(prefix + ways[i].name + "_ms", median_of(ms[i]));
  }
  for (size_t i = 0; i < ratios.size(); ++i) {
    const std::string name = ways[static_cast<size_t>(ratios[i].first)].name + "_per_" +
                             ways[static_cast<size_t>(ratios[i].second)].name;
    state.counters[name] = median_of(r[i]);
    figure(prefix + name, median_of(r[i]));
  }
}

// Through the protocol, in process and with nsenter, in rounds.
void bm_exec_against_nsenter(benchmark::State& state) {
  auto& t = target();
  if (!t.conn) return state.SkipWithError(t.error.c_str());
  if (::access(nsenter_path(), X_OK) != 0) return state.SkipWithError("no /usr/bin/nsenter");
  if (!t.init) return state.SkipWithError("the session's pid 1 was not found under its server");
  std::vector<way> ways = {{"protocol", [&] { return protocol_true(*t.conn); }},
                           {"nsenter", [argv = nsenter_argv(t.init)] { return child_true(argv); }}};
  std::vector<std::pair<int, int>> ratios = {{0, 1}};
  if (auto& l = live(); l.live) {
    ways.push_back({"in_process", [&l] { return live_true(l); }});
    ratios.push_back({2, 1});
  }
  run_rounds(state, ways, ratios, "against_nsenter/");
}

// Through the protocol and `podman exec`, in rounds.
void bm_exec_against_podman(benchmark::State& state) {
  auto& t = target();
  if (!t.conn) return state.SkipWithError(t.error.c_str());
  if (podman().container.empty()) return state.SkipWithError(podman().error.c_str());
  run_rounds(state,
             {{"protocol", [&] { return protocol_true(*t.conn); }},
              {"podman_exec", [argv = podman_exec_argv()] { return child_true(argv); }}},
             {{1, 0}}, "against_podman/");
}

// ---- create, reset, fork ----

void bm_create(benchmark::State& state) {
  auto ws = ensure_workspace(small_workspace);
  if (!ws) return state.SkipWithError(ws.error().message.c_str());
  for (auto _ : state) {
    auto s = cli_session::start(*ws);
    if (!s) return state.SkipWithError(s.error().message.c_str());
    state.SetIterationTime(s->start_ms / 1000);
    s->stop();
  }
}

// Exits 0 or says why not; its stdout when it succeeded.
result<std::string> run_sh(client& c, const std::string& script) {
  std::string out;
  auto r =
      c.exec({{"op", "exec"}, {"argv", json::array({"/bin/sh", "-c", script})}, {"stream", true}},
             [&out](std::string_view stream, std::string_view bytes) {
               if (stream == "stdout") out.append(bytes);
             });
  if (!r) return make_error(error_kind::io, "exec: {}", r.error().message);
  if (json_member(*r, "exit_code") != 0)
    return make_error(error_kind::io, "`{}` failed: {}", script, r->dump());
  return out;
}

// 100 files of the workspace (not under .git), one line appended to each.
constexpr const char* change_100 =
    "find /workspace -type f ! -path '*/.git/*' | sort | head -n 100 | "
    "while read -r f; do echo changed >> \"$f\"; done";
constexpr const char* digest_100 =
    "find /workspace -type f ! -path '*/.git/*' | sort | head -n 100 | xargs cat | md5sum";

// The medium session with a snapshot "base" (taken once: the first snapshot of a session also
// copies its own trees into the family's store).
struct medium_target {
  cli_session* session = nullptr;
  std::optional<client> conn;
  std::string error;
  double snapshot_ms = 0;
};

medium_target& medium() {
  (void)env();
  static medium_target t = [] {
    medium_target x;
    auto& s = shared_session(medium_workspace);
    if (!s) {
      x.error = s.error().message;
      return x;
    }
    x.session = &*s;
    auto c = client::connect(s->socket);
    if (!c) {
      x.error = c.error().message;
      return x;
    }
    const auto t0 = clock_type::now();
    auto snap = c->call({{"op", "snapshot"}, {"name", "base"}});
    if (!snap) {
      x.error = fmt::format("snapshot: {}", snap.error().message);
      return x;
    }
    x.snapshot_ms = ms_since(t0);
    x.conn.emplace(std::move(*c));
    return x;
  }();
  static const bool registered = (at_teardown([] { t.conn.reset(); }), true);
  (void)registered;
  return t;
}

void bm_reset(benchmark::State& state) {
  auto& t = medium();
  if (!t.conn) return state.SkipWithError(t.error.c_str());
  client& c = *t.conn;
  // Once: the change shows, and the reset takes it back.
  auto before = run_sh(c, digest_100);
  auto changed = before ? run_sh(c, change_100) : before;
  auto during = changed ? run_sh(c, digest_100) : changed;
  if (!during) return state.SkipWithError(during.error().message.c_str());
  if (auto r = c.call({{"op", "reset"}, {"to", "base"}}); !r)
    return state.SkipWithError(fmt::format("reset: {}", r.error().message).c_str());
  auto after = run_sh(c, digest_100);
  if (!after) return state.SkipWithError(after.error().message.c_str());
  if (*during == *before || *after != *before)
    return state.SkipWithError("the reset did not take the 100 changed files back");
  std::vector<double> ms, server_ms;
  for (auto _ : state) {
    if (auto ok = run_sh(c, change_100); !ok)
      return state.SkipWithError(ok.error().message.c_str());
    const auto t0 = clock_type::now();
    auto r = c.call({{"op", "reset"}, {"to", "base"}});
    const double took = ms_since(t0);
    if (!r) return state.SkipWithError(fmt::format("reset: {}", r.error().message).c_str());
    state.SetIterationTime(took / 1000);
    ms.push_back(took);
    server_ms.push_back(json_value_or(*r, "ms", 0.0));
  }
  state.counters["reset_ms"] = median_of(ms);
  state.counters["server_ms"] = median_of(server_ms);
  state.counters["snapshot_ms"] = t.snapshot_ms;
  figure("reset/100_files_ms", median_of(ms));
  figure("snapshot/first_ms", t.snapshot_ms);
}

void bm_fork(benchmark::State& state, int count) {
  auto& t = medium();
  if (!t.conn) return state.SkipWithError(t.error.c_str());
  client& c = *t.conn;
  std::vector<double> ms;
  for (auto _ : state) {
    const auto t0 = clock_type::now();
    auto r = c.call({{"op", "fork"}, {"from", "base"}, {"count", count}});
    const double took = ms_since(t0);
    if (!r) return state.SkipWithError(fmt::format("fork: {}", r.error().message).c_str());
    state.SetIterationTime(took / 1000);
    ms.push_back(took);
    // Untimed: every child serves (the first runs /bin/true), then all are stopped and gone.
    const json& kids = json_member(*r, "sessions");
    if (!kids.is_array() || kids.size() != static_cast<size_t>(count))
      return state.SkipWithError(fmt::format("fork said {}", r->dump()).c_str());
    std::vector<fs::path> sockets;
    for (const auto& k : kids) sockets.emplace_back(json_value_or(k, "socket", std::string()));
    std::string failed;
    for (size_t i = 0; i < sockets.size(); ++i) {
      auto kc = client::connect(sockets[i]);
      if (!kc) {
        failed = kc.error().message;
        continue;
      }
      if (i == 0)
        if (auto ok = protocol_true(*kc); !ok) failed = ok.error().message;
      if (auto stop = kc->call({{"op", "stop"}}); !stop && stop.error().kind != "ended")
        failed = stop.error().message;
    }
    for (const auto& s : sockets)
      for (int i = 0; i < 1000 && fs::exists(s); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!failed.empty()) return state.SkipWithError(failed.c_str());
  }
  state.counters["fork_ms"] = median_of(ms);
  state.counters["ms_per_child"] = median_of(ms) / count;
  figure(fmt::format("fork/{}_ms", count), median_of(ms));
  figure(fmt::format("fork/{}_ms_per_child", count), median_of(ms) / count);
}

// ---- memory and concurrency ----

void bm_memory(benchmark::State& state, int execs) {
  auto& t = target();
  if (!t.conn) return state.SkipWithError(t.error.c_str());
  const pid_t server = t.session->server;
  for (auto _ : state) {
    // A warm-up, so that "before" is the server's steady state, not its first exec.
    for (int i = 0; i < 100; ++i)
      if (auto ok = protocol_true(*t.conn); !ok)
        return state.SkipWithError(ok.error().message.c_str());
    const uint64_t before = rss_kib(server), init_before = t.init ? rss_kib(t.init) : 0;
    const auto t0 = clock_type::now();
    for (int i = 0; i < execs; ++i)
      if (auto ok = protocol_true(*t.conn); !ok)
        return state.SkipWithError(ok.error().message.c_str());
    state.SetIterationTime(ms_since(t0) / 1000);
    const uint64_t after = rss_kib(server), init_after = t.init ? rss_kib(t.init) : 0;
    state.counters["server_rss_before_kib"] = static_cast<double>(before);
    state.counters["server_rss_after_kib"] = static_cast<double>(after);
    state.counters["pid1_rss_before_kib"] = static_cast<double>(init_before);
    state.counters["pid1_rss_after_kib"] = static_cast<double>(init_after);
    state.counters["ms_per_exec"] = ms_since(t0) / execs;
    figure("memory/server_rss_before_kib", static_cast<double>(before));
    figure("memory/server_rss_after_kib", static_cast<double>(after));
    figure("memory/pid1_rss_before_kib", static_cast<double>(init_before));
    figure("memory/pid1_rss_after_kib", static_cast<double>(init_after));
  }
}

void bm_concurrency(benchmark::State& state, int sessions, int per_session, int execs_each) {
  auto ws = ensure_workspace(small_workspace);
  if (!ws) return state.SkipWithError(ws.error().message.c_str());
  for (auto _ : state) {
    std::vector<cli_session> all;
    std::vector<double> create_ms;
    std::string start_error;
    for (int i = 0; i < sessions && start_error.empty(); ++i) {
      auto s = cli_session::start(*ws);
      if (!s) {
        start_error = s.error().message;
        break;
      }
      create_ms.push_back(s->start_ms);
      all.push_back(std::move(*s));
    }
    std::atomic<int> errors{0}, done{0};
    std::mutex first_m;
    std::string first_error;
    auto count_error = [&](const std::string& why) {
      errors.fetch_add(1);
      std::lock_guard lock(first_m);
      if (first_error.empty()) first_error = why;
    };
    const auto t0 = clock_type::now();
    if (start_error.empty()) {
      std::vector<std::thread> threads;
      for (auto& s : all)
        for (int k = 0; k < per_session; ++k)
          threads.emplace_back([&, socket = s.socket] {
            auto c = client::connect(socket);
            if (!c) return count_error(c.error().message);
            for (int i = 0; i < execs_each; ++i) {
              if (auto ok = protocol_true(*c); !ok)
                count_error(ok.error().message);
              else
                done.fetch_add(1);
            }
          });
      for (auto& th : threads) th.join();
    }
    const double took = ms_since(t0);
    state.SetIterationTime(took / 1000);
    for (auto& s : all) s.stop();
    if (!start_error.empty()) return state.SkipWithError(start_error.c_str());
    state.counters["errors"] = errors.load();
    state.counters["execs"] = done.load();
    state.counters["execs_per_s"] = done.load() / (took / 1000);
    state.counters["create_ms"] = median_of(create_ms);
    figure("concurrency/errors", errors.load());
    figure("concurrency/execs_per_s", done.load() / (took / 1000));
    figure("create/median_of_16_ms", median_of(create_ms));
    if (errors.load() > 0)
      return state.SkipWithError(
          fmt::format("{} execs failed; the first: {}", errors.load(), first_error).c_str());
  }
}

void register_all() {
  auto real_ms = [](benchmark::internal::Benchmark* b) {
    return b->UseRealTime()->Unit(benchmark::kMillisecond);
  };
  auto manual_ms = [](benchmark::internal::Benchmark* b) {
    return b->UseManualTime()->Unit(benchmark::kMillisecond);
  };
  real_ms(benchmark::RegisterBenchmark("floor/fork_exec_true", bm_fork_exec_true));
  real_ms(benchmark::RegisterBenchmark("session/exec_true/protocol", bm_exec_protocol));
  real_ms(benchmark::RegisterBenchmark("session/exec_true/in_process", bm_exec_live));
  real_ms(benchmark::RegisterBenchmark("session/exec_true/cli", bm_exec_cli));
  real_ms(benchmark::RegisterBenchmark("session/exec_true/nsenter", bm_exec_nsenter));
  real_ms(benchmark::RegisterBenchmark("session/exec_true/podman_exec", bm_exec_podman));
  manual_ms(
      benchmark::RegisterBenchmark("session/exec_true/against_nsenter", bm_exec_against_nsenter));
  // podman exec takes ~150 ms a round: a fixed number of rounds, not --benchmark_min_time.
  manual_ms(
      benchmark::RegisterBenchmark("session/exec_true/against_podman", bm_exec_against_podman))
      ->Iterations(30);
  manual_ms(benchmark::RegisterBenchmark("session/create/cli", bm_create));
  manual_ms(benchmark::RegisterBenchmark("session/reset/100_files/medium", bm_reset));
  manual_ms(benchmark::RegisterBenchmark("session/fork/32/medium",
                                         [](benchmark::State& st) { bm_fork(st, 32); }));
  manual_ms(benchmark::RegisterBenchmark("session/memory/10000_execs", [](benchmark::State& st) {
    bm_memory(st, 10000);
  }))->Iterations(1);
  manual_ms(benchmark::RegisterBenchmark("session/concurrency/16x8", [](benchmark::State& st) {
    bm_concurrency(st, 16, 8, 25);
  }))->Iterations(1);
}

// The figures against the targets (docs/performance.md, "Sessions").
void print_summary() {
  std::lock_guard lock(g_figures_m);
  if (g_figures.empty()) return;
  auto get = [](const std::string& k) -> std::optional<double> {
    if (auto it = g_figures.find(k); it != g_figures.end()) return it->second;
    return std::nullopt;
  };
  auto verdict = [](bool met) { return met ? "met" : "NOT met"; };
  std::fprintf(stderr, "\nsession_bench: figures of this run\n");
  for (const auto& [k, v] : g_figures) std::fprintf(stderr, "  %-40s %10.3f\n", k.c_str(), v);
  std::fprintf(stderr, "targets:\n");
  if (auto r = get("against_nsenter/protocol_per_nsenter"))
    std::fprintf(stderr, "  protocol exec / nsenter           %6.2f  (<= 2)    %s\n", *r,
                 verdict(*r <= 2));
  if (auto r = get("against_podman/podman_exec_per_protocol"))
    std::fprintf(stderr, "  podman exec / protocol exec       %6.1f  (>= 10)   %s\n", *r,
                 verdict(*r >= 10));
  if (auto r = get("reset/100_files_ms"))
    std::fprintf(stderr, "  reset after 100 changed files     %6.2f ms (<= 10) %s\n", *r,
                 verdict(*r <= 10));
  if (auto r = get("fork/32_ms_per_child"))
    std::fprintf(stderr, "  fork x32, per child               %6.2f ms (<= 10) %s\n", *r,
                 verdict(*r <= 10));
  if (auto b = get("memory/server_rss_before_kib"), a = get("memory/server_rss_after_kib"); a && b)
    std::fprintf(stderr, "  server RSS, 10,000 execs          %.0f -> %.0f KiB (flat) %s\n", *b, *a,
                 verdict(*a <= *b * 1.1));
  if (auto e = get("concurrency/errors"))
    std::fprintf(stderr, "  16 sessions x 8 concurrent execs  %.0f errors (0)  %s\n", *e,
                 verdict(*e == 0));
}

}  // namespace
}  // namespace evalbox::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (::geteuid() != 0) {
    std::fprintf(stderr, "session_bench: skipped: sessions need root (run as root)\n");
    return 0;
  }
  // The CLI and the in-process launches find the helper in the build tree unless told.
  ::setenv("EVALBOX_HELPER", EVALBOX_BENCH_HELPER, 0);
  struct sigaction sa {};
  sa.sa_handler = evalbox::bench::on_interrupt;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  evalbox::bench::register_all();
  benchmark::RunSpecifiedBenchmarks();
  evalbox::bench::teardown_all();
  evalbox::bench::print_summary();
  benchmark::Shutdown();
  return 0;
}
