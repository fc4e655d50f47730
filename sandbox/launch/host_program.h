// Host programs that evalbox itself runs outside any sandbox, on inputs it has vetted: today
// git, which fetches a fixture's repository into the state directory (harness/fixture/
// git_source.cpp). Boost.Process lives in the .cpp file; the caller sees plain data.
#pragma once

#include <filesystem>
#include <map>
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
};

struct host_program_result {
  int exit_code = -1;  // -1 with signal set: killed by a signal
  int signal = 0;
  std::string output;  // the last max_output bytes of stdout+stderr
  [[nodiscard]] bool ok() const { return exit_code == 0; }
};

// Runs the program to its end with stdin at /dev/null. Errors only when it cannot be started;
// what it did (its exit status and output) is the result.
result<host_program_result> run_host_program(const host_program& program);

}  // namespace evalbox::sandbox
