// The wire between a session's host side (sandbox/live) and pid 1 of its sandbox in serve mode
// (launch_plan::serve): fixed-size records over a stream socket pair, descriptors attached with
// SCM_RIGHTS to the record they belong to. Both ends are evalbox's own, but pid 1 still bounds
// and checks everything it reads: a session's host side is a program, not a trusted constant.
//
//   host -> pid 1   request{exec} + payload (argv, env, cwd), stdin/stdout/stderr attached
//                   (none with a terminal: pid 1 makes one from the sandbox's devpts)
//                   request{signal}: the exec's process group gets `signal`
//   pid 1 -> host   event{ready} once, the sandbox's root directory (O_PATH) attached
//                   event{started} (the terminal's master attached with a terminal)
//                   event{failed}: a step of the exec's process failed (`value` errno, `step`
//                   its op), nothing runs
//                   event{exited}: the exec's process ended (`value`: its wait status)
//
// End of file on the socket ends the session: pid 1 exits and the kernel kills every process
// of the sandbox.
#pragma once

#include <cstddef>
#include <cstdint>

namespace evalbox::sandbox::serve_wire {

inline constexpr uint32_t magic = 0x31584245;  // "EBX1"

enum class request_kind : uint32_t { exec = 1, signal = 2 };

inline constexpr uint32_t flag_tty = 1;

struct request {
  uint32_t magic = serve_wire::magic;
  request_kind kind = request_kind::exec;
  uint64_t id = 0;              // the host side's name for the exec
  uint32_t payload_bytes = 0;   // exec: follows the record
  uint32_t argc = 0;            // exec: argv strings, each NUL-terminated, first in the payload
  uint32_t envc = 0;            // exec: then "NAME=value" strings over the session's environment
  int32_t signal = 0;           // signal: the signal
  uint32_t flags = 0;           // exec: flag_tty
  uint16_t rows = 0, cols = 0;  // exec with a terminal: its window size (0: the kernel's)
};                              // then the working directory, NUL-terminated

// What pid 1 accepts: the payload of one exec (argv, environment and directory together, as
// the kernel's own ARG_MAX bounds them) and the strings in it.
inline constexpr uint32_t max_payload = 4u << 20;
inline constexpr uint32_t max_strings = 32768;

enum class event_kind : uint32_t { ready = 1, started = 2, failed = 3, exited = 4 };

// Which step of an exec failed (event::step).
enum class failed_step : int32_t {
  request = -1,  // none ran: the request itself (EINVAL), no slot (EAGAIN), no terminal
  chdir = 1,     // its working directory
  exec = 2,      // execve: the program is not there (ENOENT), not executable (EACCES), ...
  other = 3,     // a fence (Landlock, seccomp, capabilities, stdio): the sandbox's failure
};

struct event {
  event_kind kind = event_kind::ready;
  int32_t value = 0;  // started: the pid inside; failed: errno; exited: the wait status
  int32_t step = 0;   // failed: failed_step
  uint32_t reserved = 0;
  uint64_t id = 0;
};

}  // namespace evalbox::sandbox::serve_wire
