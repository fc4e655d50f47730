// The HTTP client against servers the test runs on 127.0.0.1: URL parsing and resolution,
// proxies from the environment, plain exchanges (headers, chunked and oversized bodies, HEAD,
// POST, redirects as answers), every deadline (head, idle, rate floor, total, cancel), a
// CONNECT proxy, and TLS against a CA and leaves the test makes with the openssl CLI.
#include "sandbox/http/client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/fs.h"
#include "tests/sandbox/http/loopback.h"

namespace evalbox::sandbox::http {
namespace {

using namespace evalbox::testing;

// The environment variables proxy_for() reads, cleared for the test and restored after it.
class proxy_env {
 public:
  proxy_env() {
    for (const char* name : names_) {
      const char* v = std::getenv(name);
      saved_.emplace_back(v ? std::optional<std::string>(v) : std::nullopt);
      ::unsetenv(name);
    }
  }
  ~proxy_env() {
    for (size_t i = 0; i < std::size(names_); ++i) {
      if (saved_[i])
        ::setenv(names_[i], saved_[i]->c_str(), 1);
      else
        ::unsetenv(names_[i]);
    }
  }
  proxy_env(const proxy_env&) = delete;
  proxy_env& operator=(const proxy_env&) = delete;

  static void set(const char* name, const std::string& value) { ::setenv(name, value.c_str(), 1); }

