// evalbox-sandbox: runs one command of a prepared session inside the sandbox and writes its run
// record. Single-threaded on purpose: the clone3/exec window must not race other threads.
//
//   evalbox-sandbox --plan PLAN.json --record RECORD.json [--cgroup-fd N]
//   evalbox-sandbox --warm-fd N
//
// With --cgroup-fd the launcher hands over the run's cgroup on fd N (it creates it while
// the helper starts); without, the helper creates it. With --warm-fd the helper is started
// ahead of need (a warm helper, launcher.cpp) and waits on the socket N for one line naming its
// plan and record; the same socket then carries the cgroup as with --cgroup-fd. End of file
// before that line: the launcher is gone or let it go, and it exits without running anything.
//
// Table of contents (each pass in the order it runs; docs/sandbox.md explains why):
//   0. arguments, environment, fds       main.cpp: parse_arguments, settings_from_env (the one
//                                        read of its environment), close_inherited_fds, and a
//                                        warm helper's wait_for_launch (make_ahead meanwhile)
//   1. read the plan                     main.cpp: run_launch (plan.h; a bad plan is an error
//                                        record)
//   2. compile the child's steps         compile.cpp: look_at_host (a warm helper reads the
//                                        layout while it waits), compile (the new root,
//                                        pid 1's steps, the program's; Landlock, seccomp, env)
//   3. open the streams and channels     supervisor.cpp: open_streams, open_channels
//   4. create or take over the cgroup    supervisor.cpp: take_cgroup (sandbox/cgroup)
//   5. clone3 into new namespaces        supervisor.cpp: clone_child (user, mount, pid, ipc,
//                                        uts, net); a warm helper makes user and net ahead
//                                        (ahead.cpp) and clone_entering_ahead joins them
//   6. map ids, join cgroup, release     supervisor.cpp: release_child
//   7. run the steps, exec               child.cpp (pid 1, then the program's process)
//   8. supervise                         supervisor.cpp: supervise (output cap, limits, relay,
//                                        signals)
//   9. classify, tear down, write record supervisor.cpp: classify, run; main.cpp: write_record
#include <malloc.h>
#include <sys/prctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <expected>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/fs.h"
#include "base/json.h"
#include "base/log.h"
#include "sandbox/helper/ahead.h"
#include "sandbox/helper/supervisor.h"
#include "sandbox/protocol/launch_plan.h"
#include "sandbox/protocol/run_record.h"
#include "sandbox/sys/syscalls.h"

