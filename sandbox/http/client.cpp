// fetch() over Boost.Beast and Asio, TLS by OpenSSL (see client.h). Each exchange owns a
// private io_context; every asynchronous step is started, then the context is run for at most
// the step's limit in short slices (so a cancel flag is seen within 100 ms). A step that runs
// out of time closes the socket, which ends the pending operation, and reports expired.
#include "sandbox/http/client.h"

#include <openssl/ssl.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>

#include <fmt/format.h>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "base/base64.h"
#include "base/log.h"

namespace evalbox::sandbox::http {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;
using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

bool is_ip_literal(const std::string& host) {
  boost::system::error_code ec;
  asio::ip::make_address(host, ec);
  return !ec;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

std::string env_value(const char* upper, const char* lower_name) {
  for (const char* name : {upper, lower_name})
    if (const char* v = std::getenv(name); v && *v) return v;
  return {};
}

// NO_PROXY: "*", or a list of hosts, ".domain" / "domain" suffixes and IPs (ports ignored).
bool no_proxy_matches(const std::string& list, const std::string& host) {
  const std::string h = lower(host);
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    std::string item =
        lower(list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    pos = comma == std::string::npos ? list.size() + 1 : comma + 1;
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (item.empty()) continue;
    if (item == "*") return true;
    if (auto colon = item.rfind(':');
        colon != std::string::npos && item.front() != '[' && item.find(':') == colon)
      item.erase(colon);
    if (item.front() == '.') item.erase(0, 1);
    if (h == item || (h.size() > item.size() && h.ends_with("." + item))) return true;
  }
  return false;
}

// A URL as an error message may quote it: at most 200 characters, and whatever precedes an '@'
// after the scheme replaced (it may be a password, even in a URL refused for another reason).
std::string shown(std::string_view text) {
  std::string out(text);
  const size_t start = out.find("://") == std::string::npos ? 0 : out.find("://") + 3;
  if (const size_t at = out.rfind('@'); at != std::string::npos && at >= start)
    out.replace(start, at - start, "***");
  return out.substr(0, 200);
}

bool is_loopback(const std::string& host) {
  if (host == "localhost" || host.ends_with(".localhost")) return true;
  boost::system::error_code ec;
  auto a = asio::ip::make_address(host, ec);
  return !ec && a.is_loopback();
}

}  // namespace

bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

// ---- URLs ----

std::string url::authority() const {
  const bool default_port = port == (tls ? "443" : "80");
  const std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return default_port ? h : h + ":" + port;
}

std::string url::str() const { return (tls ? "https://" : "http://") + authority() + target; }

result<url> parse_url(std::string_view text) {
  url u;
  std::string_view rest = text;
  if (rest.starts_with("https://")) {
    u.tls = true;
    rest.remove_prefix(8);
  } else if (rest.starts_with("http://")) {
    rest.remove_prefix(7);
  } else {
    return make_error(error_kind::invalid_argument, "'{}': not an http:// or https:// URL",
                      shown(text));
  }
  const size_t end = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, end);
  std::string_view target = end == std::string_view::npos ? std::string_view() : rest.substr(end);
  if (target.starts_with('?')) {
    u.target = "/" + std::string(target);
  } else {
    u.target = target.empty() ? "/" : std::string(target);
  }
  if (auto hash = u.target.find('#'); hash != std::string::npos) u.target.erase(hash);
  if (u.target.empty()) u.target = "/";
  if (authority.find('@') != std::string_view::npos)
    return make_error(error_kind::invalid_argument,
                      "a URL with credentials (user:password@) is refused: pass them otherwise");
  if (authority.empty())
    return make_error(error_kind::invalid_argument, "'{}': no host", shown(text));
  if (authority.front() == '[') {  // [IPv6]:port
    const size_t close = authority.find(']');
    if (close == std::string_view::npos)
      return make_error(error_kind::invalid_argument, "'{}': unclosed IPv6 address", shown(text));
    u.host = std::string(authority.substr(1, close - 1));
    boost::system::error_code ec;
    asio::ip::make_address_v6(u.host, ec);
    if (ec)
      return make_error(error_kind::invalid_argument, "'{}': not an IPv6 address in brackets",
                        shown(text));
    authority.remove_prefix(close + 1);
    if (authority.starts_with(':')) {
      u.port = std::string(authority.substr(1));
    } else if (!authority.empty()) {
      return make_error(error_kind::invalid_argument, "'{}': bad host", shown(text));
    }
  } else {
    const size_t colon = authority.rfind(':');
    u.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) u.port = std::string(authority.substr(colon + 1));
    // "h:80:80" or an IPv6 address without its brackets: which colon starts the port?
    if (u.host.find(':') != std::string::npos)
      return make_error(error_kind::invalid_argument, "'{}': bad host", shown(text));
  }
  if (u.port.empty()) u.port = u.tls ? "443" : "80";
  auto bad_char = [](char c) {
    return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f || c == '/' || c == '\\';
  };
  if (u.host.empty() || std::any_of(u.host.begin(), u.host.end(), bad_char) || u.port.size() > 5 ||
      u.port.find_first_not_of("0123456789") != std::string::npos || std::stoi(u.port) == 0 ||
      std::stoi(u.port) > 65535)
    return make_error(error_kind::invalid_argument, "'{}': bad host or port", shown(text));
  for (char c : u.target)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f)
      return make_error(error_kind::invalid_argument, "'{}': control character or space in path",
                        shown(text));
  return u;
}