 private:
  static constexpr const char* names_[] = {"HTTPS_PROXY", "https_proxy", "HTTP_PROXY",
                                           "http_proxy",  "NO_PROXY",    "no_proxy"};
  std::vector<std::optional<std::string>> saved_;
};

url must_parse(std::string_view text) {
  auto u = parse_url(text);
  EXPECT_TRUE(u) << text << ": " << (u ? "" : u.error().message);
  return u ? *u : url{};
}

request get(const std::string& to) {
  request r;
  r.to = must_parse(to);
  return r;
}

// Short limits, so that a test that fails never waits long.
options quick() {
  options o;
  o.head_timeout = 5s;
  o.idle_timeout = 5s;
  o.total_timeout = 20s;
  return o;
}

// ---- URLs ----

TEST(HttpParseUrl, GoodUrls) {
  url a = must_parse("https://registry.test/v2/");
  EXPECT_TRUE(a.tls);
  EXPECT_EQ(a.host, "registry.test");
  EXPECT_EQ(a.port, "443");
  EXPECT_EQ(a.target, "/v2/");
  EXPECT_EQ(a.authority(), "registry.test");
  EXPECT_EQ(a.str(), "https://registry.test/v2/");

  url b = must_parse("http://api.test:8080");
  EXPECT_FALSE(b.tls);
  EXPECT_EQ(b.port, "8080");
  EXPECT_EQ(b.target, "/");
  EXPECT_EQ(b.authority(), "api.test:8080");
  EXPECT_EQ(b.str(), "http://api.test:8080/");

  // A scheme's default port is not repeated; another scheme's default is.
  EXPECT_EQ(must_parse("http://h.test:80/x").str(), "http://h.test/x");
  EXPECT_EQ(must_parse("https://h.test:443/x").str(), "https://h.test/x");
  EXPECT_EQ(must_parse("https://h.test:80/x").str(), "https://h.test:80/x");
  EXPECT_EQ(must_parse("http://h.test:443/x").authority(), "h.test:443");
  EXPECT_EQ(must_parse("http://h.test:65535/").port, "65535");
  EXPECT_EQ(must_parse("http://10.1.2.3:1/").host, "10.1.2.3");
}

TEST(HttpParseUrl, Ipv6Literals) {
  url a = must_parse("http://[::1]:8080/x");
  EXPECT_EQ(a.host, "::1");
  EXPECT_EQ(a.port, "8080");
  EXPECT_EQ(a.authority(), "[::1]:8080");
  EXPECT_EQ(a.str(), "http://[::1]:8080/x");

  url b = must_parse("https://[2001:db8::7]/v2/");
  EXPECT_EQ(b.host, "2001:db8::7");
  EXPECT_EQ(b.port, "443");
  EXPECT_EQ(b.authority(), "[2001:db8::7]");
  EXPECT_EQ(b.str(), "https://[2001:db8::7]/v2/");

  EXPECT_FALSE(parse_url("http://[::1/"));         // unclosed
  EXPECT_FALSE(parse_url("http://[::1]x/"));       // junk after the bracket
  EXPECT_FALSE(parse_url("http://[::1]:99999/"));  // bad port
  EXPECT_FALSE(parse_url("http://[]/"));           // empty
  EXPECT_FALSE(parse_url("http://[not-an-ip]/"));  // brackets hold an IPv6 address only
  EXPECT_FALSE(parse_url("http://::1/"));          // an IPv6 address needs its brackets
  EXPECT_FALSE(parse_url("http://fe80::1:8080/"));
}

TEST(HttpParseUrl, QueryKeptFragmentDropped) {
  EXPECT_EQ(must_parse("http://h.test/p?q=1&r=2").target, "/p?q=1&r=2");
  EXPECT_EQ(must_parse("http://h.test?q=1").target, "/?q=1");
  EXPECT_EQ(must_parse("http://h.test:81?q=1").str(), "http://h.test:81/?q=1");
  EXPECT_EQ(must_parse("http://h.test/p?q=1#frag").target, "/p?q=1");
  EXPECT_EQ(must_parse("http://h.test/p#frag").target, "/p");
  EXPECT_EQ(must_parse("http://h.test#frag").target, "/");
  EXPECT_EQ(must_parse("https://h.test/p#").str(), "https://h.test/p");
}

TEST(HttpParseUrl, CredentialsRefusedWithoutThePassword) {
  for (const char* text :
       {"https://alice:s3cr3t-pw@registry.test/v2/", "http://alice:s3cr3t-pw@h.test:8080",
        "http://alice:s3cr3t-pw@[::1]/", "https://s3cr3t-pw@h.test/",
        // Invalid for other reasons too: the message still must not carry the password.
        "ftp://alice:s3cr3t-pw@h.test/", "http://alice:s3cr3t-pw@h.test:bad/",
        "http://alice:s3cr3t-pw/x@h.test/"}) {
    auto u = parse_url(text);
    ASSERT_FALSE(u) << text;
    EXPECT_EQ(u.error().kind, error_kind::invalid_argument);
    EXPECT_FALSE(contains(u.error().message, "s3cr3t")) << u.error().message;
  }
  EXPECT_TRUE(contains(parse_url("https://a:b@h.test/").error().message, "credentials"));
}

TEST(HttpParseUrl, BadPortsRefused) {
  for (const char* text :
       {"http://h.test:0/", "http://h.test:65536/", "http://h.test:99999/", "http://h.test:8a/",
        "http://h.test:http/", "http://h.test:-1/", "http://h.test:+80/", "http://h.test:123456/",
        "http://h.test: 80/", "http://h.test:80:80/"}) {
    auto u = parse_url(text);
    ASSERT_FALSE(u) << text;
    EXPECT_EQ(u.error().kind, error_kind::invalid_argument);
  }
}

TEST(HttpParseUrl, SpacesAndControlCharactersRefused) {
  using namespace std::string_literals;
  for (const std::string& text :
       {"http://h .test/"s, "http://h.test/a b"s, "http://h.test/a\tb"s, "http://h.test/\r\nX: y"s,
        "http://h.test\r\nX: y/"s, "http://h.test/a\x01"s, "http://h.test/\x7f"s,
        "http://h.test/a\0b"s, "http://h\\x.test/"s, " http://h.test/"s}) {
    auto u = parse_url(text);
    EXPECT_FALSE(u) << text;
  }
}

TEST(HttpParseUrl, OtherSchemesAndMissingHostsRefused) {
  for (const char* text :
       {"ftp://h.test/", "h.test/x", "//h.test/x", "/x", "", "http://", "http:///x", "http://:80/",
        "https://?q", "file:///etc/passwd", "http:/h.test/"}) {
    auto u = parse_url(text);
    ASSERT_FALSE(u) << text;
    EXPECT_EQ(u.error().kind, error_kind::invalid_argument);
  }
}

TEST(HttpResolveUrl, EveryFormOfLocation) {
  const url base = must_parse("https://registry.test:5000/v2/lib/blobs/sha256:ab?n=1");
  auto abs = resolve_url(base, "http://cdn.test/blob?sig=x#f");
  ASSERT_TRUE(abs);
  EXPECT_EQ(abs->str(), "http://cdn.test/blob?sig=x");

  auto scheme_relative = resolve_url(base, "//cdn.test:8443/blob");
  ASSERT_TRUE(scheme_relative);
  EXPECT_TRUE(scheme_relative->tls);  // the base's scheme
  EXPECT_EQ(scheme_relative->str(), "https://cdn.test:8443/blob");

  auto path = resolve_url(base, "/v2/other?x=1");
  ASSERT_TRUE(path);
  EXPECT_EQ(path->str(), "https://registry.test:5000/v2/other?x=1");

  auto relative = resolve_url(base, "next");
  ASSERT_TRUE(relative);
  EXPECT_EQ(relative->str(), "https://registry.test:5000/v2/lib/blobs/next");

  // The directory of the base is that of its path, never of a '/' in its query.
  auto past_query = resolve_url(must_parse("http://h.test/dir/page?next=/a/b"), "other");
  ASSERT_TRUE(past_query);
  EXPECT_EQ(past_query->str(), "http://h.test/dir/other");

  auto v6 = resolve_url(must_parse("http://[::1]:8080/a/b"), "/c");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->str(), "http://[::1]:8080/c");

