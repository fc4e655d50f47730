// A subscription login served by the gateway, against an upstream and a token endpoint the test
// serves itself: the lease's access token is what the upstream sees (never the placeholder,
// never inside the request the client made), with the flags each API needs; a token about to
// expire, or one the upstream refuses, is refreshed on the host and the rotation written back
// into the lease; a refresh that fails is an answer in the API's shape that holds no token.
#include "harness/gateway/login.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <mutex>

#include "base/base64.h"
#include "base/fs.h"
#include "base/json.h"
#include "harness/gateway/gateway.h"
#include "sandbox/http/client.h"
#include "sandbox/http/server.h"

namespace evalbox::harness::gateway {
namespace {

namespace http = sandbox::http;
using namespace std::chrono_literals;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A JWT whose payload says `exp` (unsigned: the gateway only reads when it expires).
std::string jwt(int64_t exp) {
  std::string payload = base64_encode(json{{"exp", exp}, {"sub", "user"}}.dump());
  for (char& c : payload) c = c == '+' ? '-' : c == '/' ? '_' : c;
  while (payload.ends_with('=')) payload.pop_back();
  return "eyJhbGciOiJub25lIn0." + payload + ".sig";
}

// The model API and the login's token endpoint in one server. The API accepts only the token
// `valid` (401 otherwise); the token endpoint hands out access-N / refresh-N in turn, or fails.
class upstream {
 public:
  upstream() {
    server_ = http::server::start({}, [this](const http::incoming_request& req,
                                             http::response_stream& out) {
                serve(req, out);
              }).value();
  }
  ~upstream() { server_->stop(); }
  [[nodiscard]] std::string url(std::string_view path = "") const {
    return fmt::format("http://127.0.0.1:{}{}", server_->port(), path);
  }
  std::vector<http::incoming_request> api() {
    std::lock_guard lock(m_);
    return api_;
  }
  std::vector<json> refreshes() {
    std::lock_guard lock(m_);
    return refreshes_;
  }
  void accept(std::string token) {
    std::lock_guard lock(m_);
    valid_ = std::move(token);
  }
  void fail_refresh() {
    std::lock_guard lock(m_);
    refresh_fails_ = true;
  }

 private:
  void serve(const http::incoming_request& req, http::response_stream& out) {
    std::lock_guard lock(m_);
    std::string body;
    int status = 200;
    if (req.target == "/oauth/token") {
      refreshes_.push_back(json::parse(req.body, nullptr, false));
      const int n = static_cast<int>(refreshes_.size()) + 1;
      if (refresh_fails_) {
        status = 400;
        body = R"({"error":"invalid_grant","refresh_token_echo":"refresh-1"})";
      } else {
        body = json{
            {"access_token", fmt::format("access-{}", n)},
            {"refresh_token", fmt::format("refresh-{}", n)},
            {"id_token", fmt::format("id-{}", n)},
            {"expires_in",
             3600}}.dump();
      }
    } else {
      api_.push_back(req);
      if (req.header("authorization") != "Bearer " + valid_) {
        status = 401;
        body = R"({"type":"error","error":{"type":"authentication_error","message":"expired"}})";
      } else {
        body = R"({"object":"response","model":"m","usage":{"input_tokens":5,"output_tokens":1}})";
      }
    }
    (void)out.begin(status, {{"Content-Type", "application/json"}}, body.size());
    (void)out.write(body);
    (void)out.end();
  }

  std::unique_ptr<http::server> server_;
  std::mutex m_;
  std::vector<http::incoming_request> api_;
  std::vector<json> refreshes_;
  std::string valid_ = "access-1";
  bool refresh_fails_ = false;
};

class Login : public ::testing::Test {
 protected:
  // A gateway serving the login in `lease` (its content written first).
  std::unique_ptr<model_gateway> start(login_kind kind, const json& content) {
    lease_ = dir_.path() / "lease";
    std::ofstream(lease_) << content.dump(2);
    login_ = std::make_shared<upstream_login>(
        login_options{kind, up_.url("/oauth/token"), {}, std::chrono::seconds(300)});
    gateway_options o;
    o.upstream = up_.url();
    o.login = login_;
    o.calls_file = dir_.path() / "model-calls.jsonl";
    o.upstream_head_timeout = 5s;
    auto g = model_gateway::start(std::move(o)).value();
    login_->attach(lease_);
    return g;
  }
  static http::reply post(const model_gateway& g, std::string target, http::header_list headers) {
    http::request r;
    r.method = "POST";
    r.to = http::parse_url(fmt::format("http://127.0.0.1:{}{}", g.port(), target)).value();
    r.headers = std::move(headers);
    r.body = R"({"model":"m","input":"hi"})";
    http::options o;
    o.head_timeout = 10s;
    o.idle_timeout = 10s;
    return http::fetch_all(r, o, 1u << 20).value();
  }
  json lease() { return json::parse(read_file(lease_).value()); }
  std::string record() { return read_file(dir_.path() / "model-calls.jsonl").value_or(""); }

