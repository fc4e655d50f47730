// The reclaim test's victim: prepares a session in the given state root, puts itself into a
// cgroup named for the run (as a launch would), prints "ready" and waits to be SIGKILLed.
// usage: evalbox_prep_victim STATE_ROOT WORKSPACE RUN_ID
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "base/fs.h"
#include "sandbox/cgroup/cgroup.h"
#include "sandbox/prepare/preparer.h"
#include "sandbox/state/run_state.h"

int main(int argc, char** argv) {
  using namespace evalbox;
  using namespace evalbox::sandbox;
  if (argc != 4) return 64;
  auto o = default_preparer_options();
  o.state_root = argv[1];
  preparer p(o);
  session_request r;
  r.run_id = argv[3];
  r.authorized_until = std::chrono::system_clock::now() + std::chrono::hours(1);
  r.argv = {"/bin/true"};
  r.workspace.source = argv[2];
  r.limits.disk_bytes = 16ull << 20;
  auto s = p.prepare(r);
  if (!s) {
    std::fprintf(stderr, "prepare: %s\n", s.error().message.c_str());
    return 1;
  }
  (void)write_file(s->workspace_dir() / "written-by-victim", "x");
  (void)s->snapshot_workspace();
  // A launch's cgroup of the run, with this process in it.
  for (const auto& parent : cgroup::run_cgroup_parents(
           {.v2_root = o.launch.cgroup_v2_root, .ahead = o.launch.cgroup_ahead})) {
    const auto dir = parent / cgroup::launch_cgroup_name(r.run_id, "launch-0");
    if (!make_dirs(dir, 0755)) continue;
    (void)write_file(dir / "cgroup.procs", std::to_string(::getpid()));
  }
  std::printf("ready\n");
  std::fflush(stdout);
  for (;;) ::pause();
}
