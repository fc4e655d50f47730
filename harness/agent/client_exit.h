// How the launches of an agent CLI client (Codex, Claude Code, Gemini) become the run's
// transcript, the same way for every adapter that drives one: each launch's exit is explained
// in its transcript, the launches are merged in order, and the result never shows a final
// answer beside an error.
//
// Why: the parsers only see a stream that stops. A client that exits non-zero before its first
// event (bad config, no credentials) wrote its reason to stderr; a client killed by a limit or a
// signal leaves a stream without a final event. Either way the run is an execution error with
// words a person can act on, never a task failure (docs/agents.md, "Outcomes").
//
// Lifecycle: called from adapter::read_transcript, after the agent's processes are gone.
#pragma once

#include <cstddef>
#include <functional>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "harness/agent/adapter.h"
#include "harness/transcripts/transcript.h"

namespace evalbox::harness {
inline namespace agent {

// How many of a client's last stderr lines an exit explanation quotes.
inline constexpr size_t client_stderr_lines = 5;

// What the explanations need to know about one client.
struct agent_client {
  std::string_view name;  // as messages name it: "codex", "claude", "gemini"
  // Which stderr lines say something about the run; the client's own chatter on every run
  // ("Reading additional input from stdin...") is left out. Empty lines never count.
  std::function<bool(std::string_view line)> keep_stderr_line;
};

// Explains in `t` (the transcript of `launch`'s output) how the launch ended, when the stream
// did not finish:
// - exited non-zero, and the parser found no error beyond an interruption: "<name> exited with
//   status N: <its last stderr lines, joined with ' | '>", or without the colon part when stderr
//   says nothing and there is no error at all;
// - killed (timed out, signaled, a limit): "<name> was killed before it finished (<the error so
//   far, or 'no final event'>)";
// - any other unfinished stream without an error: "<name> stopped without a final event".
// A completed transcript is left as it is.
void explain_client_exit(transcript& t, const agent_output& launch, const agent_client& client);

// Appends the transcript of the next launch (a follow-up resumes the session) to the run's:
// steps and usage add up, counts add up, the first error and the first session id are kept,
// the latest model, final message (when the launch gave one) and completion win.
void merge_launch(transcript& run, transcript launch);

// The run's transcript from the launches of a client whose streams are parsed one by one
// (Codex, Gemini): `parse` reads one launch's output, whose exit is explained before it is
// merged. Named `agent`. finish_run_transcript is the caller's, after additions of its own.
result<transcript> merge_launches(
    std::string_view agent, const std::vector<agent_output>& outputs, const agent_client& client,
    const std::function<result<transcript>(const agent_output& launch)>& parse);

// The run's transcript once every launch is merged: no final message beside an error (an
// answer cut off by a failure is not one), steps numbered 0..n-1.
void finish_run_transcript(transcript& run);

}  // namespace agent
}  // namespace evalbox::harness
