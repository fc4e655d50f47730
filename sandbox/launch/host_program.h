// Host programs that evalbox itself runs outside any sandbox, on inputs it has vetted: git,
// which fetches a fixture's repository into the state directory (harness/fixture/
// git_source.cpp), and a suite's `command` judge (harness/judge/client.cpp), which reads its
// request on stdin. Boost.Process lives in the .cpp file; the caller sees plain data.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sandbox/base/error.h"

namespace evalbox::sandbox {

struct host_program {
  std::vector<std::string> argv;  // argv[0] is looked up on the PATH in `env` (or the host's)
  // The whole environment of the program: nothing of evalbox's own is inherited, so that no
  // variable of the invoking user's (GIT_DIR, a config path, a proxy) steers it.
  std::map<std::string, std::string> env;
  std::filesystem::path cwd;      // empty: evalbox's working directory
  size_t max_output = 64u << 10;  // the output's tail kept, stdout and stderr merged
  // stdin: this text (written to a memory file first, so a program that writes before it
  // reads cannot deadlock); unset: /dev/null.
  std::optional<std::string> input;
  bool stdout_only = false;  // output is stdout alone; stderr goes to /dev/null
  // Unset: wait for the end. Set: past it, the program's process group is killed (SIGKILL)
  // and the result says timed_out.
  std::optional<std::chrono::milliseconds> timeout;
};

struct host_program_result {
  int exit_code = -1;  // -1 with signal set: killed by a signal
  int signal = 0;
  std::string output;  // the last max_output bytes of stdout+stderr (or stdout alone)
  bool timed_out = false;
  [[nodiscard]] bool ok() const { return exit_code == 0 && !timed_out; }
};

// Runs the program to its end (or its timeout) with stdin at /dev/null or `input`, in a process
// group of its own. Errors only when it cannot be started;
// what it did (its exit status and output) is the result.
result<host_program_result> run_host_program(const host_program& program);

}  // namespace evalbox::sandbox
