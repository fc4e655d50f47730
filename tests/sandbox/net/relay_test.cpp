// Network policy `allow` on the host side (sandbox/net): allow-list entries, the CONNECT
// proxy's reading of a request (CONNECT, absolute-form HTTP, IPv6 literals, missing ports,
// malformed and hostile heads), its allow-list matching, and one relay driven over loopback
// sockets the way the helper drives it. Nothing leaves this machine.
#include "sandbox/net/relay.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

namespace evalbox::sandbox::net {
namespace {

// --- targets and the allow plan ---

TEST(ParseTarget, ReadsNamesAddressesAndBracketedIpv6) {
  auto t = parse_target("API.Example.COM:443");
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->host, "api.example.com");
  EXPECT_EQ(t->port, 443);
  EXPECT_FALSE(t->ip_loopback);
  EXPECT_EQ(t->text(), "api.example.com:443");

  t = parse_target("[::1]:8080");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->host, "::1");
  EXPECT_TRUE(t->ip_loopback);
  EXPECT_EQ(t->text(), "[::1]:8080");

  t = parse_target("127.3.2.1:1");
  ASSERT_TRUE(t);
  EXPECT_TRUE(t->ip_loopback);
  t = parse_target("[2001:db8::1]:65535");
  ASSERT_TRUE(t);
  EXPECT_FALSE(t->ip_loopback);
}

TEST(ParseTarget, RefusesMissingAndOutOfRangePorts) {
  for (std::string_view bad :
       {"api.example.com", "api.example.com:", ":443", "host:0", "host:65536", "host:80x",
        "host:99999999999999999999", "[::1]", "[::1]443", "[::1:443", "host:-1"})
    EXPECT_FALSE(parse_target(bad)) << bad;
  EXPECT_EQ(parse_target("api.example.com").error().message,
            "network target api.example.com: expected host:port");
}

TEST(PlanAllow, RelaysLoopbackLiteralsAndProxiesNames) {
  auto p = plan_allow({"127.0.0.1:8080", "[::1]:9000", "api.example.com:443"});
  ASSERT_TRUE(p) << p.error().message;
  ASSERT_EQ(p->listeners.size(), 3u);
  EXPECT_EQ(p->listeners[0].ip, "127.0.0.1");
  EXPECT_FALSE(p->listeners[0].proxy);
  EXPECT_TRUE(p->listeners[1].ipv6);
  EXPECT_TRUE(p->listeners[2].proxy);
  EXPECT_EQ(p->proxy_port, default_proxy_port);
  ASSERT_EQ(p->proxied.size(), 1u);
  EXPECT_EQ(p->proxied[0].text(), "api.example.com:443");
}

TEST(PlanAllow, MovesTheProxyOffAPortARelayTakes) {
  auto p = plan_allow({"127.0.0.1:3128", "127.0.0.1:3129", "api.example.com:443"});
  ASSERT_TRUE(p);
  EXPECT_EQ(p->proxy_port, 3130);
}

TEST(PlanAllow, RefusesNonLoopbackAddresses) {
  for (std::string_view entry : {"192.0.2.1:443", "[2001:db8::1]:443", "10.0.0.1:80"}) {
    auto p = plan_allow({std::string(entry)});
    ASSERT_FALSE(p) << entry;
    EXPECT_NE(p.error().message.find("only loopback IP literals or host names"), std::string::npos);
  }
}

// --- the proxy's reading of a request ---

TEST(ProxyRequest, ConnectIsATunnelToTheAuthority) {
  auto r = parse_proxy_request("CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com");
  ASSERT_TRUE(r) << r.error().detail;
  EXPECT_EQ(r->to.text(), "api.example.com:443");
  EXPECT_EQ(r->forward, "");
}

TEST(ProxyRequest, AbsoluteHttpIsForwardedInOriginForm) {
  auto r = parse_proxy_request(
      "GET http://api.example.com/v1/models?x=1 HTTP/1.1\r\nHost: api.example.com\r\nAccept: */*");
  ASSERT_TRUE(r) << r.error().detail;
  EXPECT_EQ(r->to.text(), "api.example.com:80");
  EXPECT_EQ(r->forward,
            "GET /v1/models?x=1 HTTP/1.1\r\nHost: api.example.com\r\nAccept: */*\r\n\r\n");

  r = parse_proxy_request("POST http://api.example.com:8080 HTTP/1.0");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->to.text(), "api.example.com:8080");
  EXPECT_EQ(r->forward, "POST / HTTP/1.0\r\n\r\n");
}

TEST(ProxyRequest, ReadsIpv6Literals) {
  auto r = parse_proxy_request("CONNECT [::1]:443 HTTP/1.1");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->to.host, "::1");
  EXPECT_EQ(r->to.port, 443);
  r = parse_proxy_request("GET http://[::1]/ HTTP/1.1");  // no port: 80 after the bracket
  ASSERT_TRUE(r);
  EXPECT_EQ(r->to.text(), "[::1]:80");
  r = parse_proxy_request("GET http://[2001:db8::1]:8443/x HTTP/1.1");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->to.text(), "[2001:db8::1]:8443");
}

