// Test scaffolding for the helper: a scratch workspace/home/root over temp directories, a
// launch plan built by hand, and a runner that executes evalbox-sandbox and reads the record.
#pragma once

#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "base/fs.h"
#include "base/json.h"
#include "sandbox/protocol/launch_plan.h"
#include "sandbox/protocol/run_record.h"

namespace evalbox::testing {

namespace fs = std::filesystem;

inline fs::path helper_binary() { return EVALBOX_BINARY_DIR "/sandbox/helper/evalbox-sandbox"; }

class helper_env {
 public:
  helper_env() : tmp_("evalbox-helper") {
    ::chmod(tmp_.path().c_str(), 0755);
    uid_ = ::geteuid() == 0 ? 60000 : ::getuid();
    gid_ = ::geteuid() == 0 ? 60000 : ::getgid();
    for (const char* d : {"ws", "home", "root", "out"}) {
      (void)make_dirs(tmp_.path() / d, 0755);
    }
    (void)!::chown((tmp_.path() / "ws").c_str(), uid_, gid_);
    (void)!::chown((tmp_.path() / "home").c_str(), uid_, gid_);
    static int counter = 0;
    plan.run_id = "helper-test-" + std::to_string(::getpid()) + "-" + std::to_string(++counter);
    plan.host_uid = uid_;
    plan.host_gid = gid_;
    plan.root_dir = (tmp_.path() / "root").string();
    plan.workspace_dir = (tmp_.path() / "ws").string();
    plan.home_dir = (tmp_.path() / "home").string();
    plan.env = {{"PATH", "/usr/bin:/bin"}, {"HOME", "/home/agent"}};
    plan.limits.wall_ms = 20000;
    plan.limits.memory_bytes = 256ull << 20;
    plan.limits.pids = 128;
    plan.limits.cpu_ms = 20000;
    plan.tmp_bytes = 16ull << 20;
    plan.stdout_path = (tmp_.path() / "out" / "stdout").string();
    plan.stderr_path = plan.stdout_path;
  }

  const fs::path& dir() const { return tmp_.path(); }
  fs::path workspace() const { return tmp_.path() / "ws"; }
  std::string output() const { return read_file(plan.stdout_path).value_or("<none>"); }

  // Runs the helper; `while_running` (if set) is called with its pid once started.
  sandbox::run_record run(const std::vector<std::string>& argv,
                          const std::function<void(pid_t)>& while_running = {}) {
    plan.argv = argv;
    const fs::path plan_path = tmp_.path() / "plan.json";
    const fs::path record_path = tmp_.path() / "record.json";
    (void)write_file(plan_path, pretty_json(plan.to_json()));
    std::error_code ec;
    fs::remove(record_path, ec);
    // With `cgroup_message`, the helper takes the run's cgroup from it on fd 3, as from a
    // launcher; without, it makes its own.
    // With `before_plan`, it starts warm and gets its plan's line there instead.
    int sv[2] = {-1, -1};
    if ((cgroup_message || before_plan) &&
        ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
      sandbox::run_record r;
      r.error = "socketpair failed";
      return r;
    }
    pid_t pid = ::fork();
    if (pid == 0) {
      const std::string h = helper_binary().string();
      if (before_plan) {
        ::dup2(sv[1], 3);
        ::execl(h.c_str(), h.c_str(), "--warm-fd", "3", nullptr);
      } else if (cgroup_message) {
        ::dup2(sv[1], 3);
        ::execl(h.c_str(), h.c_str(), "--plan", plan_path.c_str(), "--record", record_path.c_str(),
                "--cgroup-fd", "3", nullptr);
      } else {
        ::execl(h.c_str(), h.c_str(), "--plan", plan_path.c_str(), "--record", record_path.c_str(),
                nullptr);
      }
      ::_exit(127);
    }
    if (sv[0] >= 0) {
      ::close(sv[1]);
      std::string message;
      if (before_plan) {
        // Started ahead, as a launcher's warm helper: once it waits for its plan (in recvfrom),
        // `before_plan`, then the plan's line; the helper makes the run's cgroup itself.
        wait_in_syscall(pid, SYS_recvfrom);
        before_plan(pid);
        message = json{{"plan", plan_path.string()},
                       {"record", record_path.string()},
                       {"cgroup", "helper"}}
                      .dump() +
                  "\n";
      } else {
        message = *cgroup_message;
      }
      (void)!::write(sv[0], message.data(), message.size());
      ::close(sv[0]);  // end of file: the message is whole
    }
    if (while_running) while_running(pid);
    int st = 0;
    ::waitpid(pid, &st, 0);
    auto j = read_json_file(record_path);
    sandbox::run_record r;
    if (!j) {
      r.error = "no record: " + j.error().message;
      return r;
    }
    auto rec = sandbox::run_record::from_json(*j);
    if (!rec) {
      r.error = "bad record: " + rec.error().message;
      return r;
    }
    return *rec;
  }

  sandbox::launch_plan plan;
  // The launcher's cgroup message ({"cgroup": description} or {"error": why}) for the next run.
  std::optional<std::string> cgroup_message;
  // Set: the next run's helper is a warm one (--warm-fd), and this is called with its pid while
  // it waits for its plan (after it has made what it makes ahead and read the host's layout).
  std::function<void(pid_t)> before_plan;

 private:
  // Waits (up to 10 s) until process `pid` is blocked in system call `nr`.
  static void wait_in_syscall(pid_t pid, long nr) {
    const std::string file = "/proc/" + std::to_string(pid) + "/syscall";
    const std::string want = std::to_string(nr) + " ";
    for (int i = 0; i < 2000; ++i) {
      if (read_file(file).value_or("").rfind(want, 0) == 0) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  temp_dir tmp_;
  uid_t uid_;
  gid_t gid_;
};

}  // namespace evalbox::testing