  // A Location is checked like any URL.
  EXPECT_FALSE(resolve_url(base, "/a b"));
  EXPECT_FALSE(resolve_url(base, "//user:pw@cdn.test/"));
}

TEST(HttpResolveUrl, OtherSchemesRefused) {
  const url base = must_parse("https://registry.test/v2/");
  for (const char* location : {"ftp://cdn.test/blob", "file:///etc/passwd", "", "gopher://x/",
                               "javascript:alert(1)", "mailto:a@b.test", "data:text/plain,x"}) {
    auto u = resolve_url(base, location);
    ASSERT_FALSE(u) << location << " -> " << u->str();
    EXPECT_EQ(u.error().kind, error_kind::invalid_argument);
  }
  auto leak = resolve_url(base, "ftp://alice:s3cr3t-pw@cdn.test/");
  ASSERT_FALSE(leak);
  EXPECT_FALSE(contains(leak.error().message, "s3cr3t")) << leak.error().message;
}

TEST(HttpIequals, IgnoresAsciiCaseOnly) {
  EXPECT_TRUE(iequals("Content-Length", "content-LENGTH"));
  EXPECT_FALSE(iequals("Content-Length", "Content-Lengt"));
  EXPECT_FALSE(iequals("a", "b"));
  EXPECT_TRUE(iequals("", ""));
}

// ---- proxies from the environment ----

TEST(HttpProxyFor, VariableChosenByScheme) {
  proxy_env env;
  const url https_target = must_parse("https://registry.test/v2/");
  const url http_target = must_parse("http://api.test/");
  auto none = proxy_for(https_target);
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none);

  proxy_env::set("HTTPS_PROXY", "http://secure-proxy.test:3128");
  proxy_env::set("HTTP_PROXY", "http://plain-proxy.test:8080");
  auto s = proxy_for(https_target);
  ASSERT_TRUE(s && *s);
  EXPECT_EQ((*s)->via.host, "secure-proxy.test");
  EXPECT_EQ((*s)->via.port, "3128");
  EXPECT_FALSE((*s)->via.tls);
  EXPECT_TRUE((*s)->authorization.empty());
  auto p = proxy_for(http_target);
  ASSERT_TRUE(p && *p);
  EXPECT_EQ((*p)->via.host, "plain-proxy.test");
  EXPECT_EQ((*p)->via.port, "8080");

  // The lower-case spelling, and a value without a scheme (http:// is meant).
  ::unsetenv("HTTPS_PROXY");
  ::unsetenv("HTTP_PROXY");
  proxy_env::set("https_proxy", "lower-proxy.test:3129");
  auto l = proxy_for(https_target);
  ASSERT_TRUE(l && *l);
  EXPECT_EQ((*l)->via.host, "lower-proxy.test");
  EXPECT_EQ((*l)->via.port, "3129");
  auto unset = proxy_for(http_target);  // https_proxy is not for http
  ASSERT_TRUE(unset);
  EXPECT_FALSE(*unset);
}

TEST(HttpProxyFor, NoProxyForms) {
  proxy_env env;
  proxy_env::set("HTTPS_PROXY", "http://proxy.test:3128");
  auto proxied = [](const char* target) {
    auto p = proxy_for(must_parse(target));
    EXPECT_TRUE(p) << target;
    return p && p->has_value();
  };
  proxy_env::set("NO_PROXY", "*");
  EXPECT_FALSE(proxied("https://anything.test/"));

  proxy_env::set("NO_PROXY", "registry.test");  // a host, and a domain suffix
  EXPECT_FALSE(proxied("https://registry.test/"));
  EXPECT_FALSE(proxied("https://REGISTRY.test/"));
  EXPECT_FALSE(proxied("https://eu.registry.test/"));
  EXPECT_TRUE(proxied("https://otherregistry.test/"));
  EXPECT_TRUE(proxied("https://registry.test.evil/"));

  proxy_env::set("NO_PROXY", ".corp.test");
  EXPECT_FALSE(proxied("https://api.corp.test/"));
  EXPECT_FALSE(proxied("https://corp.test/"));
  EXPECT_TRUE(proxied("https://notcorp.test/"));

  proxy_env::set("NO_PROXY", " a.test ,  b.test:5000,,10.0.0.5 ");  // spaces, a port, an IP
  EXPECT_FALSE(proxied("https://a.test/"));
  EXPECT_FALSE(proxied("https://b.test:5000/"));
  EXPECT_FALSE(proxied("https://b.test/"));
  EXPECT_FALSE(proxied("https://10.0.0.5/"));
  EXPECT_TRUE(proxied("https://10.0.0.6/"));
  EXPECT_TRUE(proxied("https://c.test/"));

  ::unsetenv("NO_PROXY");
  proxy_env::set("no_proxy", "registry.test");  // the lower-case spelling
  EXPECT_FALSE(proxied("https://registry.test/"));
  EXPECT_TRUE(proxied("https://api.test/"));
}

