// adapter: gemini — Gemini CLI (`gemini -p --output-format stream-json`) run unchanged inside
// the sandbox.
//
//   - id: gemini
//     adapter: gemini
//     binary: /opt/gemini/bin/gemini     # default: <agent cache>/gemini-<pin>/bin/gemini
//     model: gemini-2.5-flash            # without it the client routes through "auto"
//     base_url: "http://127.0.0.1:8080"  # GOOGLE_GEMINI_BASE_URL
//     api_key_env: GEMINI_API_KEY        # a host variable, its value passed in (never logged)
//     approval_mode: yolo                # default; auto_edit | default | plan
//
// The home gets ~/.gemini/settings.json (API-key auth, telemetry, usage statistics and
// auto-update off). docs/agents.md documents every setting.
#pragma once

#include <memory>
#include <string_view>

#include "harness/agent/adapter.h"

namespace evalbox::adapters::gemini {

inline constexpr std::string_view gemini_pinned_version = "0.61.0";

std::unique_ptr<harness::adapter> make_adapter();

}  // namespace evalbox::adapters::gemini