result<url> resolve_url(const url& base, std::string_view location) {
  if (location.starts_with("http://") || location.starts_with("https://"))
    return parse_url(location);
  const std::string scheme = base.tls ? "https:" : "http:";
  if (location.starts_with("//")) return parse_url(scheme + std::string(location));
  if (location.starts_with('/'))
    return parse_url(scheme + "//" + base.authority() + std::string(location));
  // Any other scheme ("ftp://", but also "mailto:" or "javascript:", which have no "//") is
  // refused; a relative path cannot start with "name:" (RFC 3986, 4.2).
  const size_t scheme_end = location.find_first_of(":/?#");
  if (location.empty() || (scheme_end != std::string_view::npos && location[scheme_end] == ':'))
    return make_error(error_kind::invalid_argument, "redirect to '{}': not an http(s) URL",
                      shown(location));
  // The directory of the base's path: a '/' in its query does not count.
  const std::string path = base.target.substr(0, base.target.find('?'));
  std::string dir = path.substr(0, path.rfind('/') + 1);
  url u = base;
  u.target = dir + std::string(location);
  return parse_url(u.str());
}

result<std::optional<proxy>> proxy_for(const url& target) {
  if (is_loopback(target.host)) return std::nullopt;
  const char* upper = target.tls ? "HTTPS_PROXY" : "HTTP_PROXY";
  const char* lower_name = target.tls ? "https_proxy" : "http_proxy";
  std::string value = env_value(upper, lower_name);
  if (value.empty()) return std::nullopt;
  // The error names the variable the value came from.
  const char* upper_value = std::getenv(upper);
  const char* name = upper_value && *upper_value ? upper : lower_name;
  if (no_proxy_matches(env_value("NO_PROXY", "no_proxy"), target.host)) return std::nullopt;
  if (value.find("://") == std::string::npos) value = "http://" + value;
  proxy p;
  // user:password@ is allowed here (and only here): it becomes Proxy-Authorization.
  if (auto scheme_end = value.find("://"); scheme_end != std::string::npos) {
    const size_t host_start = scheme_end + 3;
    const size_t at = value.find('@', host_start);
    const size_t slash = value.find('/', host_start);
    if (at != std::string::npos && (slash == std::string::npos || at < slash)) {
      p.authorization =
          "Basic " + evalbox::base64_encode(value.substr(host_start, at - host_start));
      value.erase(host_start, at - host_start + 1);
    }
  }
  auto via = parse_url(value);
  if (!via || via->tls)
    return make_error(error_kind::invalid_argument,
                      "{}: expected http://HOST:PORT of a proxy (a proxy reached over TLS is not "
                      "supported)",
                      name);
  p.via = std::move(*via);
  return p;
}

// ---- the exchange ----

