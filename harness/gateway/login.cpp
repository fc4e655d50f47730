// upstream_login (see login.h).
#include "harness/gateway/login.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include <fmt/format.h>

#include "base/base64.h"
#include "base/fs.h"
#include "base/json.h"
#include "base/log.h"
#include "base/unique_fd.h"
#include "sandbox/http/client.h"

namespace evalbox::harness::gateway {

namespace http = sandbox::http;
namespace fs = std::filesystem;

namespace {

// The OAuth clients the two logins were issued to: a refresh must name the same one.
constexpr std::string_view claude_client_id = "9d1c250a-e61b-44d9-88ed-5944d1962f5e";
constexpr std::string_view chatgpt_client_id = "app_EMoamEEZ73f0CkXaXp7hrann";
// Anthropic's flag for a request authenticated by an OAuth access token.
constexpr std::string_view claude_oauth_beta = "oauth-2025-04-20";
// Codex refreshes a ChatGPT login this often when its token's expiry cannot be read.
constexpr auto chatgpt_refresh_interval = std::chrono::hours(24 * 8);
constexpr size_t max_login_bytes = 1u << 20;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string now_iso() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  return std::string(text, std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm));
}

// Seconds since the epoch of "2025-12-28T12:34:56[.frac]Z", or nothing.
std::optional<int64_t> parse_iso(const std::string& text) {
  std::tm tm{};
  const char* end = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (!end) return std::nullopt;
  return static_cast<int64_t>(timegm(&tm));
}

// The `exp` claim (seconds since the epoch) of a JWT, unverified: only when to refresh hangs on
// it, and the upstream is the judge of the token.
std::optional<int64_t> jwt_expiry(std::string_view token) {
  const size_t a = token.find('.');
  if (a == std::string_view::npos) return std::nullopt;
  const size_t b = token.find('.', a + 1);
  if (b == std::string_view::npos) return std::nullopt;
  std::string payload(token.substr(a + 1, b - a - 1));
  for (char& c : payload) c = c == '-' ? '+' : c == '_' ? '/' : c;
  while (payload.size() % 4 != 0) payload += '=';
  auto bytes = base64_decode(payload);
  if (!bytes) return std::nullopt;
  json claims = json::parse(*bytes, nullptr, false);
  if (!claims.is_object()) return std::nullopt;
  auto exp = claims.find("exp");
  if (exp == claims.end() || !exp->is_number_integer()) return std::nullopt;
  return exp->get<int64_t>();
}

