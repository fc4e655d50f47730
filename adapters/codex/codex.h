// adapter: codex — the Codex CLI (`codex exec --json`) run unchanged inside the sandbox.
//
//   - id: codex
//     adapter: codex
//     binary: /opt/codex/bin/codex  # default: <agent cache>/codex-<pinned>/bin/codex
//     model: gpt-5-codex
//     effort: high                  # model_reasoning_effort
//     provider: {base_url: "http://127.0.0.1:8080/v1", env_key: STUB_KEY, wire_api: responses}
//     api_key_env: OPENAI_API_KEY   # a host variable whose value is passed in (never logged)
//     auth_file: codex-login        # or: a handle from the suite's credentials (auth.json)
//     codex_sandbox: workspace-write  # | read-only | bypass
//
// The home gets CODEX_HOME=/home/agent/.codex with a generated config.toml; auth.json is a
// credential lease there. docs/agents.md documents every setting.
#pragma once

#include <memory>

#include "harness/agent/adapter.h"

namespace evalbox::adapters::codex {

inline constexpr std::string_view codex_pinned_version = "0.171.0";

std::unique_ptr<harness::adapter> make_adapter();

}  // namespace evalbox::adapters::codex
