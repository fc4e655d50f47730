// Gemini CLI's `gemini -p --output-format stream-json` stream, normalized into an evalbox
// transcript (observed: @google/gemini-cli 0.61.0).
//
// Events: `init` (session_id, model), `message` (role user | assistant; assistant text arrives
// in `delta` pieces), `tool_use` (tool_name, tool_id, parameters), `tool_result` (tool_id,
// status success | error, output, error.message), `result` (status, stats with token counts
// and duration_ms). Assistant text and the tool calls that follow it form one agent step; a
// tool_result attaches to the step holding its tool_id. Gemini CLI reports no exit code for
// shell commands (a failing command is `status: success` with the error text as output), so
// exit_code stays null. No `result` event means the client was stopped.
#pragma once

#include <string_view>

#include "harness/transcripts/transcript.h"

namespace evalbox::adapters::gemini {

// Never fails on content: garbage lines and unknown event types are counted.
result<harness::transcript> parse_gemini_stream_json(std::string_view jsonl);

}  // namespace evalbox::adapters::gemini