TEST(HttpProxyFor, LoopbackNeverProxied) {
  proxy_env env;
  proxy_env::set("HTTPS_PROXY", "http://proxy.test:3128");
  proxy_env::set("HTTP_PROXY", "http://proxy.test:3128");
  for (const char* target :
       {"https://127.0.0.1:8443/", "http://127.0.0.1/", "https://[::1]/", "http://localhost:8080/",
        "https://registry.localhost/", "http://127.1.2.3/"}) {
    auto p = proxy_for(must_parse(target));
    ASSERT_TRUE(p) << target;
    EXPECT_FALSE(*p) << target;
  }
}

TEST(HttpProxyFor, CredentialsBecomeBasicAuthorization) {
  proxy_env env;
  proxy_env::set("HTTPS_PROXY", "http://agent:pa55@proxy.test:3128/");
  auto p = proxy_for(must_parse("https://registry.test/"));
  ASSERT_TRUE(p && *p) << (p ? "" : p.error().message);
  EXPECT_EQ((*p)->authorization, "Basic YWdlbnQ6cGE1NQ==");  // base64("agent:pa55")
  EXPECT_EQ((*p)->via.host, "proxy.test");
  EXPECT_EQ((*p)->via.port, "3128");
  EXPECT_FALSE(contains((*p)->via.str(), "pa55"));
}

TEST(HttpProxyFor, MalformedValueNamesTheVariable) {
  proxy_env env;
  const url https_target = must_parse("https://registry.test/");
  for (const char* value : {"https://proxy.test:3128", "http://proxy.test:notaport",
                            "socks5://proxy.test:1080", "http://", "http://agent:pa55@:3128"}) {
    proxy_env::set("HTTPS_PROXY", value);
    auto p = proxy_for(https_target);
    ASSERT_FALSE(p) << value;
    EXPECT_EQ(p.error().kind, error_kind::invalid_argument);
    EXPECT_TRUE(contains(p.error().message, "HTTPS_PROXY")) << p.error().message;
    EXPECT_FALSE(contains(p.error().message, "pa55")) << p.error().message;
  }
  ::unsetenv("HTTPS_PROXY");
  proxy_env::set("http_proxy", "http://proxy.test:0");
  auto p = proxy_for(must_parse("http://api.test/"));
  ASSERT_FALSE(p);
  EXPECT_TRUE(contains(p.error().message, "http_proxy")) << p.error().message;
}

// ---- exchanges ----

TEST(HttpFetch, HeadersSentAndReceived) {
  loopback_server s(reply_with(
      200, "hello", "Content-Type: text/plain\r\nX-Reply: first\r\nx-reply: second\r\n"));
  request req = get(s.url("/v2/x?q=1"));
  req.headers = {{"Authorization", "Bearer token-1"}, {"Accept", "application/json"}};
  options o = quick();
  o.user_agent = "evalbox-test/1";
  auto r = fetch(req, o);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->status(), 200);
  EXPECT_EQ(r->header("content-type"), "text/plain");
  EXPECT_EQ(r->header("X-REPLY"), "first");  // the first of that name
  EXPECT_EQ(r->header("x-missing"), std::nullopt);
  EXPECT_EQ(r->content_length(), 5u);
  EXPECT_GE(r->headers().size(), 4u);
  auto body = r->read_all(100);
  ASSERT_TRUE(body) << body.error().message;
  EXPECT_EQ(*body, "hello");
  auto again = r->read_all(100);  // the end stays the end
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, "");

  auto reqs = s.requests();
  ASSERT_EQ(reqs.size(), 1u);
  const std::string& sent = reqs[0];
  EXPECT_EQ(sent.rfind("GET /v2/x?q=1 HTTP/1.1\r\n", 0), 0u) << sent;
  EXPECT_TRUE(contains(sent, "\r\nHost: 127.0.0.1:" + std::to_string(s.port()) + "\r\n")) << sent;
  EXPECT_TRUE(contains(sent, "\r\nUser-Agent: evalbox-test/1\r\n")) << sent;
  EXPECT_TRUE(contains(sent, "\r\nConnection: close\r\n")) << sent;
  EXPECT_TRUE(contains(sent, "\r\nAuthorization: Bearer token-1\r\n")) << sent;
  EXPECT_TRUE(contains(sent, "\r\nAccept: application/json\r\n")) << sent;

  auto all = fetch_all(get(s.url()), quick());
  ASSERT_TRUE(all) << all.error().message;
  EXPECT_EQ(all->status, 200);
  EXPECT_EQ(all->body, "hello");
  EXPECT_EQ(all->header("X-Reply"), "first");
}

