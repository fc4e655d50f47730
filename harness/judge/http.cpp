// http_post with Boost.Beast over Asio, TLS by OpenSSL (see http.h). The exchange is one
// coroutine on a private io_context; the stream's deadline covers connect, handshake, write
// and read, and the context's run_for bounds the name lookup too.
#include "harness/judge/http.h"

#include <openssl/ssl.h>

#include <exception>
#include <optional>

#include <fmt/format.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

namespace evalbox::harness {
inline namespace judge {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;

struct parsed_url {
  bool tls = false;
  std::string host;
  std::string port;
  std::string target;  // path and query, "/" at least
};

result<parsed_url> parse_url(const std::string& url) {
  parsed_url u;
  std::string_view rest = url;
  if (rest.starts_with("https://")) {
    u.tls = true;
    rest.remove_prefix(8);
  } else if (rest.starts_with("http://")) {
    rest.remove_prefix(7);
  } else {
    return make_error(error_kind::invalid_argument, "{}: not an http:// or https:// URL", url);
  }
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  u.target = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
  if (authority.empty() || authority.find('@') != std::string_view::npos)
    return make_error(error_kind::invalid_argument, "{}: no host (or credentials in the URL)", url);
  if (authority.front() == '[') {  // [IPv6]:port
    const size_t close = authority.find(']');
    if (close == std::string_view::npos)
      return make_error(error_kind::invalid_argument, "{}: unclosed IPv6 address", url);
    u.host = std::string(authority.substr(1, close - 1));
    authority.remove_prefix(close + 1);
    if (authority.starts_with(':')) u.port = std::string(authority.substr(1));
  } else {
    const size_t colon = authority.rfind(':');
    u.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) u.port = std::string(authority.substr(colon + 1));
  }
  if (u.port.empty()) u.port = u.tls ? "443" : "80";
  if (u.host.empty() || u.port.find_first_not_of("0123456789") != std::string::npos)
    return make_error(error_kind::invalid_argument, "{}: bad host or port", url);
  return u;
}

struct exchange_state {
  const parsed_url& url;
  const std::vector<std::pair<std::string, std::string>>& headers;
  const std::string& body;
  std::chrono::milliseconds timeout;
  size_t max_body;
  std::optional<http_reply> reply;
  std::string failure;
  bool timed_out = false;
};

bhttp::request<bhttp::string_body> make_request(const exchange_state& st) {
  bhttp::request<bhttp::string_body> req{bhttp::verb::post, st.url.target, 11};
  const bool default_port = st.url.port == (st.url.tls ? "443" : "80");
  req.set(bhttp::field::host, default_port ? st.url.host : st.url.host + ":" + st.url.port);
  req.set(bhttp::field::user_agent, "evalbox-judge");
  req.set(bhttp::field::connection, "close");
  for (const auto& [k, v] : st.headers) req.set(k, v);
  req.body() = st.body;
  req.prepare_payload();
  return req;
}

template <class Stream>
asio::awaitable<void> talk(Stream& stream, exchange_state& st) {
  auto req = make_request(st);
  co_await bhttp::async_write(stream, req, asio::use_awaitable);
  beast::flat_buffer buffer;
  bhttp::response_parser<bhttp::string_body> parser;
  parser.body_limit(st.max_body);
  co_await bhttp::async_read(stream, buffer, parser, asio::use_awaitable);
  st.reply = http_reply{static_cast<int>(parser.get().result_int()), parser.get().body()};
}

asio::awaitable<void> exchange(exchange_state& st, asio::ssl::context* tls) {
  auto executor = co_await asio::this_coro::executor;
  tcp::resolver resolver(executor);
  auto endpoints = co_await resolver.async_resolve(st.url.host, st.url.port, asio::use_awaitable);
  if (!tls) {
    beast::tcp_stream stream(executor);
    stream.expires_after(st.timeout);
    co_await stream.async_connect(endpoints, asio::use_awaitable);
    co_await talk(stream, st);
    co_return;
  }
  beast::ssl_stream<beast::tcp_stream> stream(executor, *tls);
  // SNI, and the certificate must name the host (not only chain to a trusted CA).
  if (!SSL_set_tlsext_host_name(stream.native_handle(), st.url.host.c_str()))
    throw std::runtime_error("could not set the TLS server name");
  stream.set_verify_callback(asio::ssl::host_name_verification(st.url.host));
  beast::get_lowest_layer(stream).expires_after(st.timeout);
  co_await beast::get_lowest_layer(stream).async_connect(endpoints, asio::use_awaitable);
  co_await stream.async_handshake(asio::ssl::stream_base::client, asio::use_awaitable);
  co_await talk(stream, st);
}

}  // namespace

result<http_reply> http_post(const std::string& url,
                             const std::vector<std::pair<std::string, std::string>>& headers,
                             const std::string& body, std::chrono::milliseconds timeout,
                             size_t max_body) {
  auto u = parse_url(url);
  if (!u) return std::unexpected(u.error());
  exchange_state st{*u, headers, body, timeout, max_body, std::nullopt, {}, false};
  try {
    // Declared before the context, so that it outlives any stream a stopped context destroys.
    std::optional<asio::ssl::context> tls;
    if (u->tls) {
      tls.emplace(asio::ssl::context::tls_client);
      tls->set_default_verify_paths();
      tls->set_verify_mode(asio::ssl::verify_peer);
    }
    asio::io_context ioc;
    asio::co_spawn(ioc, exchange(st, tls ? &*tls : nullptr), [&st](std::exception_ptr e) {
      if (!e) return;
      try {
        std::rethrow_exception(e);
      } catch (const boost::system::system_error& se) {
        st.timed_out = se.code() == beast::error::timeout;
        st.failure = se.code().message();
      } catch (const std::exception& ex) {
        st.failure = ex.what();
      }
    });
    // The stream's deadline ends a stuck connect or read; this ends a stuck name lookup.
    ioc.run_for(timeout + std::chrono::seconds(1));
    if (!ioc.stopped() && !st.reply && st.failure.empty()) st.timed_out = true;
  } catch (const std::exception& e) {
    st.failure = e.what();
  }
  if (st.reply) return std::move(*st.reply);
  const std::string where =
      fmt::format("POST {}://{}:{}{}", u->tls ? "https" : "http", u->host, u->port, u->target);
  if (st.timed_out)
    return make_error(error_kind::expired, "{}: no answer within {} ms", where, timeout.count());
  return make_error(error_kind::io, "{}: {}", where, st.failure);
}

}  // namespace judge
}  // namespace evalbox::harness
