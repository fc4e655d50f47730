// HTTP/1.1 from the host, over TCP or TLS, with deadlines on everything: how evalbox talks to a
// model API (a judge) and to an image registry. Boost.Beast, Asio and OpenSSL live in
// client.cpp only.
//
// One request per connection ("Connection: close"); redirects are answers, never followed here
// (the caller decides where it may go and what it may send there). TLS verifies the server's
// chain against the host's CA store plus any `ca_files`, and its name (or IP address). A proxy
// is used only when the caller passes one (proxy_for() reads it from the environment's
// HTTPS_PROXY / HTTP_PROXY / NO_PROXY for the callers that honour them).
//
// A response is read as a stream: fetch() returns once the status line and headers are in, and
// the body is pulled with read(). Every wait is bounded: the connect and the head by
// `head_timeout`, each body read by `idle_timeout`, and a body that arrives slower than
// `min_rate` bytes per second, averaged over `rate_window`, is cut (a server that drips one
// byte a second never ends otherwise).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"

namespace evalbox::sandbox::http {

using header_list = std::vector<std::pair<std::string, std::string>>;

struct url {
  bool tls = false;
  std::string host;    // without brackets for IPv6
  std::string port;    // always set ("443" / "80" by default)
  std::string target;  // path and query, "/" at least

  // "https://host[:port]/target": the port only when it is not the scheme's default.
  [[nodiscard]] std::string str() const;
  // "host[:port]" as a Host header says it.
  [[nodiscard]] std::string authority() const;
};

// Parses an absolute http:// or https:// URL. Credentials in the URL are refused (a URL is
// logged; a password must not be).
result<url> parse_url(std::string_view text);
// `location` (a Location header) against `base`: absolute, scheme-relative or a path.
result<url> resolve_url(const url& base, std::string_view location);

struct proxy {
  url via;                    // http://proxy:port (TLS to the proxy is not supported)
  std::string authorization;  // "Basic ..." when the proxy URL carried user:password
};

// The proxy the environment names for `target` (HTTPS_PROXY / https_proxy for https, HTTP_PROXY
// / http_proxy for http; none when NO_PROXY / no_proxy matches the host: "*", a host, a
// ".domain" or "domain" suffix, an IP; loopback is never proxied). A malformed proxy URL is an
// error that names its variable.
result<std::optional<proxy>> proxy_for(const url& target);

struct options {
  std::chrono::milliseconds head_timeout{30000};  // name lookup, connect, TLS, request, head
  std::chrono::milliseconds idle_timeout{30000};  // the longest wait for any body bytes
  uint64_t min_rate = 0;                          // bytes/s over rate_window; 0: no floor
  std::chrono::milliseconds rate_window{30000};
  std::chrono::milliseconds total_timeout{0};  // the whole exchange, body included; 0: none
  size_t max_head = 64u << 10;                 // status line and headers
  std::vector<std::string> ca_files;           // PEM files trusted besides the host's store
  std::optional<proxy> via;                    // see proxy_for()
  const std::atomic<bool>* cancel = nullptr;   // set: the next wait ends with cancelled
  std::string user_agent = "evalbox";
};

struct request {
  std::string method = "GET";
  url to;
  header_list headers;  // never in an error message
  std::string body;
};

// A response whose head has arrived. Move-only; destruction closes the connection.
class response {
 public:
  response();
  response(response&&) noexcept;
  response& operator=(response&&) noexcept;
  ~response();

  [[nodiscard]] int status() const noexcept;
  // The first header of that name (case-insensitive), or nullopt.
  [[nodiscard]] std::optional<std::string> header(std::string_view name) const;
  [[nodiscard]] const header_list& headers() const noexcept;
  // Content-Length, when the server sent one.
  [[nodiscard]] std::optional<uint64_t> content_length() const noexcept;

  // Reads up to buf.size() body bytes; 0 at the end of the body. Errors: expired (idle or
  // below the rate floor), cancelled, io (the connection broke, the framing was bad).
  result<size_t> read(std::span<std::byte> buf);
  // The rest of the body, at most `max` bytes (more is an error, invalid_argument).
  result<std::string> read_all(size_t max);

  struct impl;

 private:
  friend result<response> fetch(const request&, const options&);
  std::unique_ptr<impl> impl_;
};

// Sends `req` and waits for the response's head. Any HTTP status is a response; an error is
// what prevented one (a bad name, a refused connection, a TLS failure, a timeout: expired).
// Messages name the method and URL, never a header.
result<response> fetch(const request& req, const options& opts);

// fetch() and read_all(max_body): a whole small exchange.
struct reply {
  int status = 0;
  header_list headers;
  std::string body;
  [[nodiscard]] std::optional<std::string> header(std::string_view name) const;
};
result<reply> fetch_all(const request& req, const options& opts, size_t max_body = 4u << 20);

// Case-insensitive ASCII comparison of header names.
bool iequals(std::string_view a, std::string_view b) noexcept;

}  // namespace evalbox::sandbox::http