TEST(HttpFetch, ChunkedBody) {
  loopback_server s(
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
      "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n");
  auto r = fetch(get(s.url()), quick());
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->content_length(), std::nullopt);
  auto body = r->read_all(100);
  ASSERT_TRUE(body) << body.error().message;
  EXPECT_EQ(*body, "hello world");
}

TEST(HttpFetch, BodyUntilClose) {
  loopback_server s("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nall of it");
  auto r = fetch_all(get(s.url()), quick());
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->body, "all of it");
}

TEST(HttpFetch, ReadInSmallPieces) {
  const std::string big(100000, 'x');
  loopback_server s(reply_with(200, big));
  auto r = fetch(get(s.url()), quick());
  ASSERT_TRUE(r) << r.error().message;
  std::string got;
  std::byte buf[777];
  for (;;) {
    auto n = r->read(buf);
    ASSERT_TRUE(n) << n.error().message;
    ASSERT_LE(*n, sizeof buf);
    if (*n == 0) break;
    got.append(reinterpret_cast<const char*>(buf), *n);
  }
  EXPECT_EQ(got, big);
}

TEST(HttpFetch, BodyLargerThanMaxIsAnError) {
  loopback_server s(reply_with(200, std::string(100000, 'x')));
  auto r = fetch(get(s.url()), quick());
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->content_length(), 100000u);
  auto body = r->read_all(1000);
  ASSERT_FALSE(body);
  EXPECT_EQ(body.error().kind, error_kind::invalid_argument);
  EXPECT_TRUE(contains(body.error().message, "1000")) << body.error().message;

  auto all = fetch_all(get(s.url()), quick(), 99999);
  ASSERT_FALSE(all);
  EXPECT_EQ(all.error().kind, error_kind::invalid_argument);
  auto exact = fetch_all(get(s.url()), quick(), 100000);
  ASSERT_TRUE(exact) << exact.error().message;
  EXPECT_EQ(exact->body.size(), 100000u);
}

TEST(HttpFetch, HeadReadsNoBody) {
  // The head announces 1000 bytes and the connection stays open: reading a body would wait.
  loopback_server s([](loopback_server& self, int fd, const std::string&) {
    send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nConnection: close\r\n\r\n");
    self.pause(10s);
  });
  request req = get(s.url("/v2/blob"));
  req.method = "HEAD";
  const auto t0 = test_clock::now();
  auto r = fetch(req, quick());
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->status(), 200);
  EXPECT_EQ(r->content_length(), 1000u);
  auto body = r->read_all(10);
  ASSERT_TRUE(body) << body.error().message;
  EXPECT_EQ(*body, "");
  EXPECT_LT(since(t0), 3s);
  EXPECT_EQ(s.requests().at(0).rfind("HEAD /v2/blob HTTP/1.1\r\n", 0), 0u);
}

TEST(HttpFetch, PostSendsTheBody) {
  loopback_server s([](loopback_server&, int fd, const std::string& req) {
    const size_t head = req.find("\r\n\r\n");
    send_all(fd, reply_with(201, "got:" + req.substr(head + 4)));
  });
  request req = get(s.url("/v1/responses"));
  req.method = "POST";
  req.headers = {{"Content-Type", "application/json"}};
  req.body = R"({"model":"m"})";
  auto r = fetch_all(req, quick());
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->status, 201);
  EXPECT_EQ(r->body, R"(got:{"model":"m"})");
  const std::string sent = s.requests().at(0);
  EXPECT_EQ(sent.rfind("POST /v1/responses HTTP/1.1\r\n", 0), 0u) << sent;
  EXPECT_TRUE(contains(sent, "\r\nContent-Length: 13\r\n")) << sent;
  EXPECT_TRUE(contains(sent, "\r\nContent-Type: application/json\r\n")) << sent;

  // An empty POST still says how long its body is.
  request empty = get(s.url("/v1/ping"));
  empty.method = "POST";
  ASSERT_TRUE(fetch_all(empty, quick()));
  EXPECT_TRUE(contains(s.requests().at(1), "\r\nContent-Length: 0\r\n")) << s.requests().at(1);
}

TEST(HttpFetch, RefusedPortIsAnIoError) {
  // A bound socket that does not listen: its port refuses connections, and stays ours.
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  const std::string to = "http://127.0.0.1:" + std::to_string(ntohs(a.sin_port)) + "/x";
  const auto t0 = test_clock::now();
  auto r = fetch(get(to), quick());
  ::close(fd);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, error_kind::io);
  EXPECT_TRUE(contains(r.error().message, "GET " + to)) << r.error().message;
  EXPECT_LT(since(t0), 3s);
}

