// The model gateway against an upstream the test serves itself (sandbox/http's server, in
// process): the placeholder is the only key it accepts and the real key is what the upstream
// sees, in the same place; credential and hop-by-hop headers never cross; streams pass as they
// arrive; usage is counted and priced; budgets refuse in each API's own shape; every call is
// recorded without a secret; a dead, stalled or oversized upstream is an answer, not a hang.
#include "harness/gateway/gateway.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <thread>

#include "base/fs.h"
#include "base/json.h"
#include "sandbox/http/client.h"
#include "sandbox/http/server.h"

namespace evalbox::harness::gateway {
namespace {

namespace http = sandbox::http;
using namespace std::chrono_literals;

const std::string real_key = "sk-real-key-never-in-the-sandbox-0123456789";

// The upstream: answers by path and remembers what it was sent.
class upstream {
 public:
  upstream() {
    http::server_options o;
    server_ = http::server::start(o, [this](const http::incoming_request& req,
                                            http::response_stream& out) {
                serve(req, out);
              }).value();
  }
  ~upstream() {
    release();
    server_->stop();
  }
  [[nodiscard]] std::string url(std::string_view prefix = "") const {
    return fmt::format("http://127.0.0.1:{}{}", server_->port(), prefix);
  }
  std::vector<http::incoming_request> seen() {
    std::lock_guard lock(m_);
    return seen_;
  }
  void release() {  // lets a held stream finish
    std::lock_guard lock(m_);
    released_ = true;
    cv_.notify_all();
  }
  uint16_t port() const { return server_->port(); }

 private:
  void serve(const http::incoming_request& req, http::response_stream& out) {
    {
      std::lock_guard lock(m_);
      seen_.push_back(req);
    }
    const std::string path = req.target.substr(0, req.target.find('?'));
    if (path == "/v1/messages") {
      // Anthropic's stream, its second half held until the test lets it go.
      (void)out.begin(200, {{"Content-Type", "text/event-stream"}}, std::nullopt);
      (void)out.write(
          "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":"
          "\"claude-test\",\"usage\":{\"input_tokens\":100,\"cache_read_input_tokens\":20,"
          "\"output_tokens\":1}}}\n\n");
      std::unique_lock lock(m_);
      cv_.wait_for(lock, 5s, [&] { return released_; });
      lock.unlock();
      (void)out.write(
          "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":"
          "7}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
      (void)out.end();
    } else if (path == "/v1/responses") {
      const std::string body =
          R"({"object":"response","model":"gpt-test","usage":{"input_tokens":50,)"
          R"("output_tokens":10,"output_tokens_details":{"reasoning_tokens":4}}})";
      (void)out.begin(200, {{"Content-Type", "application/json"}}, body.size());
      (void)out.write(body);
      (void)out.end();
    } else if (path.starts_with("/v1beta/models/")) {
      const std::string body =
          R"({"usageMetadata":{"promptTokenCount":30,"candidatesTokenCount":3},"modelVersion":"g"})";
      (void)out.begin(200, {{"Content-Type", "application/json"}}, body.size());
      (void)out.write(body);
    } else if (path == "/v1/garbage") {
      (void)out.begin(200, {{"Content-Type", "text/event-stream"}}, std::nullopt);
      (void)out.write("data: {\"usage\": \"lots\"}\n\ndata: [1,2\n\n\xff\xfe\n\n");
    } else if (path == "/v1/stall") {
      std::unique_lock lock(m_);
      cv_.wait_for(lock, 5s, [&] { return released_; });
    } else if (path == "/v1/huge") {
      (void)out.begin(200, {{"Content-Type", "application/octet-stream"}}, std::nullopt);
      (void)out.write(std::string(5000, 'x'));
    } else {
      (void)out.begin(404, {}, 0);
    }
  }

  std::unique_ptr<http::server> server_;
  std::mutex m_;
  std::condition_variable cv_;
  bool released_ = false;
  std::vector<http::incoming_request> seen_;
};

class Gateway : public ::testing::Test {
 protected:
  std::unique_ptr<model_gateway> start(std::string prefix = "",
                                       std::function<void(gateway_options&)> tweak = {}) {
    gateway_options o;
    o.upstream = up_.url(prefix);
    o.key = real_key;
    o.calls_file = dir_.path() / "model-calls.jsonl";
    o.price = [](const std::string&, const call_usage& u) -> std::optional<double> {
      return static_cast<double>(u.input_tokens.value_or(0)) * 1e-6 +
             static_cast<double>(u.output_tokens.value_or(0)) * 1e-5;
    };
    o.upstream_head_timeout = 2s;
    o.upstream_idle_timeout = 2s;
    if (tweak) tweak(o);
    return model_gateway::start(std::move(o)).value();
  }
  static http::request post(const model_gateway& g, std::string target, http::header_list headers,
                            std::string body = "{}") {
    http::request r;
    r.method = "POST";
    r.to = http::parse_url(fmt::format("http://127.0.0.1:{}{}", g.port(), target)).value();
    r.headers = std::move(headers);
    r.body = std::move(body);
    return r;
  }
  static http::reply call(const http::request& r) {
    http::options o;
    o.head_timeout = 5s;
    o.idle_timeout = 5s;
    return http::fetch_all(r, o, 1u << 20).value();
  }
  std::vector<json> calls() {
    std::vector<json> out;
    std::ifstream in(dir_.path() / "model-calls.jsonl");
    for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
    return out;
  }

