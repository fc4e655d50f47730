// The normalized transcript as an ATIF trajectory (Agent Trajectory Interchange Format v1.4,
// Harbor's RFC 0001): what every run writes as runs/<id>/trajectory.json, so that tools built
// for Harbor's trajectories (viewers, SFT and RL pipelines) read evalbox's runs as they are.
// docs/run-record.md lists the mapping field by field.
#pragma once

#include <string>
#include <string_view>

#include "base/json.h"
#include "harness/transcripts/transcript.h"

namespace evalbox::harness {
inline namespace transcripts {

inline constexpr std::string_view atif_schema_version = "ATIF-v1.4";

struct atif_context {
  std::string run_id;         // the session id when the client reported none
  std::string agent_name;     // the candidate's adapter when the transcript names no agent
  std::string agent_version;  // the client's version when known, else "unknown"
  std::string candidate;      // the candidate id (agent.extra)
  // The fixture's prompt: the trajectory's first step (source "user") when the transcript
  // does not begin with one, as a reader of a trajectory expects the instruction first.
  std::string prompt;
};

// The trajectory of `t`. Fields ATIF has no place for (an observation's exit code, counts of
// unknown events) go to the `extra` objects ATIF provides; unknown usage is left out, never 0.
json to_atif(const transcript& t, const atif_context& context);

}  // namespace transcripts
}  // namespace evalbox::harness