TEST(HttpFetch, MessagesNeverCarryHeaders) {
  loopback_server s([](loopback_server& self, int, const std::string&) { self.pause(10s); });
  request req = get(s.url());
  req.headers = {{"Authorization", "Bearer sk-very-secret"}};
  options o = quick();
  o.head_timeout = 200ms;
  auto r = fetch(req, o);
  ASSERT_FALSE(r);
  EXPECT_FALSE(contains(r.error().message, "sk-very-secret")) << r.error().message;
}

TEST(HttpFetch, SilentServerHitsHeadTimeout) {
  loopback_server s([](loopback_server& self, int, const std::string&) { self.pause(10s); });
  options o = quick();
  o.head_timeout = 300ms;
  const auto t0 = test_clock::now();
  auto r = fetch(get(s.url()), o);
  const auto took = since(t0);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, error_kind::expired) << r.error().message;
  EXPECT_GE(took, 250ms);
  EXPECT_LT(took, 3s);
}

TEST(HttpFetch, StalledBodyHitsIdleTimeout) {
  loopback_server s([](loopback_server& self, int fd, const std::string&) {
    send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\nabc");
    self.pause(10s);
  });
  options o = quick();
  o.idle_timeout = 300ms;
  auto r = fetch(get(s.url()), o);
  ASSERT_TRUE(r) << r.error().message;
  const auto t0 = test_clock::now();
  auto body = r->read_all(1000);
  const auto took = since(t0);
  ASSERT_FALSE(body);
  EXPECT_EQ(body.error().kind, error_kind::expired) << body.error().message;
  EXPECT_LT(took, 3s);
}

// Dripping: one byte every 200 ms, `n` bytes in all.
loopback_server::handler drip(size_t n, milliseconds every = 200ms) {
  return [n, every](loopback_server& self, int fd, const std::string&) {
    if (!send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(n) +
                          "\r\nConnection: close\r\n\r\n"))
      return;
    for (size_t i = 0; i < n; ++i)
      if (!self.pause(every) || !send_all(fd, std::string(1, static_cast<char>('a' + i % 26))))
        return;
  };
}

TEST(HttpFetch, SlowSteadyBodyIsNotIdle) {
  // idle_timeout bounds the wait for any bytes, not for a full buffer: a byte every 200 ms
  // keeps a 1 s idle limit from firing although the whole body takes 2 s.
  loopback_server s(drip(10));
  options o = quick();
  o.idle_timeout = 1000ms;
  auto r = fetch_all(get(s.url()), o);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->body, "abcdefghij");
}

TEST(HttpFetch, DrippingBodyIsCutByTheRateFloor) {
  loopback_server s(drip(1000));
  options o = quick();
  o.min_rate = 100;  // bytes/s; the server sends 5
  o.rate_window = 500ms;
  auto r = fetch(get(s.url()), o);
  ASSERT_TRUE(r) << r.error().message;
  const auto t0 = test_clock::now();
  auto body = r->read_all(2000);
  const auto took = since(t0);
  ASSERT_FALSE(body);
  EXPECT_EQ(body.error().kind, error_kind::expired);
  EXPECT_TRUE(contains(body.error().message, "floor")) << body.error().message;
  EXPECT_GE(took, 400ms);
  EXPECT_LT(took, 4s);  // idle_timeout (5 s) is not what ends it
}

TEST(HttpFetch, RateFloorMetIsNotCut) {
  loopback_server s(drip(12, 50ms));  // 20 bytes/s for 600 ms
  options o = quick();
  o.min_rate = 5;
  o.rate_window = 200ms;
  auto r = fetch_all(get(s.url()), o);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->body, "abcdefghijkl");
}

TEST(HttpFetch, TotalTimeoutBoundsTheExchange) {
  // Every byte arrives well within idle_timeout: only the total limit ends the body.
  loopback_server dripping(drip(1000, 100ms));
  options o = quick();
  o.total_timeout = 1000ms;
  auto t0 = test_clock::now();
  auto r = fetch(get(dripping.url()), o);
  ASSERT_TRUE(r) << r.error().message;
  auto body = r->read_all(2000);
  auto took = since(t0);
  ASSERT_FALSE(body);
  EXPECT_EQ(body.error().kind, error_kind::expired) << body.error().message;
  EXPECT_GE(took, 800ms);
  EXPECT_LT(took, 4s);

  // And the head: a silent server with a long head_timeout.
  loopback_server silent([](loopback_server& self, int, const std::string&) { self.pause(10s); });
  o.head_timeout = 30s;
  o.total_timeout = 400ms;
  t0 = test_clock::now();
  auto head = fetch(get(silent.url()), o);
  took = since(t0);
  ASSERT_FALSE(head);
  EXPECT_EQ(head.error().kind, error_kind::expired) << head.error().message;
  EXPECT_LT(took, 3s);
}