namespace {

// The TLS client context for a set of extra CA files: the host's store and those files, loaded
// once per process (parsing the host's bundle costs ~25 ms, which every request of a pull paid)
// and shared by every connection — an SSL_CTX may make SSL objects on several threads at once.
result<std::shared_ptr<asio::ssl::context>> client_context(const std::vector<std::string>& cas) {
  static std::mutex mu;
  static std::map<std::vector<std::string>, std::shared_ptr<asio::ssl::context>> made;
  std::lock_guard lock(mu);
  if (auto it = made.find(cas); it != made.end()) return it->second;
  auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
  ctx->set_default_verify_paths();
  for (const auto& f : cas) {
    boost::system::error_code ec;
    (void)ctx->load_verify_file(f, ec);  // the error comes back in `ec`
    if (ec) return make_error(error_kind::invalid_argument, "CA file {}: {}", f, ec.message());
  }
  ctx->set_verify_mode(asio::ssl::verify_peer);
  made.emplace(cas, ctx);
  return ctx;
}

}  // namespace

// Named status_code and evalbox::status below: inside response, `status` is the accessor.
struct response::impl {
  options opts;
  std::string what;  // "GET https://host/path", for errors
  asio::io_context ioc;
  std::shared_ptr<asio::ssl::context> tls_ctx;  // outlives the stream
  std::optional<beast::tcp_stream> plain;
  std::optional<beast::ssl_stream<beast::tcp_stream>> tls;
  beast::flat_buffer buffer;
  bhttp::response_parser<bhttp::buffer_body> parser;
  header_list headers;
  int status_code = 0;
  clock::time_point started = clock::now();
  clock::time_point window_start = clock::now();
  uint64_t window_bytes = 0;
  bool finished = false;

  beast::tcp_stream& lowest() { return tls ? beast::get_lowest_layer(*tls) : *plain; }

  void close() {
    // Closing is how a stuck operation is ended; that the close itself failed changes nothing.
    boost::system::error_code ignored;
    if (tls || plain) (void)lowest().socket().close(ignored);
  }

  std::unexpected<error> fail(error_kind kind, std::string_view why) const {
    return std::unexpected(error{kind, fmt::format("{}: {}", what, why)});
  }

  // The time left of `limit`, capped by the whole exchange's deadline.
  [[nodiscard]] milliseconds bound(milliseconds limit) const {
    if (opts.total_timeout.count() <= 0) return limit;
    auto left =
        std::chrono::duration_cast<milliseconds>(started + opts.total_timeout - clock::now());
    return std::max(milliseconds(0), std::min(limit, left));
  }

  // Starts one asynchronous operation (`start` gets the completion handler) and runs the
  // context until it completes, the limit passes, or the cancel flag is set.
  template <class Start>
  evalbox::status step(Start&& start, milliseconds limit, std::string_view doing) {
    bool done = false;
    boost::system::error_code ec;
    start([&done, &ec](boost::system::error_code e, auto&&...) {
      done = true;
      ec = e;
    });
    const milliseconds allowed = bound(limit);
    const auto deadline = clock::now() + allowed;
    bool timed_out = false;
    bool cancelled = false;
    while (!done) {
      ioc.restart();
      if (opts.cancel && opts.cancel->load()) cancelled = true;
      const auto left = deadline - clock::now();
      if (left <= clock::duration::zero()) timed_out = true;
      if (timed_out || cancelled) {
        close();
        ioc.restart();
        ioc.run_for(std::chrono::seconds(1));  // the aborted operation completes
        break;
      }
      ioc.run_for(std::min<clock::duration>(left, milliseconds(100)));
    }
    if (cancelled) return fail(error_kind::cancelled, "cancelled");
    if (timed_out)
      return fail(error_kind::expired,
                  fmt::format("no progress {} within {} ms", doing, allowed.count()));
    if (ec && ec != bhttp::error::need_buffer) {
      if (ec == beast::error::timeout)
        return fail(error_kind::expired, fmt::format("timed out {}", doing));
      std::string msg = ec.message();
      if (ec.category() == asio::error::get_ssl_category() ||
          ec.category().name() == std::string_view("asio.ssl.stream"))
        msg = "TLS: " + msg;
      return fail(error_kind::io, fmt::format("{} ({})", msg, doing));
    }
    return {};
  }

