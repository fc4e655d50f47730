// The judge client: request bodies and replies of both HTTP adapters, retries against a
// scripted server on 127.0.0.1 (a 500 then an answer; always 500; too slow), the key kept out
// of every message, and the command adapter's stdin, environment and timeout.
#include "harness/judge/client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "harness/judge/http.h"

namespace evalbox::harness {
namespace {

// Answers each connection with the next scripted reply (the last one repeats); a reply of
// "SLEEP" waits 3 s before closing. Records each request as received.
class scripted_server {
 public:
  explicit scripted_server(std::deque<std::string> replies) : replies_(std::move(replies)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    ::listen(fd_, 8);
    thread_ = std::thread([this] { serve(); });
  }
  ~scripted_server() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<std::string> requests() {
    std::lock_guard l(mu_);
    return requests_;
  }

  static std::string reply(int status, const std::string& body) {
    return "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Type: application/json\r\n" +
           "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" +
           body;
  }

 private:
  void serve() {
    while (!stop_) {
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      std::string req;
      char buf[65536];
      // Read the headers, then the body by Content-Length.
      while (req.find("\r\n\r\n") == std::string::npos) {
        ssize_t n = ::read(c, buf, sizeof buf);
        if (n <= 0) break;
        req.append(buf, static_cast<size_t>(n));
      }
      size_t head = req.find("\r\n\r\n");
      size_t want = 0;
      if (auto cl = req.find("Content-Length: "); cl != std::string::npos)
        want = std::stoul(req.substr(cl + 16));
      while (head != std::string::npos && req.size() < head + 4 + want) {
        ssize_t n = ::read(c, buf, sizeof buf);
        if (n <= 0) break;
        req.append(buf, static_cast<size_t>(n));
      }
      std::string out;
      {
        std::lock_guard l(mu_);
        requests_.push_back(req);
        out = replies_.size() > 1 ? replies_.front() : replies_.back();
        if (replies_.size() > 1) replies_.pop_front();
      }
      if (out == "SLEEP")
        std::this_thread::sleep_for(std::chrono::seconds(3));
      else
        (void)!::write(c, out.data(), out.size());
      ::close(c);
    }
  }

  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::deque<std::string> replies_;
  std::vector<std::string> requests_;
  std::thread thread_;
};

const std::string answer_text = R"({"checks":[{"id":"p1","verdict":"pass","reason":"ok"}]})";

std::string openai_body() {
  json j{{"output",
          json::array(
              {{{"type", "reasoning"}},
               {{"type", "message"},
                {"content", json::array({{{"type", "output_text"}, {"text", answer_text}}})}}})},
         {"usage",
          {{"input_tokens", 1200},
           {"output_tokens", 80},
           {"output_tokens_details", {{"reasoning_tokens", 30}}}}}};
  return j.dump();
}

std::string anthropic_body() {
  json j{{"content", json::array({{{"type", "text"}, {"text", answer_text}}})},
         {"usage", {{"input_tokens", 900}, {"output_tokens", 40}}}};
  return j.dump();
}

judge_spec http_judge(judge_spec::adapter_kind kind, const std::string& url) {
  judge_spec j;
  j.name = "default";
  j.adapter = kind;
  j.model = "judge-model";
  j.base_url = url;
  j.api_key_env = "TEST_JUDGE_KEY";
  j.retries = 2;
  j.timeout_ms = 1000;
  return j;
}

judge_prompt prompt() {
  const std::vector<std::string> props{"The answer is right."};
  const std::vector<evidence_item> ev{{"final_message", "done"}};
  return build_judge_prompt(props, ev, make_nonce());
}

const std::string key = "sk-test-0123456789-secret";

TEST(JudgeClient, ReadsBothReplyFormats) {
  auto o =
      read_judge_reply(http_judge(judge_spec::adapter_kind::openai_responses, ""), openai_body());
  ASSERT_TRUE(o) << o.error().message;
  EXPECT_EQ(o->text, answer_text);
  EXPECT_EQ(o->tokens.input_tokens, 1200u);
  EXPECT_EQ(o->tokens.output_tokens, 80u);
  EXPECT_EQ(o->tokens.reasoning_tokens, 30u);
  auto a = read_judge_reply(http_judge(judge_spec::adapter_kind::anthropic_messages, ""),
                            anthropic_body());
  ASSERT_TRUE(a);
  EXPECT_EQ(a->tokens.input_tokens, 900u);
  EXPECT_FALSE(read_judge_reply(http_judge(judge_spec::adapter_kind::anthropic_messages, ""),
                                R"({"content":[]})"));
  EXPECT_FALSE(
      read_judge_reply(http_judge(judge_spec::adapter_kind::openai_responses, ""), "not json"));
}

TEST(JudgeClient, OpenAIRequestAndRetryAfter500) {
  scripted_server s(
      {scripted_server::reply(500, "{}"), scripted_server::reply(200, openai_body())});
  auto j = http_judge(judge_spec::adapter_kind::openai_responses, s.url());
  auto x = ask_judge(j, prompt(), key);
  ASSERT_TRUE(x) << x.error().message;
  EXPECT_EQ(x->attempts, 2);
  ASSERT_EQ(x->retried.size(), 1u);
  EXPECT_NE(x->retried[0].find("HTTP 500"), std::string::npos);
  auto reqs = s.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].rfind("POST /v1/responses HTTP/1.1", 0), 0u) << reqs[0];
  EXPECT_NE(reqs[0].find("Bearer " + key), std::string::npos);
  EXPECT_NE(reqs[0].find("\"model\":\"judge-model\""), std::string::npos);
}