TEST(ProxyRequest, AConnectWithoutAPortIsABadRequest) {
  auto r = parse_proxy_request("CONNECT api.example.com HTTP/1.1");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().status, "400 Bad Request");
  EXPECT_EQ(r.error().target, "api.example.com");
  EXPECT_EQ(r.error().detail, "network target api.example.com: expected host:port");
}

TEST(ProxyRequest, MalformedLinesAreBadRequests) {
  for (std::string_view head : {"", "GARBAGE", "CONNECT", "CONNECT api.example.com:443"}) {
    auto r = parse_proxy_request(head);
    ASSERT_FALSE(r) << head;
    EXPECT_EQ(r.error().status, "400 Bad Request") << head;
    EXPECT_EQ(r.error().detail, "malformed request line") << head;
  }
}

TEST(ProxyRequest, OtherFormsAreNotAllowed) {
  for (std::string_view head : {"GET /v1/models HTTP/1.1", "GET https://api.example.com/ HTTP/1.1",
                                "OPTIONS * HTTP/1.1", "GET ftp://api.example.com/ HTTP/1.1"}) {
    auto r = parse_proxy_request(head);
    ASSERT_FALSE(r) << head;
    EXPECT_EQ(r.error().status, "405 Method Not Allowed") << head;
  }
}

// What a hostile program could send: a userinfo or fragment that names an allowed host after
// another one, or a port with trailing text, never reaches the allowed host's entry.
TEST(ProxyRequest, AuthorityTricksDoNotReachAnAllowedHost) {
  auto plan = plan_allow({"api.example.com:443", "api.example.com:80"});
  ASSERT_TRUE(plan);
  for (std::string_view head : {"GET http://api.example.com:443@evil.example/ HTTP/1.1",
                                "GET http://evil.example#@api.example.com/ HTTP/1.1",
                                "GET http://evil.example?api.example.com:443/ HTTP/1.1",
                                "CONNECT api.example.com:443@evil.example:443 HTTP/1.1",
                                "CONNECT evil.example:443 api.example.com:443 HTTP/1.1",
                                "CONNECT api.example.com.:443 HTTP/1.1",
                                "CONNECT api.example.com:443\tHTTP/1.1 HTTP/1.1"}) {
    auto r = parse_proxy_request(head);
    EXPECT_TRUE(!r || !proxy_allows(*plan, r->to)) << head << " reached " << r->to.text();
  }
}

TEST(ProxyRequest, AHugeLineIsReadWithoutTrouble) {
  const std::string host(100000, 'a');
  auto r = parse_proxy_request("CONNECT " + host + ":443 HTTP/1.1");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->to.host, host);
  auto bad = parse_proxy_request(std::string(100000, 'x'));
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().target.size(), 200u);  // what is recorded of a malformed line
}

TEST(ProxyAllows, MatchesHostAndPortExactlyAndIgnoresCase) {
  auto plan = plan_allow({"api.example.com:443"});
  ASSERT_TRUE(plan);
  auto allows = [&](std::string_view text) { return proxy_allows(*plan, *parse_target(text)); };
  EXPECT_TRUE(allows("api.example.com:443"));
  EXPECT_TRUE(allows("API.EXAMPLE.COM:443"));
  EXPECT_FALSE(allows("api.example.com:444"));
  EXPECT_FALSE(allows("evil.api.example.com:443"));
  EXPECT_FALSE(allows("api.example.com.evil:443"));
  EXPECT_FALSE(allows("example.com:443"));
}

// --- one relay, driven like the helper's loop, over loopback ---

unique_fd listen_loopback(uint16_t& port) {
  unique_fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  EXPECT_EQ(::listen(fd.get(), 8), 0);
  socklen_t len = sizeof sa;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sa), &len);
  port = ntohs(sa.sin_port);
  return fd;
}

unique_fd connect_loopback(uint16_t port) {
  unique_fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = htons(port);
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  ::fcntl(fd.get(), F_SETFL, O_NONBLOCK);
  return fd;
}

// Runs the relay (and `also`, e.g. an upstream server) until `done` or about two seconds.
void drive(relay& r, const std::function<bool()>& done, const std::function<void()>& also = {}) {
  for (int i = 0; i < 200 && !done(); ++i) {
    std::vector<pollfd> fds;
    r.fill(fds);
    ::poll(fds.data(), fds.size(), 10);
    r.handle(fds);
    if (also) also();
  }
}