namespace evalbox::sandbox::helper {
namespace {

int usage_error(const char* msg) {
  std::fprintf(stderr,
               "evalbox-sandbox: %s\n"
               "usage: evalbox-sandbox --plan PLAN.json --record RECORD.json [--cgroup-fd N]\n"
               "                       [--control-fd N]\n"
               "       evalbox-sandbox --warm-fd N\n"
               "Runs one command of a prepared evalbox session in the sandbox; normally started\n"
               "by evalbox itself (see `evalbox sandbox exec --help`).\n",
               msg);
  return 64;
}

// A warm helper, while it waits, faults in the memory its launch will use, so that the launch
// does not: a fresh process takes a page fault on every page it first touches (~3.6 µs each on
// the guests measured), and between the plan's arrival and pid 1's clone the helper took
// about 30 of them in parsing the plan and compiling the steps (12 remain). The sizes are what
// one launch reaches (its heap peaks near 268 KiB; docs/performance.md, "Where the launch's CPU
// goes"): larger would only move CPU time here that no launch saves.
constexpr size_t warm_heap_bytes = 256 << 10;
constexpr size_t warm_stack_bytes = 64 << 10;

[[gnu::noinline]] void touch_stack() {
  volatile char frame[warm_stack_bytes];
  for (size_t i = 0; i < sizeof frame; i += 4096) frame[i] = 0;
}

void warm_memory() {
  // Keep what is freed below: a block this size from the heap rather than its own mapping, and
  // the heap's top not given back.
  ::mallopt(M_MMAP_THRESHOLD, 1 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 4 << 20);
  if (void* p = std::malloc(warm_heap_bytes)) {
    std::memset(p, 0, warm_heap_bytes);
    asm volatile("" : : "r"(p) : "memory");  // the writes are the point: keep them
    std::free(p);
  }
  touch_stack();
}

// A warm helper's wait for its launch: one line, {"plan": PATH, "record": PATH}, on `fd`, with
// "cgroup": "helper" when the launcher leaves the run's cgroup to the helper (cgroups made
// ahead, cgroup v1); else what follows the line is the start of the cgroup message (`rest`).
// False at end of file before the line (nothing to run) or on a line that is not that.
bool receive_launch(int fd, std::string& plan_path, std::string& record_path, std::string& rest,
                    bool& helper_makes_cgroup) {
  std::string got;
  char buf[4096];
  size_t eol;
  while ((eol = got.find('\n')) == std::string::npos) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    got.append(buf, static_cast<size_t>(n));
  }
  auto j = parse_json(std::string_view(got).substr(0, eol), "the launch");
  if (!j || !j->is_object()) return false;
  if (!(*j)["plan"].is_string() || !(*j)["record"].is_string()) return false;
  plan_path = (*j)["plan"].get<std::string>();
  record_path = (*j)["record"].get<std::string>();
  helper_makes_cgroup = j->contains("cgroup") && (*j)["cgroup"] == "helper";
  rest = got.substr(eol + 1);
  return !plan_path.empty() && !record_path.empty();
}

// What the command line says.
struct arguments {
  std::string plan_path, record_path;
  int cgroup_fd = -1;   // --cgroup-fd: the launcher hands the run's cgroup over on it
  int warm_fd = -1;     // --warm-fd: started ahead of need, the plan's line comes on it
  int control_fd = -1;  // --control-fd: a session's control socket, for pid 1 to serve on
};

// The arguments, or the exit status to leave with (0 for --help, 64 for a usage error).
std::expected<arguments, int> parse_arguments(int argc, char** argv) {
  arguments a;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--plan" && i + 1 < argc) {
      a.plan_path = argv[++i];
    } else if (arg == "--record" && i + 1 < argc) {
      a.record_path = argv[++i];
    } else if (arg == "--cgroup-fd" && i + 1 < argc) {
      a.cgroup_fd = std::atoi(argv[++i]);
    } else if (arg == "--warm-fd" && i + 1 < argc) {
      a.warm_fd = std::atoi(argv[++i]);
    } else if (arg == "--control-fd" && i + 1 < argc) {
      a.control_fd = std::atoi(argv[++i]);
    } else if (arg == "--help" || arg == "-h") {
      usage_error("help");
      return std::unexpected(0);
    } else {
      return std::unexpected(usage_error("unknown argument"));
    }
  }
  if (a.warm_fd >= 0 &&
      (!a.plan_path.empty() || !a.record_path.empty() || a.cgroup_fd >= 0 || a.control_fd >= 0))
    return std::unexpected(usage_error("--warm-fd takes its plan and cgroup on its socket"));
  if (a.control_fd >= 0 && a.control_fd <= 2)
    return std::unexpected(usage_error("--control-fd must be above the standard streams"));
  return a;
}

// What the helper takes from its environment (docs/cli.md): read here, once, and passed down.
struct helper_settings {
  bool namespaces_ahead = true;  // EVALBOX_NAMESPACES_AHEAD=0: a warm helper makes none ahead
  cgroup::host_options cgroups;  // EVALBOX_CGROUP_V2_ROOT, EVALBOX_CGROUP_AHEAD
};

helper_settings settings_from_env() {
  auto value = [](const char* v) -> std::string_view { return v ? v : ""; };  // "": unset
  helper_settings s;
  s.namespaces_ahead = value(std::getenv("EVALBOX_NAMESPACES_AHEAD")) != "0";
  s.cgroups.v2_root = value(std::getenv("EVALBOX_CGROUP_V2_ROOT"));
  s.cgroups.ahead = value(std::getenv("EVALBOX_CGROUP_AHEAD")) != "0";
  return s;
}

