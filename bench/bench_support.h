// Shared scaffolding of the benchmark suites: a scratch state root with a preparer, session
// requests over the generated workspaces, and child-process helpers for the floor baselines.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/fs.h"
#include "bench/workspace_gen.h"
#include "sandbox/prepare/preparer.h"
#include "sandbox/spec/request.h"

namespace evalbox::bench {

// A state root in a fresh temporary directory, a preparer over it, and a credential source.
class bench_env {
 public:
  bench_env();
  ~bench_env();
  bench_env(const bench_env&) = delete;
  bench_env& operator=(const bench_env&) = delete;

  [[nodiscard]] const std::filesystem::path& dir() const noexcept { return tmp_.path(); }
  [[nodiscard]] sandbox::preparer& preparer() noexcept { return *preparer_; }
  // A second preparer over the same state root whose sessions launch cold (a helper started
  // per launch: launch_settings::warm_helper false, as EVALBOX_WARM_HELPER=0 sets it).
  [[nodiscard]] sandbox::preparer& cold_preparer();
  // A request shaped like an agent run: /bin/true, a managed home with a config file, one
  // credential lease, network none, Landlock on, limits large enough for the large workspace.
  [[nodiscard]] sandbox::session_request request(const std::filesystem::path& workspace,
                                                 sandbox::workspace_strategy strategy) const;
  [[nodiscard]] sandbox::secret_mount secret() const;
  // The test image `name` (tests/images/make-images busybox|debian: built once and cached),
  // imported into this state root once per process; the request above with it as the root.
  result<sandbox::image_summary> image(const std::string& name);
  [[nodiscard]] sandbox::session_request image_request(const std::filesystem::path& workspace,
                                                       const sandbox::image_summary& image) const;

 private:
  temp_dir tmp_;
  std::unique_ptr<sandbox::preparer> preparer_;
  std::unique_ptr<sandbox::preparer> cold_preparer_;
  std::map<std::string, sandbox::image_summary> images_;
};

// A run id unique within this process.
std::string next_run_id(std::string_view prefix);

struct child_result {
  int status = -1;  // waitpid status
  rusage usage{};   // of the child and the descendants it waited for
};

// Starts argv (argv[0] an absolute path) with posix_spawn — a vfork, no copy of the benchmark's
// page tables, as hyperfine starts a command — its standard streams on /dev/null; waits.
child_result run_child(const std::vector<std::string>& argv,
                       const std::vector<std::string>& extra_env = {});

// Mounts a tmpfs of `bytes` at `dir` (created if missing); unmounts in the destructor.
class tmpfs_mount {
 public:
  tmpfs_mount(const std::filesystem::path& dir, uint64_t bytes);
  ~tmpfs_mount();
  tmpfs_mount(const tmpfs_mount&) = delete;
  tmpfs_mount& operator=(const tmpfs_mount&) = delete;
  [[nodiscard]] bool ok() const noexcept { return ok_; }

 private:
  std::filesystem::path dir_;
  bool ok_ = false;
};

}  // namespace evalbox::bench
