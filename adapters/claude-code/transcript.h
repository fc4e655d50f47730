// Claude Code's `claude -p --output-format stream-json --verbose` stream, normalized into an
// evalbox transcript.
//
// Mapping (docs/transcript.md has the details): each assistant message (by message.id) is one
// agent step; tool_result blocks in user events attach to the step holding the matching
// tool_use id; the `result` event gives the totals and the verdict on errors. Claude Code
// reports an upstream HTTP 500 as `result` with subtype "success" but is_error true, so
// is_error (not subtype) decides; a killed client writes no `result`.
#pragma once

#include <string_view>

#include "harness/transcripts/transcript.h"

namespace evalbox::adapters::claude_code {

// Never fails on content: garbage lines and unknown event or block types are counted.
result<harness::transcript> parse_claude_stream_json(std::string_view jsonl);

}  // namespace evalbox::adapters::claude_code
