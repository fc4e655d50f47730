// The helper's supervision: creates the run's cgroup, clone3s the child into its namespaces,
// maps its ids, releases it, then runs the event loop (output caps, wall and CPU limits, the
// network relay, termination signals) and fills the run record. Single-threaded.
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
  supervisor(const launch_plan& plan, run_record& rec) : plan_(plan), rec_(rec) {}
  status run();

 private:
  void kill_run(outcome_kind why);
  void on_output(stream& s);
  status start(compiled& c);

  const launch_plan& plan_;
  run_record& rec_;
  std::unique_ptr<cgroup::run_cgroup> cg_;
  std::optional<outcome_kind> forced_;  // why evalbox killed the run, if it did
  pid_t pid_ = -1;
  unique_fd pidfd_;
  stream out_, err_;
  uint64_t kept_ = 0;
  bool truncated_ = false;
};

}  // namespace evalbox::sandbox::helper
