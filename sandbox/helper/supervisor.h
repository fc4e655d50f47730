// The helper's supervision: creates (or takes over) the run's cgroup, clone3s the child into its
// namespaces, maps its ids, releases it, then runs the event loop (output caps, wall and CPU
// limits, the network relay, termination signals) and fills the run record. Single-threaded.
#pragma once

#include <linux/sched.h>
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "base/error.h"
#include "base/json_fwd.h"
#include "base/unique_fd.h"
#include "sandbox/cgroup/cgroup.h"
#include "sandbox/helper/ahead.h"
#include "sandbox/helper/compile.h"
#include "sandbox/protocol/launch_plan.h"
#include "sandbox/protocol/run_record.h"
#include "sandbox/sys/process.h"

namespace evalbox::sandbox::helper {

// One captured stream: a pipe from the program into a host file, with the shared byte cap.
struct stream {
  unique_fd pipe;
  unique_fd file;
  bool open = false;
};

class supervisor {
 public:
  // `cgroups`: where the helper creates the run's cgroup when it makes it itself (the
  // environment's settings, read in main). `cgroup_fd`: where the launcher hands over the
  // run's cgroup it made while the helper started (launcher.cpp); -1: the helper creates it.
  // `cgroup_received`: what a warm helper read of that message already, with its plan.
  // `ahead`: the holder of namespaces made ahead (ahead.h), a warm helper's; none: clone3
  // makes them. `cgroups_ahead`: its cgroups made ahead (cgroup v1), claimed as the run's when
  // the helper makes the cgroup (no `cgroup_fd`); pid 1 is then born in them.
  supervisor(const launch_plan& plan, run_record& rec, cgroup::host_options cgroups,
             unique_fd cgroup_fd = {}, std::string cgroup_received = {},
             sys::owned_process ahead = {}, std::unique_ptr<cgroup_ahead> cgroups_ahead = {})
      : plan_(plan),
        rec_(rec),
        cgroups_(std::move(cgroups)),
        cgroup_fd_(std::move(cgroup_fd)),
        cg_message_(std::move(cgroup_received)),
        ahead_(std::move(ahead)),
        cg_ahead_(std::move(cgroups_ahead)) {}
  // The host's layout as a warm helper read it while it waited (compile.h); without it, run()
  // reads it at the launch.
  void use_host_layout(host_view layout) { host_layout_ = std::move(layout); }
  // Serve mode (launch_plan::serve): pid 1's end of the session's control socket, which pid 1
  // serves execs on (child.h); the helper closes its own copy once pid 1 holds it.
  void use_control(unique_fd control) { control_ = std::move(control); }
  status run();

 private:
  struct channels;  // every pipe and socket between the helper and the child
  struct ending;    // what the supervision saw of the run's end

  // start(): the launch, as named steps in the order they run.
  status start(compiled& c);
  status write_host_files(const compiled& c);
  status open_streams(channels& ch, child_context& ctx);
  status open_channels(channels& ch, compiled& c);
  status clone_child(compiled& c, channels& ch);
  status clone_entering_ahead(compiled& c, channels& ch, const clone_args& args);
  status release_child(channels& ch);
  result<ending> supervise(channels& ch, const net::allow_plan& allow);
  void classify(const compiled& c, const ending& end);

  // Parts of the supervision loop.
  void on_signals(int signal_fd);
  void on_output(stream& s);
  void on_terminal(channels& ch);
  void on_input();
  void resize_terminal();
  bool on_exit(channels& ch, ending& end);
  void enforce_limits(std::chrono::steady_clock::time_point wall_deadline);
  void sample_disk(bool now);
  void kill_run(outcome_kind why);

  // The record's mechanisms: what the compiled plan put in force, then each limit with what
  // enforced it.
  json mechanisms(const compiled& c) const;
  json limits_by_mechanism() const;
  // Creates the run's cgroup, or takes over the launcher's from cgroup_fd_ (with `wait`
  // false, only if its message has arrived). Once taken, does nothing.
  status take_cgroup(bool wait);
  // The cgroups made ahead and their starter are not used for this launch: the starter is
  // killed, and the cgroups removed unless claimed (then they are cg_, the run's).
  void drop_starter() noexcept;

  const launch_plan& plan_;
  run_record& rec_;
  cgroup::host_options cgroups_;
  const bool root_ = ::geteuid() == 0;
  unique_fd cgroup_fd_;
  unique_fd control_;       // serve mode: pid 1's end of the control socket
  std::string cg_message_;  // the launcher's message as far as it has arrived
  bool cg_taken_ = false;
  std::unique_ptr<cgroup::run_cgroup> cg_;
  std::optional<host_view> host_layout_;  // read ahead by a warm helper
  sys::owned_process ahead_;              // the holder of namespaces made ahead, until pid 1 joined
  std::unique_ptr<cgroup_ahead> cg_ahead_;  // cgroups made ahead and their starter
  bool into_cgroup_ = false;                // cloned with CLONE_INTO_CGROUP
  bool born_in_cgroup_ = false;             // cloned by the starter, in the cgroups made ahead
  std::optional<outcome_kind> forced_;      // why evalbox killed the run, if it did
  sys::owned_process child_;                // pid 1 of the run
  std::chrono::steady_clock::time_point started_;
  stream out_, err_;        // with a terminal, out_ reads its master
  int master_ = -1;         // the terminal's master (owned by out_.pipe), or -1
  bool tty_input_ = false;  // the helper's stdin is relayed into the master
  uint64_t kept_ = 0;
  bool truncated_ = false;
  bool disk_full_ = false;  // the run's disk had no free block at a sample
  std::chrono::steady_clock::time_point next_disk_sample_;
  std::chrono::steady_clock::time_point next_cpu_check_;  // of the CPU limit
};

}  // namespace evalbox::sandbox::helper
