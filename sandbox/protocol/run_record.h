// The run record: what one launch in the sandbox did (schema evalbox.run-record.v1, see
// docs/run-record.md). An outcome is data about the program; `error` is set only when the
// sandbox or host failed, and then the outcome is meaningless.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/json.h"

namespace evalbox::sandbox {
inline namespace protocol {

enum class outcome_kind {
  exited,        // the main process exited; exit_code is set
  signaled,      // killed by a signal it did not get from evalbox; signal is set
  timed_out,     // wall-time limit reached, the whole run killed
  cpu_limit,     // CPU-time limit reached
  oom_killed,    // the memory limit's OOM killer killed a process of the run (oom_kills > 0)
  output_limit,  // stdout+stderr passed output_bytes; output ends with a truncation marker
  cancelled,     // the caller stopped it (SIGINT/SIGTERM to the harness)
};

std::string_view to_string(outcome_kind kind) noexcept;

struct connection_attempt {
  std::string target;  // "127.0.0.1:8080" or "api.example.com:443"
  bool allowed = false;
  std::string via;     // "relay" | "proxy"
  std::string detail;  // refusal reason or connect error
};

struct run_record {
  // Outcome (valid when error is empty).
  outcome_kind outcome = outcome_kind::exited;
  int exit_code = 0;
  int signal = 0;
  // Measurements.
  uint64_t wall_ms = 0;
  uint64_t cpu_ms = 0;
  uint64_t peak_memory_bytes = 0;
  uint64_t output_bytes = 0;      // bytes the program wrote to stdout+stderr (kept or not)
  bool output_truncated = false;  // the captured output ends with the truncation marker
  bool pids_limit_hit = false;    // a fork was refused by the pids limit
  // Processes of the run the OOM killer killed (the main process or any other): more than 0
  // makes the outcome oom_killed, whatever the main process did afterwards.
  uint64_t oom_kills = 0;
  // The run's disk (the tmpfs of the workspace and home) had no free block at a sample: writes
  // were refused with ENOSPC (docs/run-record.md says when it is sampled).
  bool disk_limit_hit = false;
  // Mechanisms in force.
  json mechanisms = json::object();  // user_ns, landlock_abi, seccomp_digest, cgroup, network
  std::string binding_digest;
  std::vector<connection_attempt> connections;
  // Sandbox failure: "{step}: {errno}: message". Empty when the sandbox worked.
  std::string error;
  std::string error_step;

  [[nodiscard]] bool ok() const noexcept { return error.empty(); }
  [[nodiscard]] json to_json() const;  // includes "schema": "evalbox.run-record.v1"
  // Parses a record; an error (invalid_argument) names what is wrong: another schema, a
  // missing or mistyped field, an unknown outcome.
  static result<run_record> from_json(const json& j);
};

}  // namespace protocol
}  // namespace evalbox::sandbox
