// The adapter interface: how one agent runtime (Codex CLI, Claude Code, a scripted command,
// the fixture's own solution) is translated into a sandbox session and how its native output
// becomes the normalized transcript. Implementations live in adapters/<name>/; only the
// composition root (harness/cli) names them.
//
// Lifecycle per run: validate() once per suite load → plan() before preparation → the
// sandbox runs the plan's argv (and plan_follow_up()'s, when the fixture has a follow-up) →
// read_transcript() after the agent's processes are gone.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "harness/config/spec.h"
#include "harness/transcripts/transcript.h"
#include "sandbox/spec/request.h"

namespace evalbox::harness {
inline namespace agent {

// The run's model gateway, when its candidate has one (docs/agents.md, "The model gateway"):
// the adapter points its client at `base_url` with `placeholder` as its key, and leases no API
// key into the sandbox.
struct gateway_endpoint {
  std::string base_url;     // http://127.0.0.1:PORT[/prefix]
  std::string placeholder;  // worthless outside this run
};

// What an adapter knows about the run it plans.
struct run_context {
  const fixture_spec& fixture;
  const candidate_spec& candidate;
  int trial = 0;
  std::string run_id;
  // Suite credential handles → host source files (the candidate may lease some of them).
  const std::map<std::string, std::filesystem::path>& credentials;
  const gateway_endpoint* gateway = nullptr;  // set for a candidate with a gateway
};

// What the adapter asks of the sandbox for one agent launch.
struct agent_plan {
  std::vector<std::string> argv;           // argv[0]: an absolute host path
  std::map<std::string, std::string> env;  // added to the harness's base environment
  sandbox::home_layout home;
  std::vector<sandbox::secret_mount> secrets;
  std::vector<std::filesystem::path> readonly_paths;  // e.g. an npm prefix
  // Host paths mounted read-only elsewhere (host_client.h: the host's loader in an image).
  std::vector<sandbox::bind_mount> host_binds;
  // Programs the client runs from the root (its shell), of which the root must have one: an
  // image with none of them is refused before the run, saying `needs_why` (host_client.h).
  std::vector<std::string> needs_any_of;
  std::string needs_why;
  std::vector<sandbox::bundle> bundles;  // e.g. the oracle's solution
  // Where the client reads user skills, relative to the managed home (harness::add_skills):
  // a Harbor task's skills_dir is copied there before the agent starts. Empty: the client
  // takes no skills.
  std::filesystem::path skills_dir;
  std::optional<std::string> stdin_data;  // else /dev/null
  bool landlock = true;                   // off when the agent's own sandbox must mount
  // The plan runs the fixture's reference solution (solution/, e.g. from a bundle): the only
  // plan for which the runner leaves that directory out of the protected roots.
  bool runs_fixture_solution = false;
  // The program is a host-side loop (adapter: loop): it runs in a sandbox of its own and drives
  // the run's task through a session (EVALBOX_SESSION), which the runner starts for it.
  bool drives_session = false;
  // How read_transcript() should treat stdout: the raw bytes are always kept as native/.
  std::string stdout_name = "stdout.txt";
  // The client's version when the adapter knows it (its pinned client from the agent cache):
  // trajectory.json's agent.version. Empty: "unknown".
  std::string client_version;
};

// Where a finished launch left its output (host paths).
struct agent_output {
  std::filesystem::path stdout_path;
  std::filesystem::path stderr_path;
  std::filesystem::path home_dir;    // the managed home after the run (native session files)
  std::filesystem::path native_dir;  // runs/<id>/native: copy native files worth keeping here
  int exit_code = 0;                 // the agent's exit status (exited outcome)
  bool exited = true;                // false: killed (timed out, signaled, limit)
};

class adapter {
 public:
  virtual ~adapter() = default;
  [[nodiscard]] virtual std::string_view id() const = 0;
  // Rejects unknown or ill-typed candidate settings, each with its file:line:col.
  [[nodiscard]] virtual std::vector<config_error> validate(const candidate_spec& c) const = 0;
  virtual result<agent_plan> plan(const run_context& ctx) const = 0;
  // The launch for the fixture's follow_up prompt (resuming the same session), or nullopt
  // when this adapter has nothing to do for it.
  virtual result<std::optional<agent_plan>> plan_follow_up(const run_context& ctx,
                                                           const agent_output& first) const {
    (void)ctx;
    (void)first;
    return std::optional<agent_plan>{};
  }
  // The normalized transcript of the whole run (all launches), from the native output.
  virtual result<transcript> read_transcript(const run_context& ctx,
                                             const std::vector<agent_output>& outputs) const = 0;
};

// Adapter lookup, filled by the composition root.
class adapter_registry {
 public:
  void add(std::unique_ptr<adapter> a);
  [[nodiscard]] const adapter* find(std::string_view id) const;
  [[nodiscard]] std::vector<std::string> ids() const;

 private:
  std::vector<std::unique_ptr<adapter>> adapters_;
};

// Shared by adapters: `{prompt}` substituted in each argument.
std::vector<std::string> substitute_prompt(const std::vector<std::string>& argv,
                                           std::string_view prompt);
// An error for an unknown setting key, listing the known ones.
config_error unknown_setting(const candidate_spec& c, const std::string& key,
                             const std::vector<std::string>& known);

// A program setting's argv[0] (`command`, `loop`): an absolute host path as it is; a relative
// path with a '/' against the suite file's directory; a bare name as it is — the sandbox looks
// it up on its own PATH when the program starts, never on the PATH of whoever runs evalbox.
// Nothing for an empty name.
std::optional<std::filesystem::path> resolve_program(const std::string& name,
                                                     const std::filesystem::path& suite_file);
// The errors of a candidate's `argv` setting (required, a non-empty list of strings whose
// program is an executable file when it is a path); `example` shows a good one.
std::vector<config_error> validate_argv(const candidate_spec& c, std::string_view example);
// `argv` of a valid candidate, its program resolved and `{prompt}` substituted.
result<std::vector<std::string>> planned_argv(const candidate_spec& c, std::string_view prompt);

}  // namespace agent
}  // namespace evalbox::harness
