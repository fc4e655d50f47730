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
//   1. read the plan                     main.cpp (plan.h; a bad plan is an error record)
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
//   9. classify, tear down, write record supervisor.cpp: classify, run; main.cpp
#include <malloc.h>
#include <sys/prctl.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "sandbox/base/fs.h"
#include "sandbox/base/json.h"
#include "sandbox/base/log.h"
#include "sandbox/helper/ahead.h"
#include "sandbox/helper/supervisor.h"
#include "sandbox/launch/plan.h"
#include "sandbox/launch/run_record.h"
#include "sandbox/sys/syscalls.h"

namespace evalbox::sandbox::helper {
namespace {

int usage_error(const char* msg) {
  std::fprintf(stderr,
               "evalbox-sandbox: %s\n"
               "usage: evalbox-sandbox --plan PLAN.json --record RECORD.json [--cgroup-fd N]\n"
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

}  // namespace

int main(int argc, char** argv) {
  // If whoever started us dies, so do we (and pid 1 of the run follows us: its own
  // death signal), so that no run outlives its launcher.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  std::string plan_path, record_path;
  int cgroup_fd = -1;
  int warm_fd = -1;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--plan" && i + 1 < argc) {
      plan_path = argv[++i];
    } else if (a == "--record" && i + 1 < argc) {
      record_path = argv[++i];
    } else if (a == "--cgroup-fd" && i + 1 < argc) {
      cgroup_fd = std::atoi(argv[++i]);
    } else if (a == "--warm-fd" && i + 1 < argc) {
      warm_fd = std::atoi(argv[++i]);
    } else if (a == "--help" || a == "-h") {
      usage_error("help");
      return 0;
    } else {
      return usage_error("unknown argument");
    }
  }
  // Nothing but the standard streams and the socket: a helper starts with every fd its
  // launcher's process held without close-on-exec at that moment (a pipe that another thread
  // made with pipe(2) for a judge's output, say), and a warm helper may wait for minutes;
  // holding a pipe's write end that long keeps its reader from ever seeing end of file.
  (void)sys::close_all_but_stdio_and(warm_fd >= 0 ? warm_fd : cgroup_fd);
  std::string cgroup_received;                  // a warm helper's first bytes of the cgroup message
  sys::owned_process ahead;                     // a warm helper's namespaces made ahead
  std::unique_ptr<cgroup_ahead> cgroups_ahead;  // and, on cgroup v1, its cgroups
  std::optional<host_view> host_layout;         // and the host's layout, if still fresh
  if (warm_fd >= 0) {
    if (!plan_path.empty() || !record_path.empty() || cgroup_fd >= 0)
      return usage_error("--warm-fd takes its plan and cgroup on its socket");
    // Waits here, started ahead of need, until a launch hands it a plan. A launcher that is
    // gone closes the socket's other end (end of file): nothing to run, nothing to record, and
    // what was made ahead is removed. So SIGINT, SIGTERM and SIGHUP are ignored while it
    // waits — not blocked: a blocked one would stay pending and cancel the run it is handed
    // later (a Ctrl-C reaches the whole process group; the launcher's end of file follows it) —
    // and with cgroups made ahead the parent-death signal is off until the plan comes: the end
    // of file says it. Once it has a plan they are held for the supervision's signalfd, as in a
    // cold helper started by the harness (which blocks them in every thread); a cancel that
    // came between the plan and that is sent again (launcher.cpp). SIGKILL ends a waiting
    // helper at once; the "@ahead-<pid>" cgroups it leaves are removed by the next warm helper
    // (cgroup::remove_stale_ahead).
    const int termination[] = {SIGINT, SIGTERM, SIGHUP};
    sigset_t held;
    sigemptyset(&held);
    for (int sig : termination) {
      sigaddset(&held, sig);
      ::signal(sig, SIG_IGN);
    }
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    const pid_t launcher = ::getppid();
    // Meanwhile the run's user and network namespaces are made (ahead.h), and on cgroup v1
    // its cgroups. Where the host refuses, the launch makes them, as in a cold helper.
    if (namespaces_ahead_enabled()) {
      if (auto holder = make_namespaces_ahead()) {
        ahead = std::move(*holder);
        if (cgroup::ahead_applies()) {
          if (auto made = make_cgroup_ahead()) {
            cgroups_ahead = std::move(*made);
            ::prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0);
          } else {
            log::debug("warm helper: no cgroups made ahead: {}", made.error().message);
          }
        }
      }
    }
    // The host's layout (compile.h) too, for the launch to compile against. It is what the
    // host looked like when the helper started; a launch that comes after longer than
    // `layout_fresh` (a helper that waited through an agent's run) reads it again.
    constexpr auto layout_fresh = std::chrono::seconds(10);
    host_view layout = look_at_host_layout();
    const auto looked = std::chrono::steady_clock::now();
    warm_memory();
    bool helper_makes_cgroup = false;
    if (!receive_launch(warm_fd, plan_path, record_path, cgroup_received, helper_makes_cgroup))
      return 0;
    if (std::chrono::steady_clock::now() - looked < layout_fresh) host_layout = std::move(layout);
    ::sigprocmask(SIG_SETMASK, &held, nullptr);
    for (int sig : termination) ::signal(sig, SIG_DFL);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (::getppid() != launcher) return 0;  // it died since it sent the plan
    if (helper_makes_cgroup) {
      ::close(warm_fd);  // nothing more comes on it
    } else {
      cgroup_fd = warm_fd;
    }
  }
  if (plan_path.empty() || record_path.empty())
    return usage_error("--plan and --record are required");
  run_record rec;
  // The launcher reads the record as soon as we exit and the harness keeps its own durable
  // result, so the record must be whole (temp file + rename) but need not survive a power
  // cut: the two fsyncs of write_file_atomic cost ~3 ms of every launch on ext4.
  auto write_record = [&]() {
    if (status w = write_file_replace(record_path, pretty_json(rec.to_json()), 0644); !w) {
      std::fprintf(stderr, "evalbox-sandbox: write record: %s\n", w.error().message.c_str());
      return 70;
    }
    return 0;
  };
  auto j = read_json_file(plan_path);
  if (!j) {
    rec.error_step = "read plan";
    rec.error = j.error().message;
    return write_record();
  }
  auto plan = launch_plan::from_json(*j);
  if (!plan) {
    rec.error_step = "read plan";
    rec.error = plan.error().message;
    return write_record();
  }
  supervisor sup(*plan, rec, unique_fd(cgroup_fd), std::move(cgroup_received), std::move(ahead),
                 std::move(cgroups_ahead));
  if (host_layout) sup.use_host_layout(std::move(*host_layout));
  if (auto s = sup.run(); !s) {
    if (rec.error_step.empty()) rec.error_step = "helper";
    rec.error = s.error().message;
  }
  return write_record();
}

}  // namespace evalbox::sandbox::helper

int main(int argc, char** argv) { return evalbox::sandbox::helper::main(argc, argv); }