// Nothing but the standard streams and the socket: a helper starts with every fd its
// launcher's process held without close-on-exec at that moment (a pipe that another thread
// made with pipe(2) for a judge's output, say), and a warm helper may wait for minutes;
// holding a pipe's write end that long keeps its reader from ever seeing end of file.
void close_inherited_fds(const arguments& a) {
  if (a.control_fd < 0) {
    (void)sys::close_all_but_stdio_and(a.warm_fd >= 0 ? a.warm_fd : a.cgroup_fd);
    return;
  }
  // A session's helper keeps its cgroup socket and its control socket: the ranges around them.
  unsigned next = 3;
  for (int keep : {std::min(a.cgroup_fd, a.control_fd), std::max(a.cgroup_fd, a.control_fd)}) {
    if (keep < static_cast<int>(next)) continue;
    if (static_cast<unsigned>(keep) > next) (void)sys::close_range(next, keep - 1, 0);
    next = static_cast<unsigned>(keep) + 1;
  }
  (void)sys::close_range(next, ~0U, 0);
}

// What the launch starts from: its plan and record, where its cgroup comes from, and what a
// warm helper made ahead while it waited.
struct launch_inputs {
  std::string plan_path, record_path;
  int cgroup_fd = -1;
  int control_fd = -1;
  std::string cgroup_received;                  // a warm helper's first bytes of the cgroup message
  sys::owned_process ahead;                     // a warm helper's namespaces made ahead
  std::unique_ptr<cgroup_ahead> cgroups_ahead;  // and, on cgroup v1, its cgroups
  std::optional<host_view> host_layout;         // and the host's layout, if still fresh
};

// The signals that end a run (the supervision's signalfd holds them).
constexpr int termination_signals[] = {SIGINT, SIGTERM, SIGHUP};

// A waiting warm helper ignores them — not blocked: a blocked one would stay pending and cancel
// the run it is handed later (a Ctrl-C reaches the whole process group; the launcher's end of
// file follows it).
void ignore_termination() {
  for (int sig : termination_signals) ::signal(sig, SIG_IGN);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

// Once it has a plan they are held for the supervision's signalfd, as in a cold helper started
// by the harness (which blocks them in every thread); a cancel that came between the plan and
// this is sent again (launcher.cpp).
void hold_termination() {
  sigset_t held;
  sigemptyset(&held);
  for (int sig : termination_signals) sigaddset(&held, sig);
  ::sigprocmask(SIG_SETMASK, &held, nullptr);
  for (int sig : termination_signals) ::signal(sig, SIG_DFL);
}

// The run's user and network namespaces (ahead.h), and on cgroup v1 its cgroups. Where the
// host refuses, the launch makes them, as in a cold helper. With cgroups made ahead the
// parent-death signal is off until the plan comes: the launcher's end of file says it is gone.
void make_ahead(const helper_settings& settings, launch_inputs& in) {
  if (!settings.namespaces_ahead) return;
  auto holder = make_namespaces_ahead();
  if (!holder) return;
  in.ahead = std::move(*holder);
  if (!cgroup::ahead_applies(settings.cgroups)) return;
  if (auto made = make_cgroup_ahead(settings.cgroups)) {
    in.cgroups_ahead = std::move(*made);
    ::prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0);
  } else {
    log::debug("warm helper: no cgroups made ahead: {}", made.error().message);
  }
}

