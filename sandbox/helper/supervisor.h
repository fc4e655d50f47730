// The helper's supervision: creates (or takes over) the run's cgroup, clone3s the child into its
// namespaces, maps its ids, releases it, then runs the event loop (output caps, wall and CPU
// limits, the network relay, termination signals) and fills the run record. Single-threaded.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>

#include "sandbox/base/error.h"
#include "sandbox/base/unique_fd.h"
#include "sandbox/cgroup/cgroup.h"
#include "sandbox/helper/compile.h"
#include "sandbox/launch/plan.h"
#include "sandbox/launch/run_record.h"

namespace evalbox::sandbox::helper {

// One captured stream: a pipe from the program into a host file, with the shared byte cap.
struct stream {
  unique_fd pipe;
  unique_fd file;
  bool open = false;
};

class supervisor {
 public:
  // `cgroup_fd`: where the launcher hands over the run's cgroup it made while the helper
  // started (launcher.cpp); -1: the helper creates it itself.
  supervisor(const launch_plan& plan, run_record& rec, unique_fd cgroup_fd = {})
      : plan_(plan), rec_(rec), cgroup_fd_(std::move(cgroup_fd)) {}
  status run();

 private:
  void kill_run(outcome_kind why);
  void on_output(stream& s);
  status start(compiled& c);
  // Creates the run's cgroup, or takes over the launcher's from cgroup_fd_ (with `wait`
  // false, only if its message has arrived). Once taken, does nothing.
  status take_cgroup(bool root, bool wait);

  const launch_plan& plan_;
  run_record& rec_;
  unique_fd cgroup_fd_;
  std::string cg_message_;  // the launcher's message as far as it has arrived
  bool cg_taken_ = false;
  std::unique_ptr<cgroup::run_cgroup> cg_;
  std::optional<outcome_kind> forced_;  // why evalbox killed the run, if it did
  pid_t pid_ = -1;
  unique_fd pidfd_;
  stream out_, err_;
  uint64_t kept_ = 0;
  bool truncated_ = false;
};

}  // namespace evalbox::sandbox::helper
