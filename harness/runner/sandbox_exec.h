// `evalbox sandbox exec|shell` below the command line: a command (or a shell) in a throwaway
// sandbox over a host directory and/or an image — the image resolved (imported first if
// needed), the request made (request.h: make_exec_request), the session prepared, launched and
// torn down, the run record kept when asked — and the exit status that says how it ended,
// after timeout(1) and env(1). The caller owns the process: it shows the lines said, turns
// SIGINT into `stop_import` while an image is imported, and launches (with its own signal
// handling, or a terminal for the shell).
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "sandbox/launch/launcher.h"
#include "sandbox/prepare/preparer.h"
#include "sandbox/protocol/run_record.h"
#include "sandbox/spec/request.h"

namespace evalbox::harness {
inline namespace runner {

// Exit statuses of `sandbox exec` besides the program's own (exit_status.h has the rest).
inline constexpr int exit_timed_out = 124;      // the wall-time limit killed it (timeout(1))
inline constexpr int exit_sandbox_error = 125;  // the sandbox itself failed (env(1))
inline constexpr int exit_not_found = 127;      // the command is not there (a shell's)

// What `evalbox sandbox exec|shell` was asked, as typed (limits and network still text: their
// errors name the option).
struct exec_options {
  std::string workspace;  // a host directory seen at /workspace; empty: the image's WorkingDir
  std::string image;      // an image reference; empty: the host's root
  std::string network = "none";
  std::string memory = "2GiB";
  std::string wall = "10m";
  std::string cpu = "10m";
  std::string disk = "1GiB";
  uint64_t pids = 512;
  bool landlock = true;
  std::string state_dir;  // empty: default_preparer_options()
  std::string record;     // where to write the run record; empty: none is kept
  std::vector<std::string> command;
  bool interactive = false;  // the shell: the launch is labelled "shell", not "exec"
};

// How the caller shows and launches.
struct exec_hooks {
  std::function<void(const std::string&)> say;  // one line for the user (stderr)
  // Called with true before an image is imported and with false after: the caller turns
  // SIGINT into *stop_import meanwhile (the import then keeps no partial layer).
  std::function<void(bool importing)> importing;
  const std::atomic<bool>* stop_import = nullptr;
  // The launch in the prepared session (its label set); the caller's signal handling around it.
  std::function<result<sandbox::run_record>(const sandbox::prepared_session&,
                                            sandbox::launch_options)>
      launch;
};

struct exec_outcome {
  int exit_code = 0;
  std::optional<sandbox::run_record> record;  // when the launch produced one
};

// --network: none, allow:HOST:PORT[,HOST:PORT...] or unsafe-host.
result<sandbox::network_policy> parse_exec_network(const std::string& text);

// The program's exit status for a run record whose program ran: its own exit code; 128+N when
// killed by signal N (SIGXCPU for the CPU limit, SIGKILL for memory, SIGPIPE for output); 124
// for the wall limit; 130 when cancelled.
int exit_code_for(const sandbox::run_record& rec);

// The exit status of any run record: a program that is not in the sandbox is 127 (the
// command's mistake, as a shell says), another sandbox error 125, else exit_code_for.
int exec_exit_status(const sandbox::run_record& rec);

// What is said on the way out for that record ("killed: wall-time limit of 10m reached",
// "sandbox error: ..."), or nothing when the program simply ended.
std::optional<std::string> exec_ending_line(const exec_options& options,
                                            const sandbox::run_record& rec);

// Runs options.command (argv[0] with a '/' is a host file, made absolute; a bare name is looked
// up on the sandbox's own PATH) and says why it stopped early. Every failure has its exit
// status: 64 for a usage error (neither --workspace nor --image, a bad limit or image
// reference), 130 when the import was interrupted, 127 and 125 as above.
exec_outcome exec_in_sandbox(const exec_options& options, const exec_hooks& hooks);

}  // namespace runner
}  // namespace evalbox::harness