  evalbox::status connect(const url& to) {
    tcp::resolver resolver(ioc);
    tcp::resolver::results_type endpoints;
    EB_TRY(step(
        [&](auto handler) {
          resolver.async_resolve(to.host, to.port,
                                 [&endpoints, handler](boost::system::error_code e,
                                                       tcp::resolver::results_type r) mutable {
                                   endpoints = std::move(r);
                                   handler(e);
                                 });
        },
        opts.head_timeout, "resolving " + to.host));
    // Every address the name resolved to is tried before giving up.
    evalbox::status last = fail(error_kind::io, "the name resolved to no address");
    for (const auto& endpoint : endpoints) {
      plain.emplace(ioc);
      last = step([&](auto handler) { plain->socket().async_connect(endpoint, handler); },
                  opts.head_timeout, "connecting to " + to.authority());
      if (last) {
        // Without it, a request sent right after the TLS handshake waits for the server's
        // delayed ACK (40 ms a request, most of a small layer's pull).
        boost::system::error_code ignored;
        (void)plain->socket().set_option(tcp::no_delay(true), ignored);
        break;
      }
    }
    return last;
  }

  // CONNECT host:port through the proxy, for a TLS target.
  evalbox::status tunnel(const url& to, const proxy& p) {
    bhttp::request<bhttp::empty_body> req{bhttp::verb::connect, to.host + ":" + to.port, 11};
    req.set(bhttp::field::host, to.host + ":" + to.port);
    if (!p.authorization.empty()) req.set(bhttp::field::proxy_authorization, p.authorization);
    EB_TRY(step([&](auto handler) { bhttp::async_write(*plain, req, handler); }, opts.head_timeout,
                "asking the proxy for a tunnel"));
    bhttp::response_parser<bhttp::empty_body> head;
    head.skip(true);
    head.header_limit(static_cast<uint32_t>(opts.max_head));
    EB_TRY(step([&](auto handler) { bhttp::async_read_header(*plain, buffer, head, handler); },
                opts.head_timeout, "reading the proxy's answer"));
    if (head.get().result_int() / 100 != 2)
      return fail(error_kind::io, fmt::format("the proxy {} refused the tunnel ({})",
                                              p.via.authority(), head.get().result_int()));
    return {};
  }

  evalbox::status handshake(const url& to) {
    tls_ctx = EB_TRY(client_context(opts.ca_files));
    tls.emplace(std::move(*plain), *tls_ctx);
    plain.reset();
    // SNI (not for an address), and the certificate must name the host, not only chain to a
    // trusted CA.
    if (!is_ip_literal(to.host) && !SSL_set_tlsext_host_name(tls->native_handle(), to.host.c_str()))
      return fail(error_kind::io, "could not set the TLS server name");
    tls->set_verify_callback(asio::ssl::host_name_verification(to.host));
    return step(
        [&](auto handler) { tls->async_handshake(asio::ssl::stream_base::client, handler); },
        opts.head_timeout, "in the TLS handshake");
  }

  template <class F>
  evalbox::status on_stream(F&& f) {
    if (tls) return f(*tls);
    return f(*plain);
  }

  evalbox::status send(const request& req, bool absolute_target, const proxy* p) {
    bhttp::request<bhttp::string_body> r;
    r.method_string(req.method);
    r.target(absolute_target ? req.to.str() : req.to.target);
    r.version(11);
    r.set(bhttp::field::host, req.to.authority());
    r.set(bhttp::field::user_agent, opts.user_agent);
    r.set(bhttp::field::connection, "close");
    if (p && absolute_target && !p->authorization.empty())
      r.set(bhttp::field::proxy_authorization, p->authorization);
    for (const auto& [k, v] : req.headers) r.set(k, v);
    r.body() = req.body;
    if (!req.body.empty() || req.method == "POST" || req.method == "PUT") r.prepare_payload();
    return on_stream([&](auto& s) {
      return step([&](auto handler) { bhttp::async_write(s, r, handler); }, opts.head_timeout,
                  "sending the request");
    });
  }

  evalbox::status read_head(bool head_request) {
    parser.header_limit(static_cast<uint32_t>(opts.max_head));
    parser.body_limit(std::numeric_limits<uint64_t>::max());
    if (head_request) parser.skip(true);
    EB_TRY(on_stream([&](auto& s) {
      return step([&](auto handler) { bhttp::async_read_header(s, buffer, parser, handler); },
                  opts.head_timeout, "waiting for the response");
    }));
    status_code = static_cast<int>(parser.get().result_int());
    for (const auto& f : parser.get())
      headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    finished = parser.is_done();
    window_start = clock::now();
    return {};
  }