std::string read_some(int fd) {
  char buf[4096];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

class ProxyOverLoopback : public ::testing::Test {
 protected:
  void SetUp() override {
    upstream_ = listen_loopback(upstream_port_);
    ::fcntl(upstream_.get(), F_SETFL, O_NONBLOCK);
    auto plan = plan_allow({fmt::format("localhost:{}", upstream_port_)});
    ASSERT_TRUE(plan) << plan.error().message;
    ASSERT_EQ(plan->listeners.size(), 1u);
    relay_.emplace(*plan);
    // The listener pid 1 would pass out: here, one on any free loopback port.
    relay_->add_listener(0, listen_loopback(proxy_port_));
  }
  // Accepts at the upstream server and echoes what arrives, prefixed.
  void serve() {
    if (!served_)
      served_ =
          unique_fd(::accept4(upstream_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!served_) return;
    const std::string got = read_some(served_.get());
    if (!got.empty()) (void)!::write(served_.get(), ("echo:" + got).data(), got.size() + 5);
  }

  uint16_t upstream_port_ = 0, proxy_port_ = 0;
  unique_fd upstream_, served_;
  std::optional<relay> relay_;
};

TEST_F(ProxyOverLoopback, AnAllowedConnectTunnelsBothWaysAndIsRecorded) {
  unique_fd client = connect_loopback(proxy_port_);
  const std::string ask = fmt::format("CONNECT localhost:{} HTTP/1.1\r\n\r\n", upstream_port_);
  ASSERT_EQ(::write(client.get(), ask.data(), ask.size()), static_cast<ssize_t>(ask.size()));
  std::string got;
  drive(*relay_, [&] { return (got += read_some(client.get())).find("\r\n\r\n") != got.npos; });
  EXPECT_EQ(got, "HTTP/1.1 200 Connection established\r\n\r\n");
  ASSERT_EQ(::write(client.get(), "ping", 4), 4);
  got.clear();
  drive(
      *relay_, [&] { return (got += read_some(client.get())) == "echo:ping"; }, [&] { serve(); });
  EXPECT_EQ(got, "echo:ping");
  ASSERT_EQ(relay_->attempts().size(), 1u);
  const attempt& a = relay_->attempts()[0];
  EXPECT_EQ(a.target, fmt::format("localhost:{}", upstream_port_));
  EXPECT_TRUE(a.allowed);
  EXPECT_EQ(a.via, "proxy");
  EXPECT_EQ(a.detail, "");
}

TEST_F(ProxyOverLoopback, AHostOffTheListIsForbiddenAndRecorded) {
  unique_fd client = connect_loopback(proxy_port_);
  const std::string ask = "CONNECT example.org:443 HTTP/1.1\r\n\r\n";
  ASSERT_EQ(::write(client.get(), ask.data(), ask.size()), static_cast<ssize_t>(ask.size()));
  std::string got;
  drive(*relay_, [&] { return (got += read_some(client.get())).find("\r\n\r\n") != got.npos; });
  EXPECT_EQ(got, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n");
  ASSERT_EQ(relay_->attempts().size(), 1u);
  EXPECT_EQ(relay_->attempts()[0].target, "example.org:443");
  EXPECT_FALSE(relay_->attempts()[0].allowed);
  EXPECT_EQ(relay_->attempts()[0].detail, "not in the allow-list");
}

TEST_F(ProxyOverLoopback, AMalformedRequestIsABadRequestAndRecorded) {
  unique_fd client = connect_loopback(proxy_port_);
  const std::string ask = "HELLO\r\n\r\n";
  ASSERT_EQ(::write(client.get(), ask.data(), ask.size()), static_cast<ssize_t>(ask.size()));
  std::string got;
  drive(*relay_, [&] { return (got += read_some(client.get())).find("\r\n\r\n") != got.npos; });
  EXPECT_EQ(got, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
  ASSERT_EQ(relay_->attempts().size(), 1u);
  EXPECT_EQ(relay_->attempts()[0].target, "HELLO");
  EXPECT_EQ(relay_->attempts()[0].detail, "malformed request line");
}

// A head that never ends is refused once it passes the limit, and recorded like any other
// refusal (it used to be dropped without a trace).
TEST_F(ProxyOverLoopback, AnEndlessHeadIsRefusedAndRecorded) {
  unique_fd client = connect_loopback(proxy_port_);
  const std::string flood = "CONNECT " + std::string(max_request_head, 'a');
  ASSERT_EQ(::write(client.get(), flood.data(), flood.size()), static_cast<ssize_t>(flood.size()));
  std::string got;
  drive(*relay_, [&] { return (got += read_some(client.get())).find("\r\n\r\n") != got.npos; });
  EXPECT_EQ(got, "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\n\r\n");
  ASSERT_EQ(relay_->attempts().size(), 1u);
  const attempt& a = relay_->attempts()[0];
  EXPECT_EQ(a.target, flood.substr(0, 200));
  EXPECT_FALSE(a.allowed);
  EXPECT_EQ(a.detail, fmt::format("request head larger than {} bytes", max_request_head));
}

}  // namespace
}  // namespace evalbox::sandbox::net