// A warm helper's wait, started ahead of need, until a launch hands it a plan on `warm_fd`
// (the same socket then carries the cgroup, as --cgroup-fd does). Meanwhile it makes what it
// can ahead, reads the host's layout and faults in its memory. False: nothing to run (the
// launcher is gone or let it go: end of file, or it died after sending the plan); what was made
// ahead is removed with `in`. SIGKILL ends a waiting helper at once; the "@ahead-<pid>" cgroups
// it leaves are removed by the next warm helper (cgroup::remove_stale_ahead).
bool wait_for_launch(int warm_fd, const helper_settings& settings, launch_inputs& in) {
  ignore_termination();
  const pid_t launcher = ::getppid();
  make_ahead(settings, in);
  // The host's layout (compile.h), for the launch to compile against. It is what the host
  // looked like when the helper started; a launch that comes after longer than `layout_fresh`
  // (a helper that waited through an agent's run) reads it again.
  constexpr auto layout_fresh = std::chrono::seconds(10);
  host_view layout = look_at_host_layout();
  const auto looked = std::chrono::steady_clock::now();
  warm_memory();
  bool helper_makes_cgroup = false;
  if (!receive_launch(warm_fd, in.plan_path, in.record_path, in.cgroup_received,
                      helper_makes_cgroup))
    return false;
  if (std::chrono::steady_clock::now() - looked < layout_fresh) in.host_layout = std::move(layout);
  hold_termination();
  ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (::getppid() != launcher) return false;  // it died since it sent the plan
  if (helper_makes_cgroup) {
    ::close(warm_fd);  // nothing more comes on it
  } else {
    in.cgroup_fd = warm_fd;
  }
  return true;
}

// The launcher reads the record as soon as we exit and the harness keeps its own durable
// result, so the record must be whole (temp file + rename) but need not survive a power cut:
// the two fsyncs of write_file_atomic cost ~3 ms of every launch on ext4. The exit status.
int write_record(const std::string& path, const run_record& rec) {
  if (status w = write_file_replace(path, pretty_json(rec.to_json()), 0644); !w) {
    std::fprintf(stderr, "evalbox-sandbox: write record: %s\n", w.error().message.c_str());
    return 70;
  }
  return 0;
}

result<launch_plan> read_plan(const std::string& path) {
  return launch_plan::from_json(EB_TRY(read_json_file(path)));
}

// The launch itself (supervisor.h: compile, clone, supervise, classify, tear down), then its
// record; a plan that cannot be read is an error record too.
int run_launch(launch_inputs in, const helper_settings& settings) {
  run_record rec;
  auto plan = read_plan(in.plan_path);
  if (!plan) {
    rec.error_step = "read plan";
    rec.error = plan.error().message;
    return write_record(in.record_path, rec);
  }
  supervisor sup(*plan, rec, settings.cgroups, unique_fd(in.cgroup_fd),
                 std::move(in.cgroup_received), std::move(in.ahead), std::move(in.cgroups_ahead));
  if (in.host_layout) sup.use_host_layout(std::move(*in.host_layout));
  if (in.control_fd >= 0) sup.use_control(unique_fd(in.control_fd));
  if (auto s = sup.run(); !s) {
    if (rec.error_step.empty()) rec.error_step = "helper";
    rec.error = s.error().message;
  }
  return write_record(in.record_path, rec);
}

}  // namespace

int main(int argc, char** argv) {
  // If whoever started us dies, so do we (and pid 1 of the run follows us: its own death
  // signal), so that no run outlives its launcher.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  const auto args = parse_arguments(argc, argv);
  if (!args) return args.error();
  const helper_settings settings = settings_from_env();
  close_inherited_fds(*args);
  launch_inputs in{.plan_path = args->plan_path,
                   .record_path = args->record_path,
                   .cgroup_fd = args->cgroup_fd,
                   .control_fd = args->control_fd};
  if (args->warm_fd >= 0 && !wait_for_launch(args->warm_fd, settings, in)) return 0;
  if (in.plan_path.empty() || in.record_path.empty())
    return usage_error("--plan and --record are required");
  return run_launch(std::move(in), settings);
}

}  // namespace evalbox::sandbox::helper

int main(int argc, char** argv) { return evalbox::sandbox::helper::main(argc, argv); }