  result<size_t> read(std::span<std::byte> buf) {
    while (!finished && !buf.empty()) {
      auto& body = parser.get().body();
      body.data = buf.data();
      body.size = buf.size();
      // async_read_some, not async_read: into a buffer_body, async_read completes only when
      // `buf` is full or the body ends, so idle_timeout would bound the wait for a whole buffer
      // (a steady slow body expires) and the rate floor would be checked only that late.
      EB_TRY(on_stream([&](auto& s) {
        return step([&](auto handler) { bhttp::async_read_some(s, buffer, parser, handler); },
                    opts.idle_timeout, "reading the body");
      }));
      const size_t n = buf.size() - parser.get().body().size;
      finished = parser.is_done();
      EB_TRY(account(n));
      if (n > 0) return n;
    }
    return size_t{0};
  }

  // The rate floor: over each window, at least min_rate bytes a second.
  evalbox::status account(size_t n) {
    window_bytes += n;
    if (opts.min_rate == 0) return {};
    const auto elapsed = clock::now() - window_start;
    if (elapsed < opts.rate_window) return {};
    const double secs = std::chrono::duration<double>(elapsed).count();
    if (static_cast<double>(window_bytes) / secs < static_cast<double>(opts.min_rate)) {
      close();
      return fail(error_kind::expired,
                  fmt::format("the body arrives at {:.0f} bytes/s, below the floor of {} "
                              "bytes/s",
                              static_cast<double>(window_bytes) / secs, opts.min_rate));
    }
    window_start = clock::now();
    window_bytes = 0;
    return {};
  }
};

response::response() = default;
response::response(response&&) noexcept = default;
response& response::operator=(response&&) noexcept = default;
response::~response() = default;

int response::status() const noexcept { return impl_ ? impl_->status_code : 0; }

const header_list& response::headers() const noexcept {
  static const header_list none;
  return impl_ ? impl_->headers : none;
}

std::optional<std::string> response::header(std::string_view name) const {
  for (const auto& [k, v] : headers())
    if (iequals(k, name)) return v;
  return std::nullopt;
}

std::optional<uint64_t> response::content_length() const noexcept {
  if (!impl_) return std::nullopt;
  auto n = impl_->parser.content_length();
  return n ? std::optional<uint64_t>(*n) : std::nullopt;
}

result<size_t> response::read(std::span<std::byte> buf) {
  if (!impl_) return size_t{0};
  return impl_->read(buf);
}

result<std::string> response::read_all(size_t max) {
  std::string out;
  std::byte chunk[16384];
  for (;;) {
    size_t n = EB_TRY(read(chunk));
    if (n == 0) return out;
    if (out.size() + n > max)
      return make_error(error_kind::invalid_argument, "{}: the body is larger than {} bytes",
                        impl_->what, max);
    out.append(reinterpret_cast<const char*>(chunk), n);
  }
}

result<response> fetch(const request& req, const options& opts) {
  response r;
  r.impl_ = std::make_unique<response::impl>();
  auto& in = *r.impl_;
  in.opts = opts;
  in.what = fmt::format("{} {}", req.method, req.to.str());
  const proxy* p = opts.via ? &*opts.via : nullptr;
  try {
    EB_TRY(in.connect(p ? p->via : req.to));
    if (p && req.to.tls) EB_TRY(in.tunnel(req.to, *p));
    if (req.to.tls) EB_TRY(in.handshake(req.to));
    EB_TRY(in.send(req, p && !req.to.tls, p));
    EB_TRY(in.read_head(req.method == "HEAD"));
  } catch (const std::exception& e) {  // Asio and Beast throw only for allocation failures
    return make_error(error_kind::io, "{}: {}", in.what, e.what());
  }
  log::debug("http: {} -> {}", in.what, in.status_code);
  return r;
}

std::optional<std::string> reply::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (iequals(k, name)) return v;
  return std::nullopt;
}

result<reply> fetch_all(const request& req, const options& opts, size_t max_body) {
  response r = EB_TRY(fetch(req, opts));
  reply out;
  out.status = r.status();
  out.headers = r.headers();
  out.body = EB_TRY(r.read_all(max_body));
  return out;
}

}  // namespace evalbox::sandbox::http