TEST(JudgeClient, AnthropicRequestHeaders) {
  scripted_server s({scripted_server::reply(200, anthropic_body())});
  auto x =
      ask_judge(http_judge(judge_spec::adapter_kind::anthropic_messages, s.url()), prompt(), key);
  ASSERT_TRUE(x) << x.error().message;
  auto reqs = s.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].rfind("POST /v1/messages HTTP/1.1", 0), 0u);
  EXPECT_NE(reqs[0].find("x-api-key: " + key), std::string::npos);
  EXPECT_NE(reqs[0].find("anthropic-version: 2023-06-01"), std::string::npos);
  EXPECT_NE(reqs[0].find("\"max_tokens\""), std::string::npos);
}

TEST(JudgeClient, AlwaysFailingIsAnErrorWithoutTheKey) {
  // The server echoes the key back in its error body: the message must not carry it.
  scripted_server s({scripted_server::reply(503, "{\"error\":\"bad key " + key + "\"}")});
  auto j = http_judge(judge_spec::adapter_kind::openai_responses, s.url());
  j.retries = 1;
  auto x = ask_judge(j, prompt(), key);
  ASSERT_FALSE(x);
  EXPECT_NE(x.error().message.find("HTTP 503"), std::string::npos);
  EXPECT_NE(x.error().message.find("after 2 attempts"), std::string::npos);
  EXPECT_EQ(x.error().message.find(key), std::string::npos) << x.error().message;
  EXPECT_EQ(s.requests().size(), 2u);
}

TEST(JudgeClient, ClientErrorIsNotRetried) {
  scripted_server s({scripted_server::reply(400, "{}")});
  auto x =
      ask_judge(http_judge(judge_spec::adapter_kind::openai_responses, s.url()), prompt(), key);
  ASSERT_FALSE(x);
  EXPECT_EQ(s.requests().size(), 1u);
}

TEST(JudgeClient, SlowAnswerTimesOut) {
  scripted_server s({"SLEEP"});
  auto j = http_judge(judge_spec::adapter_kind::openai_responses, s.url());
  j.retries = 0;
  j.timeout_ms = 300;
  const auto t0 = std::chrono::steady_clock::now();
  auto x = ask_judge(j, prompt(), key);
  ASSERT_FALSE(x);
  EXPECT_EQ(x.error().kind, error_kind::expired) << x.error().message;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(2500));
}

TEST(JudgeClient, RefusedConnectionIsAnError) {
  auto x = http_post("http://127.0.0.1:1/v1/responses", {}, "{}", std::chrono::milliseconds(500));
  EXPECT_FALSE(x);
  EXPECT_FALSE(http_post("ftp://127.0.0.1/", {}, "", std::chrono::milliseconds(100)));
}

TEST(JudgeClient, CommandReadsTheRequestOnStdinWithAMinimalEnvironment) {
  ::setenv("TEST_JUDGE_OTHER_SECRET", "must-not-leak", 1);
  judge_spec j;
  j.name = "cmd";
  j.adapter = judge_spec::adapter_kind::command;
  j.model = "m";
  j.api_key_env = "TEST_JUDGE_KEY";
  j.argv = {"/bin/sh", "-c",
            "test \"$TEST_JUDGE_KEY\" = '" + key +
                "' || exit 9; test -z \"$TEST_JUDGE_OTHER_SECRET\" || exit 8; echo noise >&2; "
                "cat"};
  auto p = prompt();
  auto x = ask_judge(j, p, key);
  ASSERT_TRUE(x) << x.error().message;
  json req = json::parse(x->text);
  EXPECT_EQ(req["schema"], "evalbox.judge-request.v1");
  EXPECT_EQ(req["nonce"], p.nonce);
  EXPECT_EQ(req["ids"], json::array({"p1"}));
  EXPECT_FALSE(x->tokens.input_tokens);
}

TEST(JudgeClient, CommandTimeoutAndFailure) {
  judge_spec j;
  j.name = "cmd";
  j.adapter = judge_spec::adapter_kind::command;
  j.argv = {"/bin/sh", "-c", "sleep 5"};
  j.timeout_ms = 200;
  j.retries = 0;
  const auto t0 = std::chrono::steady_clock::now();
  auto x = ask_judge(j, prompt(), "");
  ASSERT_FALSE(x);
  EXPECT_EQ(x.error().kind, error_kind::expired);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  j.argv = {"/bin/sh", "-c", "exit 3"};
  auto y = ask_judge(j, prompt(), "");
  ASSERT_FALSE(y);
  EXPECT_NE(y.error().message.find("exit 3"), std::string::npos);
}

}  // namespace
}  // namespace evalbox::harness