TEST(HttpFetch, CancelEndsAStalledRead) {
  loopback_server s([](loopback_server& self, int fd, const std::string&) {
    send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\nab");
    self.pause(20s);
  });
  std::atomic<bool> cancel{false};
  options o = quick();
  o.idle_timeout = 30s;
  o.total_timeout = 0ms;
  o.cancel = &cancel;
  auto r = fetch(get(s.url()), o);
  ASSERT_TRUE(r) << r.error().message;
  std::atomic<int64_t> set_at{0};
  std::thread canceller([&] {
    std::this_thread::sleep_for(300ms);
    set_at = test_clock::now().time_since_epoch().count();
    cancel = true;
  });
  auto body = r->read_all(1000);
  const auto returned = test_clock::now();
  canceller.join();
  ASSERT_FALSE(body);
  EXPECT_EQ(body.error().kind, error_kind::cancelled) << body.error().message;
  const auto after = returned - test_clock::time_point(test_clock::duration(set_at.load()));
  EXPECT_LT(after, 2s);  // about 100 ms: the flag is looked at between slices

  // A flag already set ends the exchange before its head.
  auto early = fetch(get(s.url()), o);
  ASSERT_FALSE(early);
  EXPECT_EQ(early.error().kind, error_kind::cancelled);
}

TEST(HttpFetch, RedirectIsAnAnswer) {
  loopback_server s(reply_with(302, "", "Location: /v2/elsewhere?sig=1\r\n"));
  const url from = must_parse(s.url("/v2/blob"));
  request req;
  req.to = from;
  auto r = fetch_all(req, quick());
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->status, 302);
  auto location = r->header("location");
  ASSERT_TRUE(location);
  EXPECT_EQ(*location, "/v2/elsewhere?sig=1");
  EXPECT_EQ(s.requests().size(), 1u);  // not followed
  auto next = resolve_url(from, *location);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->str(), s.url("/v2/elsewhere?sig=1"));
}

TEST(HttpFetch, GarbageAnswerIsAnIoError) {
  loopback_server s("SSH-2.0-OpenSSH_9.2\r\n\r\n");
  auto r = fetch(get(s.url()), quick());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, error_kind::io);
}

// ---- proxies ----

TEST(HttpProxy, HttpTargetUsesAbsoluteForm) {
  proxy_env env;
  loopback_server proxy_server(reply_with(200, "from the proxy"));
  proxy_env::set("HTTP_PROXY",
                 "http://agent:pa55@127.0.0.1:" + std::to_string(proxy_server.port()));
  request req = get("http://origin.test:8080/x?y=1");
  auto p = proxy_for(req.to);
  ASSERT_TRUE(p && *p) << (p ? "" : p.error().message);
  options o = quick();
  o.via = **p;
  auto r = fetch_all(req, o);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->body, "from the proxy");
  const std::string sent = proxy_server.requests().at(0);
  EXPECT_EQ(sent.rfind("GET http://origin.test:8080/x?y=1 HTTP/1.1\r\n", 0), 0u) << sent;
  EXPECT_TRUE(contains(sent, "\r\nHost: origin.test:8080\r\n")) << sent;
  EXPECT_TRUE(contains(sent, "\r\nProxy-Authorization: Basic YWdlbnQ6cGE1NQ==\r\n")) << sent;
}

// ---- TLS ----

// A CA and leaves it signed, made with the openssl CLI once per test process: `leaf` for
// localhost, 127.0.0.1 and registry.test (the name the proxy test asks for), `other` for
// other.test only.
class HttpTls : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new temp_dir("evalbox-http-tls");
    if (auto error = make_test_certificates(dir_->path())) setup_error_ = new std::string(*error);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
    delete setup_error_;
    setup_error_ = nullptr;
  }
  void SetUp() override {
    ASSERT_EQ(setup_error_, nullptr) << "making certificates with openssl: " << *setup_error_;
  }

  static std::filesystem::path file(const std::string& name) { return dir_->path() / name; }
  // A TLS server with the certificate and key `name` ("leaf" or "other"), recording requests
  // in a file of its own.
  static tls_server serve(const std::string& name) {
    static int servers = 0;
    return tls_server(file(name + ".pem"), file(name + ".key"),
                      file("requests-" + std::to_string(++servers)));
  }
  static options trusting() {
    options o = quick();
    o.ca_files = {file("ca.pem").string()};
    return o;
  }
  static std::string https(const tls_server& s, const char* host = "127.0.0.1") {
    return "https://" + std::string(host) + ":" + std::to_string(s.port()) + "/v2/";
  }

  static temp_dir* dir_;
  static std::string* setup_error_;
};
temp_dir* HttpTls::dir_ = nullptr;
std::string* HttpTls::setup_error_ = nullptr;