  upstream up_;
  temp_dir dir_;
};

TEST_F(Gateway, TheRealKeyGoesWhereTheClientPutItsPlaceholder) {
  auto g = start();
  EXPECT_TRUE(looks_like_placeholder(g->placeholder())) << g->placeholder();
  up_.release();
  EXPECT_EQ(call(post(*g, "/v1/messages", {{"x-api-key", g->placeholder()}})).status, 200);
  EXPECT_EQ(
      call(post(*g, "/v1/responses", {{"Authorization", "Bearer " + g->placeholder()}})).status,
      200);
  EXPECT_EQ(call(post(*g, "/v1beta/models/g:generateContent?alt=json&key=" + g->placeholder(), {}))
                .status,
            200);
  auto seen = up_.seen();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].header("x-api-key"), real_key);
  EXPECT_FALSE(seen[0].header("authorization"));
  EXPECT_EQ(seen[1].header("authorization"), "Bearer " + real_key);
  EXPECT_FALSE(seen[1].header("x-api-key"));
  EXPECT_EQ(seen[2].target, "/v1beta/models/g:generateContent?alt=json&key=" + real_key);
  for (const auto& s : seen)
    for (const auto& [k, v] : s.headers) EXPECT_EQ(v.find(g->placeholder()), std::string::npos);
}

TEST_F(Gateway, ARequestWithoutTheRunsPlaceholderIsRefusedAndNeverForwarded) {
  auto g = start();
  auto none = call(post(*g, "/v1/messages", {}));
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(json::parse(none.body)["error"]["type"], "authentication_error") << none.body;
  EXPECT_EQ(
      call(post(*g, "/v1/messages", {{"x-api-key", "evalbox-gateway-" + std::string(32, 'a')}}))
          .status,
      401);
  // The placeholder beside another key: which one would be meant is not guessed.
  EXPECT_EQ(call(post(*g, "/v1/responses",
                      {{"x-api-key", g->placeholder()}, {"Authorization", "Bearer sk-other"}}))
                .status,
            401);
  EXPECT_EQ(call(post(*g, "/v1beta/models/g:generateContent?key=nope", {})).status, 401);
  EXPECT_TRUE(up_.seen().empty());
  const auto t = g->totals();
  EXPECT_EQ(t.refused, 4u);
  EXPECT_EQ(t.calls, 0u);
}

TEST_F(Gateway, CredentialAndHopByHopHeadersNeverCross) {
  auto g = start();
  up_.release();
  EXPECT_EQ(call(post(*g, "/v1/responses",
                      {{"Authorization", "Bearer " + g->placeholder()},
                       {"Cookie", "session=agent"},
                       {"Proxy-Authorization", "Basic eDp5"},
                       {"Accept-Encoding", "gzip, br"},
                       {"Keep-Alive", "timeout=5"},
                       {"X-Trace", "kept"}}))
                .status,
            200);
  auto seen = up_.seen();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_FALSE(seen[0].header("cookie"));
  EXPECT_FALSE(seen[0].header("proxy-authorization"));
  EXPECT_FALSE(seen[0].header("keep-alive"));
  EXPECT_EQ(seen[0].header("accept-encoding"), "identity");  // usage must be readable
  EXPECT_EQ(seen[0].header("x-trace"), "kept");
}

TEST_F(Gateway, AStreamPassesAsItArrivesAndItsUsageIsCounted) {
  auto g = start();
  auto r = http::fetch(post(*g, "/v1/messages", {{"x-api-key", g->placeholder()}}), http::options{})
               .value();
  EXPECT_EQ(r.status(), 200);
  // The first event arrives while the upstream still holds the rest.
  std::string got;
  std::byte buf[4096];
  while (got.find("\n\n") == std::string::npos) {
    size_t n = r.read(buf).value();
    ASSERT_GT(n, 0u);
    got.append(reinterpret_cast<const char*>(buf), n);
  }
  EXPECT_NE(got.find("message_start"), std::string::npos);
  EXPECT_EQ(got.find("message_delta"), std::string::npos);
  up_.release();
  got += r.read_all(1u << 20).value();
  EXPECT_NE(got.find("message_stop"), std::string::npos);
  // The response is complete when the client has it; the totals follow the record.
  for (int i = 0; i < 200 && g->totals().usage.output_tokens.value_or(0) == 0; ++i)
    std::this_thread::sleep_for(10ms);
  const auto t = g->totals();
  EXPECT_EQ(t.calls, 1u);
  EXPECT_EQ(t.usage.input_tokens, 120u);  // input + cache reads
  EXPECT_EQ(t.usage.cached_input_tokens, 20u);
  EXPECT_EQ(t.usage.output_tokens, 7u);
  EXPECT_DOUBLE_EQ(t.cost_usd, 120e-6 + 7e-5);
  ASSERT_EQ(t.ttfb_ms.size(), 1u);
  EXPECT_LE(t.ttfb_ms[0], t.duration_ms[0]);
}

TEST_F(Gateway, EveryCallIsRecordedWithoutASecret) {
  auto g = start();
  up_.release();
  (void)call(post(*g, "/v1/messages", {{"x-api-key", g->placeholder()}},
                  R"({"model":"claude-test","messages":[]})"));
  (void)call(post(*g, "/v1beta/models/g:generateContent?key=" + g->placeholder(), {}));
  (void)call(post(*g, "/v1/responses", {}));  // refused: no key
  g->stop();
  // Recorded as each call ends, which need not be the order the client made them in (a record
  // may follow its response): each found by its path.
  const auto recorded = calls();
  ASSERT_EQ(recorded.size(), 3u);
  std::vector<json> c;
  for (const char* prefix : {"/v1/messages", "/v1beta/", "/v1/responses"}) {
    auto it = std::find_if(recorded.begin(), recorded.end(),
                           [&](const json& r) { return r.value("path", "").starts_with(prefix); });
    ASSERT_NE(it, recorded.end()) << prefix;
    c.push_back(*it);
  }
  EXPECT_EQ(c[0]["request"]["headers"]["x-api-key"], "<redacted>");
  EXPECT_EQ(c[0]["request"]["body"]["model"], "claude-test");
  EXPECT_EQ(c[0]["response"]["stream"], true);
  ASSERT_EQ(c[0]["response"]["events"].size(), 3u);
  EXPECT_EQ(c[0]["response"]["events"][1]["event"], "message_delta");
  EXPECT_EQ(c[0]["usage"]["output_tokens"], 7);
  EXPECT_EQ(c[1]["path"], "/v1beta/models/g:generateContent?key=<redacted>");
  EXPECT_EQ(c[1]["usage"]["input_tokens"], 30);
  EXPECT_EQ(c[2]["refused"], "invalid_api_key");
  const std::string text = read_file(dir_.path() / "model-calls.jsonl").value();
  EXPECT_EQ(text.find(real_key), std::string::npos);
  EXPECT_EQ(text.find(g->placeholder()), std::string::npos);
}

// A credential's requests_per_minute, shared by two runs' gateways: the second request to go
// upstream waits for the window, says so in its record and the totals, and its latency counts
// the upstream alone; a refused request takes no slot.
TEST_F(Gateway, ACredentialsRateIsSharedByItsGatewaysAndARequestOverItWaits) {
  auto rate = std::make_shared<request_rate>(1, 400ms);
  auto a = start("", [&](gateway_options& o) { o.rate = rate; });
  auto b = start("", [&](gateway_options& o) {
    o.rate = rate;
    o.calls_file = dir_.path() / "b-calls.jsonl";
  });
  up_.release();
  EXPECT_EQ(call(post(*a, "/v1/responses", {})).status, 401) << "refused: takes no slot";
  EXPECT_EQ(call(post(*a, "/v1/messages", {{"x-api-key", a->placeholder()}})).status, 200);
  EXPECT_EQ(call(post(*b, "/v1/messages", {{"x-api-key", b->placeholder()}})).status, 200);
  a->stop();
  b->stop();
  EXPECT_EQ(a->totals().rate_waited, 0u);
  const auto tb = b->totals();
  EXPECT_EQ(tb.rate_waited, 1u);
  EXPECT_GE(tb.rate_wait_ms, 250u) << "it waited for the first's window";
  EXPECT_EQ(tb.to_json()["rate_wait_ms"], tb.rate_wait_ms);
  std::ifstream in(dir_.path() / "b-calls.jsonl");
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  const json rec = json::parse(line);
  EXPECT_GE(rec.value("rate_wait_ms", 0), 250) << rec.dump();
  EXPECT_LT(rec["ttfb_ms"].get<double>(), static_cast<double>(rec["rate_wait_ms"].get<int>()))
      << "latency is the upstream's, not the wait's";
  for (const auto& r : calls()) EXPECT_FALSE(r.contains("rate_wait_ms")) << r.dump();
}

TEST_F(Gateway, ARequestsBudgetRefusesTheNextCallInEachApisShape) {
  auto g = start("", [](gateway_options& o) {
    o.budget.requests = 1;
    o.refusals_before_stop = 2;
  });
  up_.release();
  EXPECT_EQ(
      call(post(*g, "/v1/responses", {{"Authorization", "Bearer " + g->placeholder()}})).status,
      200);
  EXPECT_FALSE(g->should_stop_agent());
  auto openai = call(post(*g, "/v1/responses", {{"Authorization", "Bearer " + g->placeholder()}}));
  EXPECT_EQ(openai.status, 400);
  EXPECT_EQ(json::parse(openai.body)["error"]["code"], "budget_exhausted") << openai.body;
  auto anthropic = call(post(*g, "/v1/messages", {{"x-api-key", g->placeholder()}}));
  EXPECT_EQ(anthropic.status, 400);
  EXPECT_EQ(json::parse(anthropic.body)["type"], "error") << anthropic.body;
  EXPECT_NE(
      json::parse(anthropic.body)["error"]["message"].get<std::string>().find("requests: 1 of 1"),
      std::string::npos);
  EXPECT_TRUE(g->should_stop_agent());  // two refusals since it was spent
  EXPECT_EQ(up_.seen().size(), 1u);
  const auto t = g->totals();
  EXPECT_EQ(t.exhausted, "requests: 1 of 1");
  EXPECT_EQ(t.refused, 2u);
}

// An agent that stops asking once refused (or never asks again) is still ended: stop_grace
// after the budget was spent, however few refusals it has seen.
TEST_F(Gateway, ASpentBudgetEndsTheAgentAfterTheGraceEvenWithoutRefusals) {
  auto g = start("", [](gateway_options& o) {
    o.budget.requests = 1;
    o.refusals_before_stop = 100;
    o.stop_grace = 1s;
  });
  EXPECT_EQ(
      call(post(*g, "/v1/responses", {{"Authorization", "Bearer " + g->placeholder()}})).status,
      200);
  const auto spent = std::chrono::steady_clock::now();
  EXPECT_FALSE(g->should_stop_agent());
  while (!g->should_stop_agent() && std::chrono::steady_clock::now() - spent < 10s)
    std::this_thread::sleep_for(20ms);
  EXPECT_TRUE(g->should_stop_agent());
  EXPECT_GE(std::chrono::steady_clock::now() - spent, 900ms);  // spent a little before
  EXPECT_EQ(g->totals().refused, 0u);
}

TEST_F(Gateway, CostAndTokenBudgetsCountWhatTheResponsesSaid) {
  auto g = start("", [](gateway_options& o) { o.budget.cost = 0.0001; });
  up_.release();
  // 50 input and 10 output tokens: 50e-6 + 10e-5 = 0.00015, over 0.0001 after one call.
  EXPECT_EQ(
      call(post(*g, "/v1/responses", {{"Authorization", "Bearer " + g->placeholder()}})).status,
      200);
  EXPECT_EQ(
      call(post(*g, "/v1/responses", {{"Authorization", "Bearer " + g->placeholder()}})).status,
      400);
  EXPECT_EQ(g->totals().exhausted, "cost: $0.00015 of $0.0001");

  auto g2 = start("", [](gateway_options& o) { o.budget.output_tokens = 10; });
  EXPECT_EQ(
      call(post(*g2, "/v1/responses", {{"Authorization", "Bearer " + g2->placeholder()}})).status,
      200);
  EXPECT_EQ(
      call(post(*g2, "/v1/responses", {{"Authorization", "Bearer " + g2->placeholder()}})).status,
      400);
  EXPECT_EQ(g2->totals().exhausted, "output tokens: 10 of 10");
}

TEST_F(Gateway, OnlyTheUpstreamsPathIsServed) {
  auto g = start("/v1");
  EXPECT_EQ(g->base_url(), fmt::format("http://127.0.0.1:{}/v1", g->port()));
  up_.release();
  EXPECT_EQ(
      call(post(*g, "/v1/responses", {{"Authorization", "Bearer " + g->placeholder()}})).status,
      200);
  EXPECT_EQ(
      call(post(*g, "/v10/responses", {{"Authorization", "Bearer " + g->placeholder()}})).status,
      404);
  EXPECT_EQ(call(post(*g, "/admin", {{"Authorization", "Bearer " + g->placeholder()}})).status,
            404);
  // Dot segments leave the prefix as surely as another path, escaped or not.
  for (const char* sneaky :
       {"/v1/../admin", "/v1/%2e%2E/admin", "/v1/.%2e/admin", "/v1/%2E/responses", "/v1/..%2fadmin",
        "/v1\\..\\admin", "/v1/%5c../admin", "/v1/responses/.."})
    EXPECT_EQ(call(post(*g, sneaky, {{"Authorization", "Bearer " + g->placeholder()}})).status, 404)
        << sneaky;
  EXPECT_EQ(up_.seen().size(), 1u);
  EXPECT_EQ(g->totals().calls, 1u);  // refused requests spend no budget
}

TEST_F(Gateway, AnUnreachableOrStalledUpstreamIsAnAnswerInTheApisShape) {
  // A port nothing listens on.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  const uint16_t dead = ntohs(a.sin_port);
  ::close(fd);
  auto g =
      start("", [&](gateway_options& o) { o.upstream = fmt::format("http://127.0.0.1:{}", dead); });
  auto r = call(post(*g, "/v1/messages", {{"x-api-key", g->placeholder()}}));
  EXPECT_EQ(r.status, 502);
  EXPECT_EQ(json::parse(r.body)["type"], "error") << r.body;
  EXPECT_EQ(r.body.find(real_key), std::string::npos);
  EXPECT_EQ(g->totals().failed, 1u);

  auto g2 = start("", [](gateway_options& o) { o.upstream_head_timeout = 300ms; });
  const auto t0 = std::chrono::steady_clock::now();
  auto s = call(post(*g2, "/v1/stall", {{"x-api-key", g2->placeholder()}}));
  EXPECT_EQ(s.status, 502);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  up_.release();
}

TEST_F(Gateway, AResponseOverTheCapIsCutAndGarbageCountsNoUsage) {
  auto g = start("", [](gateway_options& o) { o.max_response_bytes = 1000; });
  http::options o;
  o.head_timeout = 5s;
  o.idle_timeout = 5s;
  auto cut = http::fetch_all(post(*g, "/v1/huge", {{"x-api-key", g->placeholder()}}), o, 1u << 20);
  EXPECT_FALSE(cut && cut->body.size() == 5000);
  auto bad = call(post(*g, "/v1/garbage", {{"x-api-key", g->placeholder()}}));
  EXPECT_EQ(bad.status, 200);
  g->stop();
  const auto t = g->totals();
  EXPECT_EQ(t.failed, 1u);
  EXPECT_EQ(t.calls_without_usage, 2u);
  EXPECT_FALSE(t.usage.input_tokens);
  const auto c = calls();
  ASSERT_EQ(c.size(), 2u);
  EXPECT_NE(c[0]["error"].get<std::string>().find("longer than 1000 bytes"), std::string::npos);
}

TEST_F(Gateway, AStoppedGatewayOpensNothing) {
  auto g = start();
  const uint16_t port = g->port();
  g->stop();
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_NE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ::close(fd);
}

TEST_F(Gateway, AnUpstreamThatIsNoURLOrNoKeyIsRefusedAtStart) {
  gateway_options o;
  o.upstream = "ftp://example";
  o.key = real_key;
  EXPECT_FALSE(model_gateway::start(o));
  o.upstream = up_.url();
  o.key.clear();
  EXPECT_FALSE(model_gateway::start(o));
}

}  // namespace
}  // namespace evalbox::harness::gateway

