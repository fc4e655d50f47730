// The evalbox.events.v1 JSONL format that a `command` agent may print on stdout, and its
// parser into the normalized transcript. docs/transcript.md has the event list.
//
//   {"type":"header","schema":"evalbox.events.v1","session_id":"...","model":"..."}  optional
//   {"type":"message","role":"assistant","text":"..."}          role: assistant|user|system
//   {"type":"reasoning","text":"..."}
//   {"type":"tool_call","id":"c1","tool":"shell","input":{"command":"..."}}
//   {"type":"tool_result","id":"c1","exit_code":0,"output":"...","is_error":false}
//   {"type":"usage","input_tokens":120,"output_tokens":40,"cost_usd":0.01}
//   {"type":"error","message":"..."}                            an upstream/client failure
//   {"type":"final","text":"..."}                               the run ended normally
#pragma once

#include <string_view>

#include "harness/transcripts/transcript.h"

namespace evalbox::harness {
inline namespace transcripts {

inline constexpr std::string_view events_schema = "evalbox.events.v1";

struct events_options {
  // When true, a stream without a "final" event is incomplete (completed=false, error set).
  // A command adapter whose scripts never print "final" turns this off and judges completion
  // by the exit status instead.
  bool require_final = true;
};

// Never fails on content: garbage lines count in malformed_lines, unknown types in
// unknown_events. Fails only on a header naming another schema.
result<transcript> parse_evalbox_events(std::string_view jsonl, events_options options = {});

}  // namespace transcripts
}  // namespace evalbox::harness
