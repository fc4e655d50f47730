// adapter: claude-code — Claude Code (`claude -p --output-format stream-json`) run unchanged
// inside the sandbox.
//
//   - id: claude
//     adapter: claude-code
//     binary: /opt/claude/bin/claude     # default: <agent cache>/claude-<pin>/bin/claude
//     model: claude-sonnet-4-5
//     base_url: "http://127.0.0.1:8080"  # ANTHROPIC_BASE_URL
//     api_key_env: ANTHROPIC_API_KEY     # a host variable, its value passed in (never logged)
//     credentials_file: claude-login     # or: a suite credential (.credentials.json)
//     permission_mode: bypass            # default; acceptEdits|auto|default|dontAsk|plan
//     allowed_tools: [Bash, Edit]        # --allowedTools (then mode `default` unless set)
//
// The home gets CLAUDE_CONFIG_DIR=/home/agent/.claude; the credentials file is a lease there.
// docs/agents.md documents every setting.
#pragma once

#include <memory>
#include <string_view>

#include "harness/agent/adapter.h"

namespace evalbox::adapters::claude_code {

inline constexpr std::string_view claude_code_pinned_version = "2.1.197";

std::unique_ptr<harness::adapter> make_adapter();

}  // namespace evalbox::adapters::claude_code