namespace evalbox::harness::gateway {
namespace {

TEST(ModelCache, AKeyLeavesOutWhatDiffersFromRunToRun) {
  const std::string a = request_key(
      "POST", "/v1/messages?beta=true",
      R"({"model":"m","metadata":{"user_id":"u1"},"messages":[{"role":"user","content":"key evalbox-gateway-aaaa at 127.0.0.1:4000, session 01a24e1b-2b1e-7973-81c5-2333f795117e"}]})",
      {"evalbox-gateway-aaaa", "127.0.0.1:4000"});
  const std::string b = request_key(
      "POST", "/v1/messages?beta=true",
      R"({"messages":[{"content":"key evalbox-gateway-bbbb at 127.0.0.1:5111, session 8ed6c8df-ed6d-4157-9b2d-9802d56dac03","role":"user"}],"metadata":{"user_id":"u2"},"model":"m"})",
      {"evalbox-gateway-bbbb", "127.0.0.1:5111"});
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.size(), 64u);
  // What the model is asked is the key: another prompt, path, method or model is another key.
  EXPECT_NE(a, request_key("POST", "/v1/messages?beta=true",
                           R"({"model":"m","messages":[{"role":"user","content":"other"}]})", {}));
  EXPECT_NE(request_key("POST", "/v1/a", "{}", {}), request_key("POST", "/v1/b", "{}", {}));
  EXPECT_NE(request_key("POST", "/v1/a", "{}", {}), request_key("GET", "/v1/a", "{}", {}));
  // A key= in the query is no part of it; other query parameters are.
  EXPECT_EQ(request_key("POST", "/v1beta/m:g?key=one&alt=sse", "{}", {}),
            request_key("POST", "/v1beta/m:g?alt=sse&key=two", "{}", {}));
  EXPECT_NE(request_key("POST", "/v1beta/m:g?alt=sse", "{}", {}),
            request_key("POST", "/v1beta/m:g?alt=json", "{}", {}));
  // A long run of hex digits is no UUID.
  EXPECT_NE(request_key("POST", "/p", R"({"x":"a01a24e1b-2b1e-7973-81c5-2333f795117e"})", {}),
            request_key("POST", "/p", R"({"x":"a8ed6c8df-ed6d-4157-9b2d-9802d56dac03"})", {}));
}

TEST(ModelCache, ReplayTakesTheNthAnswerThenOneAtTheSamePositionOfTheSameShape) {
  temp_dir dir;
  const std::string shape1 = request_shape(R"({"model":"m","messages":[1]})");
  const std::string shape3 = request_shape(R"({"model":"m","messages":[1,2,3]})");
  {
    model_cache rec(dir.path(), cache_mode::record);
    for (const char* key : {"k1", "k1", "k2"}) {
      auto l = rec.lookup(key, "/v1/messages", key == std::string("k2") ? shape3 : shape1);
      ASSERT_TRUE(l);
      EXPECT_FALSE(l->response);  // record mode never answers
      ASSERT_TRUE(rec.store(key, l->occurrence, "/v1/messages", l->position,
                            key == std::string("k2") ? shape3 : shape1,
                            {200,
                             {{"Content-Type", "text/event-stream"}},
                             fmt::format("answer {}#{}", key, l->occurrence)}));
    }
  }
  model_cache rep(dir.path(), cache_mode::replay);
  auto a = rep.lookup("k1", "/v1/messages", shape1).value();
  auto b = rep.lookup("k1", "/v1/messages", shape1).value();
  ASSERT_TRUE(a.response && b.response);
  EXPECT_EQ(a.response->body, "answer k1#0");
  EXPECT_EQ(b.response->body, "answer k1#1");
  EXPECT_EQ(a.match, "exact");
  EXPECT_EQ(a.response->headers.at(0).second, "text/event-stream");
  // Position 2 recorded k2 with three messages: another key of that shape is answered by it...
  auto c = rep.lookup("k2-changed-output", "/v1/messages", shape3).value();
  ASSERT_TRUE(c.response);
  EXPECT_EQ(c.response->body, "answer k2#0");
  EXPECT_EQ(c.match, "position");
  // ...but not a request of another shape, nor one past what was recorded.
  model_cache again(dir.path(), cache_mode::replay);
  (void)again.lookup("x", "/v1/messages", shape1);
  (void)again.lookup("y", "/v1/messages", shape1);
  EXPECT_FALSE(again.lookup("z", "/v1/messages", shape1).value().response);
  EXPECT_FALSE(again.lookup("w", "/v1/messages", shape3).value().response);
  // A damaged entry is an error, never an answer.
  ASSERT_TRUE(write_file(dir.path() / (std::string("k1-0") + ".json"), "{\"status\": \"x\"}"));
  model_cache broken(dir.path(), cache_mode::replay);
  EXPECT_FALSE(broken.lookup("k1", "/v1/messages", shape1));
}

TEST_F(Gateway, ReplayAnswersFromTheCacheAndAMissIsAnErrorInTheApisShape) {
  temp_dir cache;
  {
    auto g = start("", [&](gateway_options& o) {
      o.cache = std::make_shared<model_cache>(cache.path(), cache_mode::record);
    });
    up_.release();
    EXPECT_EQ(call(post(*g, "/v1/responses", {{"Authorization", "Bearer " + g->placeholder()}},
                        R"({"model":"gpt-test","input":"hi from )" + g->placeholder() + "\"}"))
                  .status,
              200);
  }
  ASSERT_EQ(up_.seen().size(), 1u);
  auto g = start("", [&](gateway_options& o) {
    o.cache = std::make_shared<model_cache>(cache.path(), cache_mode::replay);
  });
  // The same request (its placeholder is this run's): answered without the upstream.
  auto r = call(post(*g, "/v1/responses", {{"Authorization", "Bearer " + g->placeholder()}},
                     R"({"model":"gpt-test","input":"hi from )" + g->placeholder() + "\"}"));
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("reasoning_tokens"), std::string::npos) << r.body;
  auto miss = call(post(*g, "/v1/responses", {{"Authorization", "Bearer " + g->placeholder()}},
                        R"({"model":"gpt-test","input":"something else"})"));
  EXPECT_EQ(miss.status, 502);
  EXPECT_EQ(json::parse(miss.body)["error"]["code"], "replay_miss") << miss.body;
  EXPECT_EQ(up_.seen().size(), 1u);  // nothing more went upstream
  g->stop();
  const auto t = g->totals();
  EXPECT_EQ(t.replayed, 1u);
  EXPECT_EQ(t.replay_misses, 1u);
  EXPECT_EQ(t.usage.input_tokens, 50u);  // the replayed answer's usage
  EXPECT_DOUBLE_EQ(t.replayed_cost_usd, t.cost_usd);
}

}  // namespace
}  // namespace evalbox::harness::gateway
