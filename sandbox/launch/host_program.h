// Host programs that evalbox itself runs outside any sandbox, on inputs it has vetted: git,
// which fetches a fixture's repository into the state directory (harness/fixture/
// git_source.cpp), a suite's `command` judge (harness/judge/client.cpp), which reads its
// request on stdin, podman or buildah for a Harbor task's image (harness/fixture/
// harbor_images.cpp) and sbatch for `evalbox slurm --submit` (harness/cli/cmd_slurm.cpp). The
// one spawner of such programs: posix_spawn, then an owned_process (sandbox/sys/process.h)
// that kills the program on every path that leaves it behind. The caller sees plain data.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"
#include "sandbox/sys/process.h"

namespace evalbox::sandbox {
inline namespace launch {

// Where one of the program's output streams goes.
enum class host_output {
  capture,  // into host_program_result::output; both captured: merged, in the order written
  log,      // appended to host_program::log
  inherit,  // evalbox's own (the terminal of the person who runs it)
  discard,  // /dev/null
};

struct host_program {
  std::vector<std::string> argv;  // argv[0] is looked up on the PATH of the program's environment
  // The whole environment of the program: nothing of evalbox's own is inherited, so that no
  // variable of the invoking user's (GIT_DIR, a config path, a proxy) steers it.
  std::map<std::string, std::string> env;
  // True: evalbox's own environment instead, with `env` set over it (podman, sbatch: the user's
  // own tools, configured by the user's variables).
  bool inherit_env = false;
  std::filesystem::path cwd;  // empty: evalbox's working directory
  // stdin: this text (written to a memory file first, so a program that writes before it
  // reads cannot deadlock); unset: /dev/null.
  std::optional<std::string> input;
  host_output stdout_to = host_output::capture;
  host_output stderr_to = host_output::capture;
  std::filesystem::path log;      // the file host_output::log appends to (created 0644 if missing)
  size_t max_output = 64u << 10;  // the tail of the captured output kept
  // True: the program leads a process group of its own, and when it ends, what remains of that
  // group is killed (SIGKILL). False: it stays in evalbox's group, so that Ctrl-C at the
  // terminal reaches it as it reaches evalbox.
  bool own_process_group = true;
  // Unset: wait for the end. Set: past it, the program (its whole process group when it has
  // its own) is killed (SIGKILL) and the result says timed_out.
  std::optional<std::chrono::milliseconds> timeout;
};

struct host_program_result {
  int exit_code = -1;  // -1 with signal set: killed by a signal
  int signal = 0;
  std::string output;  // the last max_output bytes of the streams sent to capture
  bool timed_out = false;
  [[nodiscard]] bool ok() const { return exit_code == 0 && !timed_out; }
};

// Runs the program to its end (or its timeout) with stdin at /dev/null or `input`, every fd
// of evalbox's above stderr closed, an empty signal mask and default signal dispositions.
// Errors only when it cannot be started (a program not found on PATH is not_found); what it
// did (its exit status and output) is the result.
result<host_program_result> run_host_program(const host_program& program);

// A program started and left running, for a caller that talks to it and waits for it itself
// (the launcher's sandbox helper, which reads its plan from a socket and may wait for minutes).
struct host_process {
  std::filesystem::path exe;      // run as named: no PATH lookup
  std::vector<std::string> args;  // after argv[0], which is `exe`
  // Fds of evalbox's made the program's (dup2: close-on-exec cleared), as {fd, target}; every
  // other fd above stderr is closed.
  std::vector<std::pair<int, int>> fds;
  bool stdin_null = true;  // false: evalbox's stdin (an interactive shell's terminal)
};

// Starts it with evalbox's environment, stdout and stderr, process group, signal mask and
// dispositions — the sandbox helper relies on the mask: it starts with the termination signals
// blocked as every thread of the harness has them, and holds them for its signalfd. The result
// kills and reaps the program unless it is waited for.
result<sys::owned_process> start_host_process(const host_process& process);

// `name` as run_host_program finds it: itself when it holds a slash, else the first executable
// regular file of that name in the directories of `path` (a PATH value; unset: evalbox's own
// PATH, or /usr/bin:/bin without one). Empty when there is none.
std::filesystem::path find_host_program(std::string_view name,
                                        std::optional<std::string_view> path = std::nullopt);

}  // namespace launch
}  // namespace evalbox::sandbox
