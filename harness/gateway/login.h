// A subscription login served by the model gateway (docs/agents.md, "Logins"): the run's lease of
// a login file stays on the host, and each upstream request is authenticated with the access
// token it holds — refreshed here, on the host, when it is about to expire or the upstream
// refuses it, the new tokens written back into the lease so that the next run gets them (a
// refresh token is single-use: a rotation lost is a login lost).
//
// Two logins are known: Claude's OAuth credentials (`.credentials.json`, `claudeAiOauth`) and
// Codex's ChatGPT login (`auth.json`, `tokens`). Anything else in a credential file is an API key.
#pragma once

#include <chrono>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"

namespace evalbox::harness::gateway {

enum class login_kind { claude_oauth, chatgpt };

// "claude-oauth", "chatgpt": as validate, docs and records name them.
std::string_view to_string(login_kind k);

// The login a credential file's content holds, or nothing (an API key, or not a login evalbox
// knows).
std::optional<login_kind> login_kind_of(std::string_view content);

// Where the login's tokens are refreshed unless gateway.token_url says otherwise.
std::string_view default_token_url(login_kind k);

struct login_options {
  login_kind kind = login_kind::claude_oauth;
  std::string token_url;  // empty: default_token_url(kind)
  std::vector<std::string> ca_files;
  // A token that expires within this margin is refreshed before it is sent.
  std::chrono::seconds refresh_margin{300};
};

using header_pairs = std::vector<std::pair<std::string, std::string>>;

class upstream_login {
 public:
  explicit upstream_login(login_options options);

  // The run's lease of the login file: known once the session is prepared, before the agent
  // can send anything.
  void attach(std::filesystem::path lease);

  // The headers that authenticate one upstream request (Authorization, and what the login's API
  // needs besides: anthropic-beta's oauth flag merged into `client_beta`, ChatGPT's account id).
  // Refreshes first when the token is about to expire, or when `refused` is the access token
  // the upstream just refused (401) and it is still the lease's. Errors name the lease's file
  // and never hold a token.
  result<header_pairs> headers(std::string_view client_beta = {},
                               std::optional<std::string> refused = std::nullopt);

  // The access token the last headers() sent (to say which one a 401 refused).
  [[nodiscard]] std::string last_token() const;
  [[nodiscard]] int refreshes() const;

 private:
  status refresh(std::string& content);  // under m_

  login_options o_;
  mutable std::mutex m_;
  std::filesystem::path lease_;
  std::string last_token_;
  int refreshes_ = 0;
};

}  // namespace evalbox::harness::gateway