  static json claude(const std::string& access, int64_t expires_at) {
    return {{"claudeAiOauth",
             {{"accessToken", access},
              {"refreshToken", "refresh-1"},
              {"expiresAt", expires_at},
              {"scopes", {"user:inference"}},
              {"subscriptionType", "max"}}}};
  }

  upstream up_;
  temp_dir dir_;
  std::filesystem::path lease_;
  std::shared_ptr<upstream_login> login_;
};

TEST(LoginKind, IsReadFromTheFilesContent) {
  EXPECT_EQ(login_kind_of(R"({"claudeAiOauth":{"accessToken":"a","refreshToken":"r"}})"),
            login_kind::claude_oauth);
  EXPECT_EQ(login_kind_of(R"({"OPENAI_API_KEY":null,"tokens":{"access_token":"a"}})"),
            login_kind::chatgpt);
  EXPECT_FALSE(login_kind_of("sk-ant-api03-key"));
  EXPECT_FALSE(login_kind_of(R"({"OPENAI_API_KEY":"sk-key"})"));
  EXPECT_FALSE(login_kind_of(R"({"claudeAiOauth":{"accessToken":""}})"));
  EXPECT_FALSE(login_kind_of(R"({"tokens":"a"})"));
  EXPECT_FALSE(login_kind_of("{not json"));
}

TEST_F(Login, ClaudesTokenGoesUpstreamWithTheOAuthFlagBesideTheClients) {
  auto g = start(login_kind::claude_oauth, claude("access-1", now_ms() + 3'600'000));
  auto r = post(*g, "/v1/messages",
                {{"x-api-key", g->placeholder()}, {"anthropic-beta", "tools-2025-01-01"}});
  EXPECT_EQ(r.status, 200) << r.body;
  auto seen = up_.api();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].header("authorization"), "Bearer access-1");
  EXPECT_EQ(seen[0].header("anthropic-beta"), "tools-2025-01-01,oauth-2025-04-20");
  EXPECT_FALSE(seen[0].header("x-api-key"));
  for (const auto& [k, v] : seen[0].headers)
    EXPECT_EQ(v.find(g->placeholder()), std::string::npos) << k;
  EXPECT_TRUE(up_.refreshes().empty());
  EXPECT_EQ(lease()["claudeAiOauth"]["accessToken"], "access-1");
  EXPECT_EQ(record().find("access-1"), std::string::npos) << record();
}

TEST_F(Login, AnExpiringTokenIsRefreshedOnTheHostAndTheRotationKeptInTheLease) {
  auto g = start(login_kind::claude_oauth, claude("access-0", now_ms() + 60'000));
  up_.accept("access-2");
  EXPECT_EQ(post(*g, "/v1/messages", {{"x-api-key", g->placeholder()}}).status, 200);
  EXPECT_EQ(post(*g, "/v1/messages", {{"x-api-key", g->placeholder()}}).status, 200);
  auto asked = up_.refreshes();
  ASSERT_EQ(asked.size(), 1u);  // once: the second request has the new token
  EXPECT_EQ(asked[0]["grant_type"], "refresh_token");
  EXPECT_EQ(asked[0]["refresh_token"], "refresh-1");
  EXPECT_EQ(asked[0]["client_id"], "9d1c250a-e61b-44d9-88ed-5944d1962f5e");
  for (const auto& req : up_.api()) EXPECT_EQ(req.header("authorization"), "Bearer access-2");
  const json kept = lease()["claudeAiOauth"];
  EXPECT_EQ(kept["accessToken"], "access-2");
  EXPECT_EQ(kept["refreshToken"], "refresh-2");
  EXPECT_NEAR(kept["expiresAt"].get<double>(), static_cast<double>(now_ms() + 3'600'000), 60'000);
  EXPECT_EQ(kept["subscriptionType"], "max");  // the rest of the file as it was
  EXPECT_EQ(login_->refreshes(), 1);
}

TEST_F(Login, ATokenTheUpstreamRefusesIsRefreshedOnceAndTheRequestSentAgain) {
  auto g = start(login_kind::claude_oauth, claude("access-1", now_ms() + 3'600'000));
  up_.accept("access-2");  // revoked before its time
  auto r = post(*g, "/v1/messages", {{"x-api-key", g->placeholder()}});
  EXPECT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(up_.api().size(), 2u);
  EXPECT_EQ(up_.api()[1].header("authorization"), "Bearer access-2");
  // Refused again with the new token: the client gets the upstream's 401, no second refresh.
  up_.accept("nothing-valid");
  auto again = post(*g, "/v1/messages", {{"x-api-key", g->placeholder()}});
  EXPECT_EQ(again.status, 401);
  EXPECT_EQ(up_.refreshes().size(), 2u);  // one for each request: each tries the lease once
  EXPECT_EQ(up_.api().size(), 4u);
}

TEST_F(Login, ChatGptsLoginSendsItsAccountAndRefreshesAnExpiredJwt) {
  json auth = {{"OPENAI_API_KEY", nullptr},
               {"tokens",
                {{"id_token", "id-1"},
                 {"access_token", jwt(std::time(nullptr) - 10)},
                 {"refresh_token", "refresh-1"},
                 {"account_id", "acct-123"}}},
               {"last_refresh", "2026-01-01T00:00:00Z"}};
  auto g = start(login_kind::chatgpt, auth);
  up_.accept("access-2");
  auto r = post(*g, "/v1/responses", {{"Authorization", "Bearer " + g->placeholder()}});
  EXPECT_EQ(r.status, 200) << r.body;
  auto seen = up_.api();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].header("authorization"), "Bearer access-2");
  EXPECT_EQ(seen[0].header("chatgpt-account-id"), "acct-123");
  auto asked = up_.refreshes();
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0]["client_id"], "app_EMoamEEZ73f0CkXaXp7hrann");
  EXPECT_EQ(asked[0]["scope"], "openid profile email");
  const json kept = lease();
  EXPECT_EQ(kept["tokens"]["access_token"], "access-2");
  EXPECT_EQ(kept["tokens"]["refresh_token"], "refresh-2");
  EXPECT_EQ(kept["tokens"]["id_token"], "id-2");
  EXPECT_EQ(kept["tokens"]["account_id"], "acct-123");
  EXPECT_NE(kept["last_refresh"], "2026-01-01T00:00:00Z");
}

