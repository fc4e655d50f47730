// Every sandbox::session_request the harness makes, built in one place: an attempt at a run
// (make_session_request: the fixture, the candidate's agent plan, the suite's limits) and a
// command in a throwaway sandbox over a host directory and/or an image (make_exec_request:
// `evalbox sandbox exec|shell`). Both see an image the same way: its Env under the managed
// home, its WorkingDir as the workspace when no host directory is given.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "base/error.h"
#include "harness/agent/adapter.h"
#include "harness/config/spec.h"
#include "harness/runner/caches.h"
#include "sandbox/prepare/preparer.h"
#include "sandbox/spec/request.h"

namespace evalbox::harness {
inline namespace runner {

// What the session request of one attempt is made from.
struct request_inputs {
  const fixture_spec& fixture;
  const candidate_spec& candidate;
  const agent_plan& plan;
  const limits_spec& suite_limits;  // the suite's defaults, under the fixture's own
  std::string session_id;           // names the run directory and cgroups (host-wide)
  // Never visible to the agent: the options' roots and the results root.
  std::vector<std::filesystem::path> protected_roots;
  std::string bin_digest;  // tree digest of the fixture's bin/, when it has one
  // The fixture's environment image as the store resolved it; null: the host's root.
  const sandbox::image_summary* image = nullptr;
  // The fixture's bundles as the bundle store holds them (preparer::resolve_bundle), in the
  // order of fixture.bundles; null when it has none.
  const std::vector<sandbox::bundle>* stored_bundles = nullptr;
  // The fixture's caches as the cache store holds them (caches.h), in the order of
  // fixture.caches; null when it has none.
  const std::vector<cache_use>* caches = nullptr;
};

// The environment every launch of a run starts from: base_environment(), then the image's Env
// (its PATH after /evalbox/bin; HOME stays the managed home), when there is an image.
std::map<std::string, std::string> run_environment(const sandbox::image_summary* image);

// Where the run's workspace is seen: /workspace for a fixture with workspace/, else the
// fixture's environment.workdir, else the image's WorkingDir (/workspace when it has none).
std::filesystem::path workspace_target(const fixture_spec& fixture,
                                       const sandbox::image_summary* image);

// The phase "request": the plan's argv, environment (the base environment, then the plan's,
// then the candidate's), home (with the candidate's home_files read in), leases, bundles
// (the fixture's bin/ at /evalbox/bin, its `bundles:` from the store), named mounts, limits
// and network, and the roots the agent must never see — the grader files always, the
// fixture's solution unless the plan runs it. An error when a home file cannot be read, or
// when the fixture has bundles the store was not asked for.
result<sandbox::session_request> make_session_request(const request_inputs& in);

// Until when the preparer accepts the request: an hour plus four times the wall limit from
// now, room for the setup, agent, follow-up and grading launches of one attempt.
std::chrono::system_clock::time_point authorized_until(const sandbox::resource_limits& limits);

// The fixture's limits over the suite's defaults, as the sandbox enforces them.
sandbox::resource_limits effective_limits(const limits_spec& suite, const fixture_spec& f);

// A fixture's or candidate's network as the sandbox's policy.
sandbox::network_policy to_policy(const network_spec& n);

// What a command in a throwaway sandbox is made of (`evalbox sandbox exec|shell`).
struct exec_request_inputs {
  std::string session_id;         // names the run directory and cgroups (host-wide)
  std::vector<std::string> argv;  // argv[0] already resolved to an absolute path
  // The host directory seen at /workspace (copy-on-write; never modified). Empty: the image's
  // working directory is the workspace.
  std::filesystem::path workspace;
  const sandbox::image_summary* image = nullptr;  // the root; null: the host's
  // Variables of the caller's environment passed through (TERM, LANG, ...), over the image's.
  std::map<std::string, std::string> passed_env;
  sandbox::resource_limits limits;
  sandbox::network_policy network;
  bool landlock = true;
};

// The request of a command in a throwaway sandbox: a minimal PATH, HOME and USER, the image's
// Env (HOME excepted) and then `passed_env`; an empty managed home; the workspace as above.
// An invalid_argument error without a command, or with neither a workspace nor an image.
result<sandbox::session_request> make_exec_request(const exec_request_inputs& in);

}  // namespace runner
}  // namespace evalbox::harness
