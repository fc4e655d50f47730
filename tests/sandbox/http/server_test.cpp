// The HTTP server on 127.0.0.1, driven by raw sockets (for what a client library would not
// send: garbage, stalls, oversized heads, pipelining) and by evalbox's own client: requests,
// keep-alive, 100-continue, HTTP/1.0, streamed and sized responses, the answers the server
// makes by itself (400, 408, 413, 431, 502, 503), abort, write errors and stop.
#include "sandbox/http/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "base/unique_fd.h"
#include "sandbox/http/client.h"

namespace evalbox::sandbox::http {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
using test_clock = std::chrono::steady_clock;

bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

milliseconds since(test_clock::time_point t) {
  return std::chrono::duration_cast<milliseconds>(test_clock::now() - t);
}

// Short limits, so that a test that fails never waits long.
server_options quick() {
  server_options o;
  o.read_timeout = 5s;
  o.write_timeout = 5s;
  return o;
}

std::unique_ptr<server> start(request_handler h, server_options o = quick()) {
  auto s = server::start(std::move(o), std::move(h));
  EXPECT_TRUE(s) << (s ? "" : s.error().message);
  return s ? std::move(*s) : nullptr;
}

options client_opts() {
  options o;
  o.head_timeout = 5s;
  o.idle_timeout = 5s;
  o.total_timeout = 10s;
  return o;
}

request to(const server& s, std::string_view path, std::string method = "GET") {
  request r;
  r.method = std::move(method);
  r.to = *parse_url("http://127.0.0.1:" + std::to_string(s.port()) + std::string(path));
  return r;
}

// A blocking socket connected to the server.
unique_fd dial(const server& s) {
  unique_fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(s.port());
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  return fd;
}

bool send_all(const unique_fd& fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd.get(), data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

struct received {
  std::string bytes;
  bool closed = false;  // the server closed (EOF or reset) within the wait
};

// Reads until `done(bytes)`, the connection closes, or `wait` passes.
template <class Done>
received read_until(const unique_fd& fd, Done done, milliseconds wait = 5s) {
  received r;
  const auto until = test_clock::now() + wait;
  while (!done(r.bytes)) {
    const auto left = std::chrono::duration_cast<milliseconds>(until - test_clock::now());
    if (left <= 0ms) break;
    pollfd p{fd.get(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    char buf[16384];
    const ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
    if (n <= 0) {
      r.closed = true;
      break;
    }
    r.bytes.append(buf, static_cast<size_t>(n));
  }
  return r;
}

received read_to_close(const unique_fd& fd, milliseconds wait = 5s) {
  return read_until(
      fd, [](const std::string&) { return false; }, wait);
}

received read_containing(const unique_fd& fd, std::string_view needle, milliseconds wait = 5s) {
  return read_until(
      fd, [&](const std::string& b) { return contains(b, needle); }, wait);
}

// A flag a handler waits for (at most 5 s) and the test sets.
class latch {
 public:
  void set() {
    std::lock_guard l(mu_);
    set_ = true;
    cv_.notify_all();
  }
  bool wait(milliseconds d = 5s) {
    std::unique_lock l(mu_);
    return cv_.wait_for(l, d, [&] { return set_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool set_ = false;
};

// Answers every request with "METHOD TARGET BODY" (Content-Length), counting the calls.
struct echo {
  std::atomic<int> calls{0};
  std::mutex mu;
  std::vector<incoming_request> seen;

  request_handler handler() {
    return [this](const incoming_request& req, response_stream& out) {
      ++calls;
      {
        std::lock_guard l(mu);
        seen.push_back(req);
      }
      const std::string text = req.method + " " + req.target + " " + req.body;
      EXPECT_TRUE(out.begin(200, {{"Content-Type", "text/plain"}}, text.size()));
      EXPECT_TRUE(out.write(text));
      EXPECT_TRUE(out.end());
    };
  }
};

// ---- requests ----

TEST(HttpServer, GetAndPostThroughTheClient) {
  echo e;
  auto srv = start(e.handler());
  ASSERT_TRUE(srv);

  auto get = fetch_all(to(*srv, "/v1/models?beta=true"), client_opts());
  ASSERT_TRUE(get) << get.error().message;
  EXPECT_EQ(get->status, 200);
  EXPECT_EQ(get->body, "GET /v1/models?beta=true ");
  EXPECT_EQ(get->header("content-length"), "25");

  request post = to(*srv, "/v1/messages", "POST");
  post.headers = {{"X-Api-Key", "k1"}, {"Content-Type", "application/json"}};
  post.body = R"({"model":"m"})";
  auto answer = fetch_all(post, client_opts());
  ASSERT_TRUE(answer) << answer.error().message;
  EXPECT_EQ(answer->status, 200);
  EXPECT_EQ(answer->body, R"(POST /v1/messages {"model":"m"})");

  std::lock_guard l(e.mu);
  ASSERT_EQ(e.seen.size(), 2u);
  const incoming_request& req = e.seen[1];
  EXPECT_EQ(req.header("x-api-key"), "k1");
  EXPECT_EQ(req.header("CONTENT-TYPE"), "application/json");
  EXPECT_EQ(req.header("x-missing"), std::nullopt);
  EXPECT_TRUE(req.peer.starts_with("127.0.0.1:")) << req.peer;
  // Names as sent, in order.
  bool found = false;
  for (size_t i = 0; i + 1 < req.headers.size(); ++i)
    if (req.headers[i].first == "X-Api-Key") found = req.headers[i + 1].first == "Content-Type";
  EXPECT_TRUE(found);
}

TEST(HttpServer, ChunkedRequestBody) {
  echo e;
  auto srv = start(e.handler());
  ASSERT_TRUE(srv);
  auto fd = dial(*srv);
  ASSERT_TRUE(send_all(fd,
                       "POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                       "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n"));
  auto r = read_containing(fd, "POST /up hello world");
  EXPECT_TRUE(r.bytes.starts_with("HTTP/1.1 200 OK\r\n")) << r.bytes;
  EXPECT_TRUE(contains(r.bytes, "\r\nContent-Length: 20\r\n")) << r.bytes;
}

TEST(HttpServer, KeepAliveServesRequestsOnOneConnection) {
  echo e;
  auto srv = start(e.handler());
  ASSERT_TRUE(srv);
  auto fd = dial(*srv);
  ASSERT_TRUE(send_all(fd, "GET /one HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto first = read_containing(fd, "GET /one ");
  EXPECT_FALSE(first.closed);
  EXPECT_FALSE(contains(first.bytes, "Connection: close")) << first.bytes;
  ASSERT_TRUE(send_all(fd, "POST /two HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"));
  auto second = read_containing(fd, "POST /two abc");
  EXPECT_TRUE(contains(second.bytes, "POST /two abc")) << second.bytes;
  // Pipelined: two requests in one send, answered in order; the last asks to close.
  ASSERT_TRUE(send_all(fd,
                       "GET /three HTTP/1.1\r\nHost: x\r\n\r\n"
                       "GET /four HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  auto rest = read_to_close(fd);
  EXPECT_TRUE(rest.closed);
  EXPECT_LT(rest.bytes.find("GET /three "), rest.bytes.find("GET /four ")) << rest.bytes;
  EXPECT_TRUE(contains(rest.bytes, "Connection: close\r\n")) << rest.bytes;
  EXPECT_EQ(e.calls, 4);
  std::lock_guard l(e.mu);
  for (const auto& req : e.seen) EXPECT_EQ(req.peer, e.seen[0].peer);  // one connection
}

TEST(HttpServer, IdleKeepAliveConnectionClosesSilently) {
  echo e;
  server_options o = quick();
  o.read_timeout = 200ms;
  auto srv = start(e.handler(), o);
  ASSERT_TRUE(srv);
  auto fd = dial(*srv);
  ASSERT_TRUE(send_all(fd, "GET /one HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto first = read_containing(fd, "GET /one ");
  ASSERT_TRUE(contains(first.bytes, "GET /one ")) << first.bytes;
  const auto t0 = test_clock::now();
  auto rest = read_to_close(fd, 3s);
  EXPECT_TRUE(rest.closed);
  EXPECT_EQ(rest.bytes, "");  // no 408 for a request that never started
  EXPECT_LT(since(t0), 2s);
}

TEST(HttpServer, ExpectContinueBeforeTheBody) {
  echo e;
  server_options o = quick();
  o.max_body = 100;
  auto srv = start(e.handler(), o);
  ASSERT_TRUE(srv);
  auto fd = dial(*srv);
  ASSERT_TRUE(send_all(fd,
                       "POST /c HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                       "Content-Length: 5\r\n\r\n"));
  auto go = read_containing(fd, "\r\n\r\n");
  EXPECT_EQ(go.bytes, "HTTP/1.1 100 Continue\r\n\r\n");
  ASSERT_TRUE(send_all(fd, "hello"));
  auto r = read_containing(fd, "POST /c hello");
  EXPECT_TRUE(r.bytes.starts_with("HTTP/1.1 200 OK\r\n")) << r.bytes;

  // A body over the limit is refused at once, without a 100.
  auto big = dial(*srv);
  ASSERT_TRUE(send_all(big,
                       "POST /c HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                       "Content-Length: 1000\r\n\r\n"));
  auto refused = read_to_close(big);
  EXPECT_TRUE(refused.bytes.starts_with("HTTP/1.1 413 ")) << refused.bytes;
  EXPECT_EQ(e.calls, 1);
}

TEST(HttpServer, Http10ClosesAfterTheResponse) {
  auto srv = start([](const incoming_request&, response_stream& out) {
    // No length: an HTTP/1.0 client gets the body unframed, ended by the close.
    EXPECT_TRUE(out.begin(200, {}, std::nullopt));
    EXPECT_TRUE(out.write("old "));
    EXPECT_TRUE(out.write("client"));
    EXPECT_TRUE(out.end());
  });
  ASSERT_TRUE(srv);
  auto fd = dial(*srv);
  ASSERT_TRUE(send_all(fd, "GET / HTTP/1.0\r\n\r\n"));
  auto r = read_to_close(fd);
  EXPECT_TRUE(r.closed);
  EXPECT_TRUE(r.bytes.starts_with("HTTP/1.1 200 OK\r\n")) << r.bytes;
  EXPECT_TRUE(contains(r.bytes, "Connection: close\r\n")) << r.bytes;
  EXPECT_FALSE(contains(r.bytes, "Transfer-Encoding")) << r.bytes;
  EXPECT_TRUE(r.bytes.ends_with("\r\n\r\nold client")) << r.bytes;

  // HTTP/1.0 asking for keep-alive is closed all the same.
  auto again = dial(*srv);
  ASSERT_TRUE(send_all(again, "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
  auto r2 = read_to_close(again);
  EXPECT_TRUE(r2.closed);
  EXPECT_TRUE(r2.bytes.ends_with("old client")) << r2.bytes;
}

// ---- responses ----

TEST(HttpServer, ChunkedResponseStreams) {
  latch second;
  std::atomic<bool> wrote_second{false};
  auto srv = start([&](const incoming_request&, response_stream& out) {
    EXPECT_TRUE(out.begin(200, {{"Content-Type", "text/event-stream"}}, std::nullopt));
    EXPECT_TRUE(out.begin(200, {}, std::nullopt).error().kind == error_kind::invalid_argument);
    EXPECT_TRUE(out.write("data: one\n\n"));
    EXPECT_TRUE(out.write(""));  // sends nothing (a zero chunk would end the body)
    EXPECT_TRUE(second.wait());
    wrote_second = true;
    EXPECT_TRUE(out.write("data: two\n\n"));
    EXPECT_TRUE(out.end());
    EXPECT_FALSE(out.write("late"));
  });
  ASSERT_TRUE(srv);
  auto resp = fetch(to(*srv, "/v1/messages", "POST"), client_opts());
  ASSERT_TRUE(resp) << resp.error().message;
  EXPECT_EQ(resp->status(), 200);
  EXPECT_EQ(resp->header("transfer-encoding"), "chunked");
  EXPECT_EQ(resp->header("content-type"), "text/event-stream");
  std::byte buf[256];
  auto n = resp->read(buf);
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(buf), *n), "data: one\n\n");
  EXPECT_FALSE(wrote_second);  // the first chunk arrived while the handler waited
  second.set();
  auto rest = resp->read_all(1024);
  ASSERT_TRUE(rest) << rest.error().message;
  EXPECT_EQ(*rest, "data: two\n\n");
}

TEST(HttpServer, ContentLengthResponse) {
  auto srv = start([](const incoming_request&, response_stream& out) {
    EXPECT_TRUE(out.begin(201, {{"X-Request-Id", "r1"}}, 11));
    EXPECT_TRUE(out.write("hello "));
    auto over = out.write("world!");  // one byte past the length: refused, nothing sent
    ASSERT_FALSE(over);
    EXPECT_EQ(over.error().kind, error_kind::invalid_argument);
    EXPECT_TRUE(out.write("world"));
    EXPECT_TRUE(out.end());
  });
  ASSERT_TRUE(srv);
  auto r = fetch_all(to(*srv, "/"), client_opts());
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->status, 201);
  EXPECT_EQ(r->body, "hello world");
  EXPECT_EQ(r->header("content-length"), "11");
  EXPECT_EQ(r->header("x-request-id"), "r1");
  EXPECT_EQ(r->header("transfer-encoding"), std::nullopt);
}

TEST(HttpServer, HopByHopHeadersDroppedAndBadHeadersRefused) {
  std::atomic<int> calls{0};
  auto srv = start([&](const incoming_request& req, response_stream& out) {
    ++calls;
    if (req.target == "/bad") {
      auto bad = out.begin(200, {{"X-Evil", "a\r\nInjected: 1"}}, std::nullopt);
      ASSERT_FALSE(bad);
      EXPECT_EQ(bad.error().kind, error_kind::invalid_argument);
      EXPECT_FALSE(out.begun());
      return;  // -> 502
    }
    EXPECT_TRUE(out.begin(200,
                          {{"Connection", "close, X-Private"},
                           {"X-Private", "p"},
                           {"Keep-Alive", "timeout=5"},
                           {"Transfer-Encoding", "gzip"},
                           {"Content-Length", "999"},
                           {"Proxy-Authenticate", "Basic"},
                           {"Upgrade", "h2c"},
                           {"X-Kept", "yes"}},
                          2));
    EXPECT_TRUE(out.write("ok"));
    EXPECT_TRUE(out.end());
  });
  ASSERT_TRUE(srv);
  auto fd = dial(*srv);
  ASSERT_TRUE(send_all(fd, "GET /ok HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto r = read_to_close(fd);
  EXPECT_TRUE(r.closed);  // the handler's "Connection: close" closes it
  EXPECT_EQ(r.bytes,
            "HTTP/1.1 200 OK\r\nX-Kept: yes\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");

  auto bad = fetch_all(to(*srv, "/bad"), client_opts());
  ASSERT_TRUE(bad) << bad.error().message;
  EXPECT_EQ(bad->status, 502);
  EXPECT_FALSE(bad->header("injected"));
  EXPECT_EQ(calls, 2);
}

TEST(HttpServer, HandlerThatNeverBeginsGets502) {
  std::atomic<int> calls{0};
  auto srv = start([&](const incoming_request& req, response_stream&) {
    ++calls;
    if (req.target == "/throw") throw std::runtime_error("boom");
  });
  ASSERT_TRUE(srv);
  for (const char* path : {"/", "/throw"}) {
    auto r = fetch_all(to(*srv, path), client_opts());
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->status, 502) << path;
    EXPECT_FALSE(r->body.empty());
  }
  EXPECT_EQ(calls, 2);
}

TEST(HttpServer, UnendedResponseIsEndedForTheHandler) {
  auto srv = start([](const incoming_request& req, response_stream& out) {
    EXPECT_TRUE(out.begin(200, {}, std::nullopt));
    EXPECT_TRUE(out.write(req.target));
  });
  ASSERT_TRUE(srv);
  auto fd = dial(*srv);
  ASSERT_TRUE(send_all(fd, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto first = read_containing(fd, "0\r\n\r\n");
  EXPECT_TRUE(first.bytes.ends_with("2\r\n/a\r\n0\r\n\r\n")) << first.bytes;
  ASSERT_TRUE(send_all(fd, "GET /b HTTP/1.1\r\nHost: x\r\n\r\n"));  // still kept alive
  auto second = read_containing(fd, "0\r\n\r\n");
  EXPECT_TRUE(second.bytes.ends_with("2\r\n/b\r\n0\r\n\r\n")) << second.bytes;
}

TEST(HttpServer, AbortCutsTheResponse) {
  auto srv = start([](const incoming_request& req, response_stream& out) {
    const bool sized = req.target == "/sized";
    EXPECT_TRUE(out.begin(200, {}, sized ? std::optional<uint64_t>(100) : std::nullopt));
    EXPECT_TRUE(out.write("partial"));
    if (req.target == "/throw") throw std::runtime_error("upstream broke");
    out.abort();
    auto after = out.write("more");
    ASSERT_FALSE(after);
    EXPECT_EQ(after.error().kind, error_kind::io);
    EXPECT_FALSE(out.end());
  });
  ASSERT_TRUE(srv);
  for (const char* path : {"/chunked", "/sized", "/throw"}) {
    auto resp = fetch(to(*srv, path), client_opts());
    ASSERT_TRUE(resp) << resp.error().message;
    EXPECT_EQ(resp->status(), 200);
    auto body = resp->read_all(1024);
    ASSERT_FALSE(body) << path << ": a cut body read whole: " << *body;
    EXPECT_EQ(body.error().kind, error_kind::io) << body.error().message;
  }
}

TEST(HttpServer, ShortContentLengthEndFailsAndCloses) {
  std::atomic<bool> end_failed{false};
  auto srv = start([&](const incoming_request&, response_stream& out) {
    EXPECT_TRUE(out.begin(200, {}, 10));
    EXPECT_TRUE(out.write("abc"));
    end_failed = !out.end();
  });
  ASSERT_TRUE(srv);
  auto resp = fetch(to(*srv, "/"), client_opts());
  ASSERT_TRUE(resp) << resp.error().message;
  EXPECT_FALSE(resp->read_all(1024));
  EXPECT_TRUE(end_failed);
}

TEST(HttpServer, WriteErrorsPersistOnceThePeerIsGone) {
  latch client_gone;
  std::atomic<int> kind{-1};
  std::atomic<bool> end_failed{false};
  auto srv = start([&](const incoming_request&, response_stream& out) {
    EXPECT_TRUE(out.begin(200, {}, std::nullopt));
    EXPECT_TRUE(client_gone.wait());
    const std::string block(4096, 'x');
    status last;
    for (int i = 0; i < 200 && last; ++i) {
      last = out.write(block);
      std::this_thread::sleep_for(2ms);
    }
    ASSERT_FALSE(last);
    kind = static_cast<int>(last.error().kind);
    auto again = out.write("y");
    EXPECT_FALSE(again);
    end_failed = !out.end();
  });
  ASSERT_TRUE(srv);
  {
    auto fd = dial(*srv);
    ASSERT_TRUE(send_all(fd, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
    read_containing(fd, "\r\n\r\n");
  }
  client_gone.set();
  const auto t0 = test_clock::now();
  while (kind == -1 && since(t0) < 5s) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(kind, static_cast<int>(error_kind::io));
  EXPECT_TRUE(end_failed);
}

TEST(HttpServer, WriteTimeoutExpires) {
  std::atomic<int> kind{-1};
  server_options o = quick();
  o.write_timeout = 200ms;
  auto srv = start(
      [&](const incoming_request&, response_stream& out) {
        EXPECT_TRUE(out.begin(200, {}, std::nullopt));
        const std::string block(1u << 20, 'x');
        status last;
        for (int i = 0; i < 256 && last; ++i) last = out.write(block);  // the client never reads
        if (!last) kind = static_cast<int>(last.error().kind);
      },
      o);
  ASSERT_TRUE(srv);
  auto fd = dial(*srv);
  ASSERT_TRUE(send_all(fd, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  const auto t0 = test_clock::now();
  while (kind == -1 && since(t0) < 5s) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(kind, static_cast<int>(error_kind::expired));
}

// ---- what the server answers by itself ----

TEST(HttpServer, GarbageIs400) {
  echo e;
  auto srv = start(e.handler());
  ASSERT_TRUE(srv);
  for (const char* junk : {"NOT HTTP AT ALL\r\n\r\n", "GET / HTTP/1.1\r\nBad Header\r\n\r\n",
                           "GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
                           "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"}) {
    auto fd = dial(*srv);
    ASSERT_TRUE(send_all(fd, junk));
    auto r = read_to_close(fd);
    EXPECT_TRUE(r.closed) << junk;
    EXPECT_TRUE(r.bytes.starts_with("HTTP/1.1 400 Bad Request\r\n")) << junk << r.bytes;
    EXPECT_TRUE(r.bytes.ends_with("\r\n\r\nbad request\n")) << r.bytes;
  }
  EXPECT_EQ(e.calls, 0);
}

TEST(HttpServer, HugeHeaderIs431) {
  echo e;
  auto srv = start(e.handler());
  ASSERT_TRUE(srv);
  auto fd = dial(*srv);
  ASSERT_TRUE(send_all(
      fd, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(100 << 10, 'a') + "\r\n\r\n"));
  auto r = read_to_close(fd);
  EXPECT_TRUE(r.closed);
  EXPECT_TRUE(r.bytes.starts_with("HTTP/1.1 431 ")) << r.bytes.substr(0, 200);
  EXPECT_EQ(e.calls, 0);
}

TEST(HttpServer, BodyOverMaxIs413) {
  echo e;
  server_options o = quick();
  o.max_body = 1024;
  auto srv = start(e.handler(), o);
  ASSERT_TRUE(srv);
  {
    auto fd = dial(*srv);
    ASSERT_TRUE(send_all(
        fd, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2048\r\n\r\n" + std::string(100, 'b')));
    auto r = read_to_close(fd);
    EXPECT_TRUE(r.closed);
    EXPECT_TRUE(r.bytes.starts_with("HTTP/1.1 413 ")) << r.bytes;
  }
  {
    auto fd = dial(*srv);
    const std::string chunk = "320\r\n" + std::string(800, 'c') + "\r\n";  // 800 bytes
    ASSERT_TRUE(send_all(
        fd, "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk + chunk));
    auto r = read_to_close(fd);
    EXPECT_TRUE(r.closed);
    EXPECT_TRUE(r.bytes.starts_with("HTTP/1.1 413 ")) << r.bytes;
  }
  {  // exactly max_body passes
    auto fd = dial(*srv);
    ASSERT_TRUE(send_all(
        fd, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1024\r\n\r\n" + std::string(1024, 'd')));
    auto r = read_containing(fd, std::string(1024, 'd'));
    EXPECT_TRUE(r.bytes.starts_with("HTTP/1.1 200 ")) << r.bytes.substr(0, 200);
  }
  EXPECT_EQ(e.calls, 1);
}

TEST(HttpServer, StalledRequestIs408) {
  echo e;
  server_options o = quick();
  o.read_timeout = 200ms;
  auto srv = start(e.handler(), o);
  ASSERT_TRUE(srv);
  for (const char* half :
       {"GET / HTTP/1.1\r\nHost: x\r\n", "POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc"}) {
    auto fd = dial(*srv);
    const auto t0 = test_clock::now();
    ASSERT_TRUE(send_all(fd, half));
    auto r = read_to_close(fd, 3s);
    EXPECT_TRUE(r.closed) << half;
    EXPECT_TRUE(r.bytes.starts_with("HTTP/1.1 408 ")) << half << r.bytes;
    EXPECT_GE(since(t0), 150ms);
    EXPECT_LT(since(t0), 2s);
  }
  EXPECT_EQ(e.calls, 0);
}

TEST(HttpServer, OverMaxConnectionsIs503) {
  latch release;
  std::atomic<int> in_handler{0};
  server_options o = quick();
  o.max_connections = 1;
  auto srv = start(
      [&](const incoming_request&, response_stream& out) {
        ++in_handler;
        EXPECT_TRUE(release.wait());
        EXPECT_TRUE(out.begin(200, {}, 2));
        EXPECT_TRUE(out.write("ok"));
        EXPECT_TRUE(out.end());
      },
      o);
  ASSERT_TRUE(srv);
  auto first = dial(*srv);
  ASSERT_TRUE(send_all(first, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  const auto t0 = test_clock::now();
  while (in_handler == 0 && since(t0) < 5s) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(in_handler, 1);

  auto second = dial(*srv);
  auto refused = read_to_close(second);
  EXPECT_TRUE(refused.closed);
  EXPECT_TRUE(refused.bytes.starts_with("HTTP/1.1 503 Service Unavailable\r\n")) << refused.bytes;

  release.set();
  auto ok = read_to_close(first);
  EXPECT_TRUE(ok.bytes.ends_with("\r\n\r\nok")) << ok.bytes;

  // The slot comes back once the first connection's thread has ended.
  int status_code = 0;
  for (const auto until = test_clock::now() + 3s; status_code != 200 && test_clock::now() < until;
       std::this_thread::sleep_for(20ms)) {
    auto r = fetch_all(to(*srv, "/"), client_opts());
    if (r) status_code = r->status;
  }
  EXPECT_EQ(status_code, 200);
}

// ---- stop ----

TEST(HttpServer, StopEndsBlockedHandlersPromptly) {
  std::atomic<int> started{0};
  std::atomic<int> write_kind{-1};
  std::atomic<bool> saw_stopping{false};
  server* self = nullptr;
  server_options o = quick();
  o.write_timeout = 60s;  // only stop() can end the blocked write
  auto srv = start(
      [&](const incoming_request& req, response_stream& out) {
        ++started;
        if (req.target == "/write") {
          EXPECT_TRUE(out.begin(200, {}, std::nullopt));
          const std::string block(1u << 20, 'x');
          status last;
          while (last) last = out.write(block);  // the client never reads
          write_kind = static_cast<int>(last.error().kind);
          return;
        }
        while (!self->stopping()) std::this_thread::sleep_for(5ms);  // an upstream wait
        saw_stopping = self->stopping_flag().load();
      },
      o);
  ASSERT_TRUE(srv);
  self = srv.get();
  auto writer = dial(*srv);
  ASSERT_TRUE(send_all(writer, "GET /write HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto waiter = dial(*srv);
  ASSERT_TRUE(send_all(waiter, "GET /wait HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto idle = dial(*srv);  // a connection with no request yet
  const auto t0 = test_clock::now();
  while (started < 2 && since(t0) < 5s) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(started, 2);
  std::this_thread::sleep_for(300ms);  // the writer fills the socket's buffers and blocks

  const auto t1 = test_clock::now();
  srv->stop();
  EXPECT_LT(since(t1), 2s);
  EXPECT_EQ(write_kind, static_cast<int>(error_kind::io));
  EXPECT_TRUE(saw_stopping);
  EXPECT_TRUE(read_to_close(idle, 2s).closed);
  srv->stop();  // idempotent

  // Nothing listens any more.
  unique_fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(srv->port());
  EXPECT_NE(::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
}

TEST(HttpServer, StartErrors) {
  auto handler = [](const incoming_request&, response_stream&) {};
  server_options bad;
  bad.address = "localhost";  // no name lookup
  auto s = server::start(bad, handler);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().kind, error_kind::invalid_argument);

  auto first = start(handler);
  ASSERT_TRUE(first);
  server_options same = quick();
  same.port = first->port();
  auto taken = server::start(same, handler);
  ASSERT_FALSE(taken);
  EXPECT_EQ(taken.error().kind, error_kind::busy) << taken.error().message;
}

}  // namespace
}  // namespace evalbox::sandbox::http