std::string string_at(const json& j, std::string_view key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The object holding the tokens: claudeAiOauth or tokens.
json* token_object(json& doc, login_kind k) {
  auto it = doc.find(k == login_kind::claude_oauth ? "claudeAiOauth" : "tokens");
  return it != doc.end() && it->is_object() ? &*it : nullptr;
}

std::string access_token(const json& tokens, login_kind k) {
  return string_at(tokens, k == login_kind::claude_oauth ? "accessToken" : "access_token");
}

// Rewrites the lease in place: the lease is held by a lock on its inode, which a rename would
// leave behind.
status rewrite(const fs::path& lease, std::string_view content) {
  unique_fd fd(::open(lease.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid())
    return make_error(error_kind::io, "open {}: {}", lease.string(), std::strerror(errno));
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n =
        ::pwrite(fd.get(), content.data() + done, content.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return make_error(error_kind::io, "write {}: {}", lease.string(), std::strerror(errno));
    done += static_cast<size_t>(n);
  }
  if (::ftruncate(fd.get(), static_cast<off_t>(content.size())) != 0 || ::fsync(fd.get()) != 0)
    return make_error(error_kind::io, "sync {}: {}", lease.string(), std::strerror(errno));
  return {};
}

}  // namespace

std::string_view to_string(login_kind k) {
  return k == login_kind::claude_oauth ? "claude-oauth" : "chatgpt";
}

std::optional<login_kind> login_kind_of(std::string_view content) {
  json doc = json::parse(content, nullptr, false);
  if (!doc.is_object()) return std::nullopt;
  for (login_kind k : {login_kind::claude_oauth, login_kind::chatgpt})
    if (const json* t = token_object(doc, k); t && !access_token(*t, k).empty()) return k;
  return std::nullopt;
}

std::string_view default_token_url(login_kind k) {
  return k == login_kind::claude_oauth ? "https://console.anthropic.com/v1/oauth/token"
                                       : "https://auth.openai.com/oauth/token";
}

upstream_login::upstream_login(login_options options) : o_(std::move(options)) {
  if (o_.token_url.empty()) o_.token_url = default_token_url(o_.kind);
}

void upstream_login::attach(fs::path lease) {
  std::lock_guard lock(m_);
  lease_ = std::move(lease);
}

std::string upstream_login::last_token() const {
  std::lock_guard lock(m_);
  return last_token_;
}

int upstream_login::refreshes() const {
  std::lock_guard lock(m_);
  return refreshes_;
}

result<header_pairs> upstream_login::headers(std::string_view client_beta,
                                             std::optional<std::string> refused) {
  std::lock_guard lock(m_);
  if (lease_.empty()) return make_error(error_kind::busy, "the run's login is not leased yet");
  auto content = read_file(lease_, max_login_bytes);
  if (!content) return std::unexpected(content.error());
  json doc = json::parse(*content, nullptr, false);
  const json* tokens = doc.is_object() ? token_object(doc, o_.kind) : nullptr;
  if (!tokens || access_token(*tokens, o_.kind).empty())
    return make_error(error_kind::invalid_argument,
                      "the login {} holds no {} access token any more (log in again on the host)",
                      lease_.string(), to_string(o_.kind));
  std::string token = access_token(*tokens, o_.kind);
  log::redact_secret(token);

  // When the token expires (seconds since the epoch), as far as the login says.
  std::optional<int64_t> expires;
  if (o_.kind == login_kind::claude_oauth) {
    if (auto at = tokens->find("expiresAt"); at != tokens->end() && at->is_number_integer())
      expires = at->get<int64_t>() / 1000;
  } else if (auto exp = jwt_expiry(token)) {
    expires = *exp;
  } else if (auto last = parse_iso(string_at(doc, "last_refresh"))) {
    expires =
        *last + std::chrono::duration_cast<std::chrono::seconds>(chatgpt_refresh_interval).count();
  }
  const int64_t now = std::time(nullptr);
  const bool was_refused = refused && *refused == token;
  if (was_refused || (expires && *expires <= now + o_.refresh_margin.count())) {
    if (auto s = refresh(*content); s) {
      doc = json::parse(*content, nullptr, false);
      tokens = token_object(doc, o_.kind);
      token = access_token(*tokens, o_.kind);
    } else if (was_refused || *expires <= now) {
      return std::unexpected(s.error());
    } else {
      // Still valid for a while: sent as it is, the refresh tried again at the next request.
      log::warn("gateway: {} (the token is still valid, sent as it is)", s.error().message);
    }
  }
  last_token_ = token;

  header_pairs out = {{"Authorization", "Bearer " + token}};
  if (o_.kind == login_kind::claude_oauth) {
    std::string beta(client_beta);
    if (beta.find(claude_oauth_beta) == std::string::npos)
      beta = beta.empty() ? std::string(claude_oauth_beta)
                          : fmt::format("{},{}", beta, claude_oauth_beta);
    out.emplace_back("anthropic-beta", beta);
  } else if (auto account = string_at(*tokens, "account_id"); !account.empty()) {
    out.emplace_back("ChatGPT-Account-Id", account);
  }
  return out;
}

status upstream_login::refresh(std::string& content) {
  json doc = json::parse(content, nullptr, false);
  json* tokens = doc.is_object() ? token_object(doc, o_.kind) : nullptr;
  const bool claude = o_.kind == login_kind::claude_oauth;
  const std::string refresh_token =
      tokens ? string_at(*tokens, claude ? "refreshToken" : "refresh_token") : std::string();
  if (refresh_token.empty())
    return make_error(error_kind::invalid_argument,
                      "the login {} has expired and holds no refresh token (log in again on the "
                      "host)",
                      lease_.string());
  log::redact_secret(refresh_token);

  auto url = http::parse_url(o_.token_url);
  if (!url) return std::unexpected(url.error());
  http::request req;
  req.method = "POST";
  req.to = *url;
  req.headers = {{"Content-Type", "application/json"}, {"Accept", "application/json"}};
  json body = {{"grant_type", "refresh_token"},
               {"refresh_token", refresh_token},
               {"client_id", claude ? claude_client_id : chatgpt_client_id}};
  if (!claude) body["scope"] = "openid profile email";
  req.body = body.dump();
  http::options opts;
  opts.ca_files = o_.ca_files;
  opts.total_timeout = std::chrono::seconds(60);
  if (auto via = http::proxy_for(*url); via && *via) opts.via = **via;
  auto reply = http::fetch_all(req, opts, 1u << 20);
  if (!reply)
    return make_error(reply.error().kind, "refreshing the login {} at {}: {}", lease_.string(),
                      o_.token_url, log::scrub(reply.error().message));
  json answer = json::parse(reply->body, nullptr, false);
  const std::string access = answer.is_object() ? string_at(answer, "access_token") : "";
  if (reply->status != 200 || access.empty())
    // The answer may echo what was sent: its text is not shown.
    return make_error(error_kind::permission,
                      "refreshing the login {} at {}: HTTP {} without an access token (the "
                      "refresh token may have been used elsewhere: log in again on the host)",
                      lease_.string(), o_.token_url, reply->status);
  log::redact_secret(access);
  const std::string next_refresh = string_at(answer, "refresh_token");
  if (!next_refresh.empty()) log::redact_secret(next_refresh);
  if (claude) {
    (*tokens)["accessToken"] = access;
    if (!next_refresh.empty()) (*tokens)["refreshToken"] = next_refresh;
    if (auto in = answer.find("expires_in"); in != answer.end() && in->is_number_integer())
      // Bounded (a year): an absurd answer must not overflow the sum.
      (*tokens)["expiresAt"] =
          now_ms() + std::clamp<int64_t>(in->get<int64_t>(), 0, 365 * 24 * 3600) * 1000;
  } else {
    (*tokens)["access_token"] = access;
    if (!next_refresh.empty()) (*tokens)["refresh_token"] = next_refresh;
    if (auto id = string_at(answer, "id_token"); !id.empty()) (*tokens)["id_token"] = id;
    doc["last_refresh"] = now_iso();
  }
  content = doc.dump(2) + "\n";
  EB_TRY(rewrite(lease_, content));
  ++refreshes_;
  log::info("gateway: refreshed the {} login in {}", to_string(o_.kind), lease_.string());
  return {};
}

}  // namespace evalbox::harness::gateway