TEST_F(HttpTls, TrustedWithCaFile) {
  tls_server s = serve("leaf");
  auto r = fetch_all(get(https(s)), trusting());
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "hello");
  // By name too (localhost may resolve to ::1 first, where nothing listens: the next
  // address is tried).
  auto named = fetch_all(get(https(s, "localhost")), trusting());
  ASSERT_TRUE(named) << named.error().message;
  EXPECT_EQ(named->body, "hello");
  const auto reqs = s.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].rfind("GET /v2/ HTTP/1.1\r\n", 0), 0u) << reqs[0];
  EXPECT_TRUE(contains(reqs[1], "\r\nHost: localhost:" + std::to_string(s.port()) + "\r\n"));
}

TEST_F(HttpTls, UntrustedIsAnIoError) {
  tls_server s = serve("leaf");
  const auto t0 = test_clock::now();
  auto r = fetch(get(https(s)), quick());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, error_kind::io);
  EXPECT_TRUE(contains(r.error().message, "TLS")) << r.error().message;
  EXPECT_LT(since(t0), 4s);
  EXPECT_TRUE(s.requests().empty());
}

TEST_F(HttpTls, OtherNameRefused) {
  // Chains to the trusted CA, but names other.test: by address or by name, refused.
  tls_server s = serve("other");
  for (const char* host : {"127.0.0.1", "localhost"}) {
    auto r = fetch(get(https(s, host)), trusting());
    ASSERT_FALSE(r) << host;
    EXPECT_EQ(r.error().kind, error_kind::io);
    EXPECT_TRUE(contains(r.error().message, "TLS")) << r.error().message;
  }
  EXPECT_TRUE(s.requests().empty());
}

TEST_F(HttpTls, MissingCaFileIsAnError) {
  tls_server s = serve("leaf");
  options o = trusting();
  o.ca_files.push_back(file("absent.pem").string());
  auto r = fetch(get(https(s)), o);
  ASSERT_FALSE(r);
  EXPECT_TRUE(contains(r.error().message, "absent.pem")) << r.error().message;
}

TEST_F(HttpTls, HttpsToPlainPortFails) {
  // A plain HTTP server answers the ClientHello with a 400, as real ones do.
  loopback_server plain(
      [](loopback_server&, int fd, const std::string&) {
        send_all(fd, reply_with(400, "plain HTTP here"));
      },
      /*raw=*/true);
  options o = trusting();
  o.head_timeout = 10s;
  const auto t0 = test_clock::now();
  auto r = fetch(get("https://127.0.0.1:" + std::to_string(plain.port()) + "/"), o);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, error_kind::io) << r.error().message;
  EXPECT_LT(since(t0), 5s);  // an error, not head_timeout
}

TEST_F(HttpTls, ThroughConnectProxy) {
  proxy_env env;
  tls_server origin = serve("leaf");
  loopback_server proxy_server(connect_proxy);
  proxy_env::set("HTTPS_PROXY",
                 "http://agent:pa55@127.0.0.1:" + std::to_string(proxy_server.port()));
  const std::string target = "registry.test:" + std::to_string(origin.port());
  request req = get("https://" + target + "/v2/");
  auto p = proxy_for(req.to);
  ASSERT_TRUE(p && *p) << (p ? "" : p.error().message);
  options o = trusting();
  o.via = **p;
  auto r = fetch_all(req, o);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "hello");

  const std::string asked = proxy_server.requests().at(0);
  EXPECT_EQ(asked.rfind("CONNECT " + target + " HTTP/1.1\r\n", 0), 0u) << asked;
  EXPECT_TRUE(contains(asked, "\r\nProxy-Authorization: Basic YWdlbnQ6cGE1NQ==\r\n")) << asked;
  // Inside the tunnel: an origin-form request, without the proxy's credentials.
  const std::string inner = origin.requests().at(0);
  EXPECT_EQ(inner.rfind("GET /v2/ HTTP/1.1\r\n", 0), 0u) << inner;
  EXPECT_TRUE(contains(inner, "\r\nHost: " + target + "\r\n")) << inner;
  EXPECT_FALSE(contains(lower_ascii(inner), "proxy-authorization")) << inner;
}

TEST_F(HttpTls, ProxyRefusingTheTunnelIsAnError) {
  loopback_server proxy_server(reply_with(407, "", "Proxy-Authenticate: Basic\r\n"));
  request req = get("https://registry.test/v2/");
  options o = trusting();
  o.via = proxy{must_parse(proxy_server.url()), ""};
  auto r = fetch(req, o);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, error_kind::io);
  EXPECT_TRUE(contains(r.error().message, "407")) << r.error().message;
}

}  // namespace
}  // namespace evalbox::sandbox::http