TEST_F(Login, AFailedRefreshIsAnAnswerInTheApisShapeThatHoldsNoToken) {
  auto g = start(login_kind::claude_oauth, claude("access-0", now_ms() - 1000));
  up_.fail_refresh();
  auto r = post(*g, "/v1/messages", {{"x-api-key", g->placeholder()}});
  EXPECT_EQ(r.status, 502);
  const json body = json::parse(r.body);
  EXPECT_EQ(body["type"], "error") << r.body;
  EXPECT_NE(r.body.find("log in again"), std::string::npos) << r.body;
  for (const std::string secret : {"refresh-1", "access-0"}) {
    EXPECT_EQ(r.body.find(secret), std::string::npos) << r.body;
    EXPECT_EQ(record().find(secret), std::string::npos) << record();
  }
  EXPECT_TRUE(up_.api().empty());
  EXPECT_EQ(lease()["claudeAiOauth"]["refreshToken"], "refresh-1");  // unchanged
}

TEST_F(Login, ATokenStillValidIsSentWhenItsEarlyRefreshFails) {
  // Inside the refresh margin but not expired: the issuer's failure does not fail the call.
  auto g = start(login_kind::claude_oauth, claude("access-1", now_ms() + 60'000));
  up_.fail_refresh();
  auto r = post(*g, "/v1/messages", {{"x-api-key", g->placeholder()}});
  EXPECT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(up_.api().size(), 1u);
  EXPECT_EQ(up_.api()[0].header("authorization"), "Bearer access-1");
  EXPECT_EQ(up_.refreshes().size(), 1u);
  EXPECT_EQ(lease()["claudeAiOauth"]["refreshToken"], "refresh-1");
}

TEST_F(Login, AnExpiryThatIsNoWholeNumberIsNotReadAsOne) {
  // 1e300 (or 1.5) is not milliseconds since the epoch: no refresh on its word, the token sent.
  json login = claude("access-1", 0);
  login["claudeAiOauth"]["expiresAt"] = 1e300;
  auto g = start(login_kind::claude_oauth, login);
  EXPECT_EQ(post(*g, "/v1/messages", {{"x-api-key", g->placeholder()}}).status, 200);
  EXPECT_TRUE(up_.refreshes().empty());
  EXPECT_EQ(up_.api().at(0).header("authorization"), "Bearer access-1");
}

TEST_F(Login, AnAPIKeyStillNeedsThePlaceholderAndAQueryKeyIsNotALogin) {
  auto g = start(login_kind::claude_oauth, claude("access-1", now_ms() + 3'600'000));
  EXPECT_EQ(post(*g, "/v1/messages", {{"x-api-key", "sk-someone-else"}}).status, 401);
  EXPECT_EQ(post(*g, "/v1beta/models/m:generateContent?key=" + g->placeholder(), {}).status, 401);
  EXPECT_TRUE(up_.api().empty());
}

TEST(UpstreamLogin, BeforeTheLeaseIsAttachedNothingIsSent) {
  upstream_login l({login_kind::chatgpt, "http://127.0.0.1:9/oauth/token", {}, 300s});
  auto h = l.headers();
  ASSERT_FALSE(h);
  EXPECT_EQ(h.error().kind, error_kind::busy);
}

}  // namespace
}  // namespace evalbox::harness::gateway
