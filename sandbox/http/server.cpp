// server (see server.h) over POSIX sockets and poll(2): requests are parsed by Beast's
// request_parser fed with put(), responses are written here (status line, headers, chunked
// framing). Each connection's socket is closed only by its own thread, under the server's
// mutex, so that stop() can shut down a socket that is still open and never a reused number.
#include "sandbox/http/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <exception>
#include <list>
#include <mutex>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "base/log.h"
#include "base/unique_fd.h"

namespace evalbox::sandbox::http {

namespace {

namespace beast = boost::beast;
namespace bhttp = beast::http;
using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using request_parser = bhttp::request_parser<bhttp::string_body>;

constexpr size_t read_size = 64u << 10;  // one recv()
// After the server refuses a request, what the peer still sends is read and dropped for a
// moment before the close: closing with unread input sends a reset, which can destroy the
// answer before the peer reads it (a 413 to a client still sending its body).
constexpr milliseconds linger_time{2000};
constexpr size_t linger_bytes = 1u << 20;

// Milliseconds until `deadline`, for poll(2), rounded up.
int poll_ms(clock::time_point deadline) {
  const auto left = std::chrono::ceil<milliseconds>(deadline - clock::now()).count();
  return static_cast<int>(std::clamp<decltype(left)>(left, 0, INT_MAX));
}

std::string_view reason(int status) {
  static constexpr std::pair<int, std::string_view> phrases[] = {
      {200, "OK"},
      {201, "Created"},
      {202, "Accepted"},
      {204, "No Content"},
      {206, "Partial Content"},
      {301, "Moved Permanently"},
      {302, "Found"},
      {303, "See Other"},
      {304, "Not Modified"},
      {307, "Temporary Redirect"},
      {308, "Permanent Redirect"},
      {400, "Bad Request"},
      {401, "Unauthorized"},
      {403, "Forbidden"},
      {404, "Not Found"},
      {405, "Method Not Allowed"},
      {408, "Request Timeout"},
      {409, "Conflict"},
      {411, "Length Required"},
      {413, "Content Too Large"},
      {415, "Unsupported Media Type"},
      {422, "Unprocessable Content"},
      {429, "Too Many Requests"},
      {431, "Request Header Fields Too Large"},
      {500, "Internal Server Error"},
      {501, "Not Implemented"},
      {502, "Bad Gateway"},
      {503, "Service Unavailable"},
      {504, "Gateway Timeout"}};
  for (const auto& [code, text] : phrases)
    if (code == status) return text;
  return "Unknown";
}

// RFC 9110 5.6.2: a token.
bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (const char c : s) {
    const bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (!alnum && std::string_view("!#$%&'*+-.^_`|~").find(c) == std::string_view::npos)
      return false;
  }
  return true;
}

// A value that cannot end its line or the head early.
bool is_field_value(std::string_view s) {
  return s.find_first_of(std::string_view("\r\n\0", 3)) == std::string_view::npos;
}

// Framing and connection management belong to the server (RFC 9110 7.6.1).
bool is_hop_by_hop(std::string_view name) {
  for (const std::string_view h : {"connection", "keep-alive", "transfer-encoding",
                                   "content-length", "te", "trailer", "upgrade"})
    if (iequals(name, h)) return true;
  return name.size() >= 6 && iequals(name.substr(0, 6), "proxy-");
}

std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

// Sends every byte of `iov` within `timeout`. Errors: expired (no room in time), io.
status send_all(int fd, std::span<iovec> iov, milliseconds timeout) {
  const auto deadline = clock::now() + timeout;
  size_t i = 0;
  while (i < iov.size()) {
    if (iov[i].iov_len == 0) {
      ++i;
      continue;
    }
    msghdr m{};
    m.msg_iov = &iov[i];
    m.msg_iovlen = iov.size() - i;
    const ssize_t n = ::sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      if (err != EAGAIN && err != EWOULDBLOCK)
        return std::unexpected(
            error{error_kind::io, fmt::format("send: {}", std::strerror(err)), err});
      pollfd p{fd, POLLOUT, 0};
      const int r = ::poll(&p, 1, poll_ms(deadline));
      if (r < 0 && errno != EINTR)
        return std::unexpected(
            error{error_kind::io, fmt::format("poll: {}", std::strerror(errno)), errno});
      if (r == 0)
        return make_error(error_kind::expired, "send: the peer took nothing for {} ms",
                          timeout.count());
      continue;
    }
    auto left = static_cast<size_t>(n);
    while (left > 0 && i < iov.size()) {
      const size_t take = std::min(left, iov[i].iov_len);
      iov[i].iov_base = static_cast<char*>(iov[i].iov_base) + take;
      iov[i].iov_len -= take;
      left -= take;
      if (iov[i].iov_len == 0) ++i;
    }
  }
  return {};
}

status send_all(int fd, std::string_view bytes, milliseconds timeout) {
  iovec v{const_cast<char*>(bytes.data()), bytes.size()};
  return send_all(fd, std::span<iovec>(&v, 1), timeout);
}

// "127.0.0.1:54321", "[::1]:54321".
std::string address_text(const sockaddr_storage& a) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (a.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(a);
    ::inet_ntop(AF_INET, &in.sin_addr, host, sizeof host);
    return fmt::format("{}:{}", host, ntohs(in.sin_port));
  }
  if (a.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(a);
    ::inet_ntop(AF_INET6, &in6.sin6_addr, host, sizeof host);
    return fmt::format("[{}]:{}", host, ntohs(in6.sin6_port));
  }
  return "?";
}

// The response to one request (see response_stream in server.h).
class stream final : public response_stream {
 public:
  // `keep_alive`: the request allows another one on the connection.
  stream(int fd, milliseconds write_timeout, bool head_request, bool http10, bool keep_alive)
      : fd_(fd),
        timeout_(write_timeout),
        head_request_(head_request),
        http10_(http10),
        keep_alive_(keep_alive) {}

  status begin(int code, const header_list& headers, std::optional<uint64_t> length) override {
    EB_TRY(usable());
    if (begun_) return make_error(error_kind::invalid_argument, "begin(): called twice");
    if (code < 200 || code > 599)
      return make_error(error_kind::invalid_argument, "begin(): status {} is not 200..599", code);
    // The names a Connection header lists are hop-by-hop too; "close" ends the connection.
    std::vector<std::string_view> listed;
    for (const auto& [k, v] : headers) {
      if (!is_token(k) || !is_field_value(v))
        return make_error(error_kind::invalid_argument,
                          "begin(): header '{}' has a bad name or value",
                          k.substr(0, std::min<size_t>(k.find_first_of("\r\n"), 64)));
      if (!iequals(k, "connection")) continue;
      std::string_view rest = v;
      while (!rest.empty()) {
        const size_t comma = rest.find(',');
        const std::string_view item = trim(rest.substr(0, comma));
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
        if (iequals(item, "close")) keep_alive_ = false;
        listed.push_back(item);
      }
    }
    std::string head = fmt::format("HTTP/1.1 {} {}\r\n", code, reason(code));
    for (const auto& [k, v] : headers) {
      if (is_hop_by_hop(k) ||
          std::any_of(listed.begin(), listed.end(), [&](auto n) { return iequals(n, k); }))
        continue;
      head.append(k).append(": ").append(v).append("\r\n");
    }
    if (length && code != 204 && code != 304) {
      head += fmt::format("Content-Length: {}\r\n", *length);
      framing_ = head_request_ ? framing::none : framing::length;
      length_ = *length;
    } else if (code == 204 || code == 304 || head_request_) {
      framing_ = framing::none;
    } else if (http10_) {
      framing_ = framing::until_close;  // an HTTP/1.0 client knows no chunks
      keep_alive_ = false;
    } else {
      head += "Transfer-Encoding: chunked\r\n";
      framing_ = framing::chunked;
    }
    if (!keep_alive_) head += "Connection: close\r\n";
    head += "\r\n";
    begun_ = true;
    return sent(send_all(fd_, head, timeout_));
  }

  status write(std::string_view bytes) override {
    EB_TRY(usable());
    if (!begun_) return make_error(error_kind::invalid_argument, "write(): before begin()");
    if (ended_) return make_error(error_kind::invalid_argument, "write(): after end()");
    if (bytes.empty()) return {};  // a zero-length chunk would end the body
    switch (framing_) {
      case framing::none:
        if (head_request_) return {};  // the answer to HEAD has no body
        return make_error(error_kind::invalid_argument, "write(): this status has no body");
      case framing::length:
        if (bytes.size() > length_ - written_)
          return make_error(error_kind::invalid_argument,
                            "write(): {} bytes past the Content-Length of {}",
                            bytes.size() - (length_ - written_), length_);
        written_ += bytes.size();
        return sent(send_all(fd_, bytes, timeout_));
      case framing::until_close:
        return sent(send_all(fd_, bytes, timeout_));
      case framing::chunked: {
        char size[24];
        const int n = std::snprintf(size, sizeof size, "%zx\r\n", bytes.size());
        char crlf[] = "\r\n";
        iovec v[3] = {{size, static_cast<size_t>(n)},
                      {const_cast<char*>(bytes.data()), bytes.size()},
                      {crlf, 2}};
        return sent(send_all(fd_, v, timeout_));
      }
    }
    return {};
  }

  status end() override {
    EB_TRY(usable());
    if (!begun_) return make_error(error_kind::invalid_argument, "end(): before begin()");
    if (ended_) return {};
    ended_ = true;
    if (framing_ == framing::chunked) return sent(send_all(fd_, "0\r\n\r\n", timeout_));
    if (framing_ == framing::length && written_ != length_) {
      // The client waits for the rest: only closing tells it there is none.
      failed_ = error{error_kind::invalid_argument,
                      fmt::format("end(): after {} of the {} bytes announced", written_, length_)};
      return std::unexpected(*failed_);
    }
    return {};
  }

  void abort() override {
    if (aborted_) return;
    aborted_ = true;
    (void)::shutdown(fd_, SHUT_RDWR);
  }

  [[nodiscard]] bool begun() const override { return begun_; }
  [[nodiscard]] bool aborted() const { return aborted_; }

  // After the handler returned: a 502 for a response never begun, end() for one not ended.
  // True when the connection may carry another request.
  bool finish() {
    if (aborted_) return false;
    if (!begun_ && !failed_) {
      static constexpr std::string_view text = "the handler gave no response\n";
      (void)begin(502, {{"Content-Type", "text/plain"}}, text.size());
      (void)write(text);
    }
    if (begun_ && !ended_ && !failed_) (void)end();
    return keep_alive_ && ended_ && !failed_;
  }

 private:
  enum class framing { none, length, chunked, until_close };

  status usable() const {
    if (aborted_) return make_error(error_kind::io, "the response was aborted");
    if (failed_) return std::unexpected(*failed_);
    return {};
  }

  // Records the first failure: the connection is unusable after it.
  status sent(status s) {
    if (!s) failed_ = s.error();
    return s;
  }

  int fd_;
  milliseconds timeout_;
  bool head_request_;
  bool http10_;
  bool keep_alive_;
  bool begun_ = false;
  bool ended_ = false;
  bool aborted_ = false;
  std::optional<error> failed_;
  framing framing_ = framing::none;
  uint64_t length_ = 0;
  uint64_t written_ = 0;
};

// A short text answer of the server's own, on a connection that it then closes.
void answer(int fd, int code, std::string_view text, milliseconds timeout) {
  stream s(fd, timeout, false, false, false);
  if (s.begin(code, {{"Content-Type", "text/plain"}}, text.size()) && s.write(text)) (void)s.end();
}

}  // namespace

std::optional<std::string> incoming_request::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (iequals(k, name)) return v;
  return std::nullopt;
}

struct server::impl {
  // One accepted connection. `fd` is reset (closed) by its thread when it ends, under `mu`.
  struct slot {
    unique_fd fd;
    std::thread thread;
    bool done = false;
  };

  server_options opts;
  request_handler handler;
  unique_fd listener;
  unique_fd wake;  // an eventfd: stop() makes it readable
  uint16_t port = 0;
  std::atomic<bool> stopping{false};
  std::thread acceptor;

  std::mutex mu;  // guards slots and live
  std::list<slot> slots;
  size_t live = 0;

  std::mutex stop_mu;  // one stop() at a time
  bool stopped = false;

  void accept_loop();
  void serve(slot& s, const std::string& peer);
  void reap();
  void stop();
};

namespace {

// One connection's requests, in its own thread.
class connection {
 public:
  connection(server::impl& srv, int fd, std::string peer)
      : srv_(srv), opts_(srv.opts), fd_(fd), peer_(std::move(peer)), buf_(read_size) {}

  void run() {
    for (bool first = true;; first = false) {
      if (srv_.stopping) return;
      request_parser parser;
      parser.header_limit(static_cast<uint32_t>(std::min<size_t>(opts_.max_head, UINT32_MAX)));
      parser.body_limit(opts_.max_body);
      if (!read_request(parser, first)) return;
      auto& msg = parser.get();
      incoming_request req;
      req.method = std::string(msg.method_string());
      req.target = std::string(msg.target());
      for (const auto& f : msg)
        req.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
      req.body = std::move(msg.body());
      req.peer = peer_;
      const bool http10 = msg.version() < 11;
      stream out(fd_, opts_.write_timeout, msg.method() == bhttp::verb::head, http10,
                 msg.keep_alive() && !http10);
      // A handler that throws gets a 502 if it had not begun, else its response is cut: ending
      // it would pass a partial body off as whole.
      try {
        srv_.handler(req, out);
      } catch (const std::exception& e) {
        log::warn("http server: the handler of {} {} from {} threw: {}", req.method,
                  req.target.substr(0, 200), peer_, e.what());
        if (out.begun()) out.abort();
      } catch (...) {
        log::warn("http server: the handler of {} {} from {} threw", req.method,
                  req.target.substr(0, 200), peer_);
        if (out.begun()) out.abort();
      }
      if (!out.finish()) {
        // The request was read whole: only what is already here needs dropping.
        if (!out.aborted()) linger(milliseconds(0));
        return;
      }
    }
  }

 private:
  // Reads one whole request into `parser`. False when the connection is to be closed: the
  // peer left or went quiet, the server is stopping, or the request was refused (answered).
  bool read_request(request_parser& parser, bool first) {
    auto deadline = clock::now() + opts_.read_timeout;
    bool started = !pending_.empty();
    bool header_seen = false;
    for (;;) {
      // Parse what has arrived; each put() takes one step (the head, then, eager, the body).
      for (;;) {
        if (parser.is_done()) return true;
        beast::error_code ec;
        const size_t n = parser.put(boost::asio::buffer(pending_), ec);
        pending_.erase(0, n);
        if (ec == bhttp::error::need_more) break;
        if (ec) return refuse(ec);
        if (parser.is_header_done() && !header_seen) {
          header_seen = true;
          parser.eager(true);
          if (!parser.is_done() && !continue_if_expected(parser)) return false;
        }
        if (n == 0 && !parser.is_done()) break;
      }
      // Beast bounds the head by header_limit, but not a chunk's header line or trailers.
      if (pending_.size() > std::max(opts_.max_head, read_size))
        return refuse(header_seen ? bhttp::error::bad_chunk : bhttp::error::header_limit);
      pollfd p{fd_, POLLIN, 0};
      const int r = ::poll(&p, 1, poll_ms(deadline));
      if (srv_.stopping) return false;
      if (r < 0) {
        if (errno == EINTR) continue;
        return false;
      }
      if (r == 0) {
        if (!started && !first) return false;  // an idle keep-alive connection
        answer(fd_, 408, "request timeout\n", opts_.write_timeout);
        linger();
        return false;
      }
      const ssize_t got = ::recv(fd_, buf_.data(), buf_.size(), 0);
      if (got < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
      if (got <= 0) return false;  // the peer left (between requests or within one)
      if (!started && !first) deadline = clock::now() + opts_.read_timeout;
      started = true;
      pending_.append(buf_.data(), static_cast<size_t>(got));
    }
  }

  // "Expect: 100-continue": the client waits for a word before it sends the body.
  bool continue_if_expected(const request_parser& parser) {
    const auto& msg = parser.get();
    const auto expect = msg[bhttp::field::expect];
    if (msg.version() < 11 ||
        !iequals(trim(std::string_view(expect.data(), expect.size())), "100-continue"))
      return true;
    return static_cast<bool>(send_all(fd_, "HTTP/1.1 100 Continue\r\n\r\n", opts_.write_timeout));
  }

  bool refuse(beast::error_code ec) {
    if (ec == bhttp::error::header_limit) {
      answer(fd_, 431, "request header fields too large\n", opts_.write_timeout);
    } else if (ec == bhttp::error::body_limit) {
      answer(fd_, 413, "content too large\n", opts_.write_timeout);
    } else {
      answer(fd_, 400, "bad request\n", opts_.write_timeout);
    }
    log::debug("http server: refused a request from {}: {}", peer_, ec.message());
    linger();
    return false;
  }

  // Ends our side, then reads and drops what the peer still sends, for at most `wait` (see
  // linger_time).
  void linger(milliseconds wait = linger_time) {
    (void)::shutdown(fd_, SHUT_WR);
    const auto deadline = clock::now() + std::min(opts_.read_timeout, wait);
    size_t dropped = 0;
    while (dropped < linger_bytes && !srv_.stopping) {
      pollfd p{fd_, POLLIN, 0};
      const int r = ::poll(&p, 1, poll_ms(deadline));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return;
      const ssize_t got = ::recv(fd_, buf_.data(), buf_.size(), 0);
      if (got < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
      if (got <= 0) return;
      dropped += static_cast<size_t>(got);
    }
  }

  server::impl& srv_;
  const server_options& opts_;
  int fd_;
  std::string peer_;
  std::string pending_;  // received, not yet parsed: the rest of a request or the next one
  std::vector<char> buf_;
};

}  // namespace

void server::impl::serve(slot& s, const std::string& peer) {
  try {
    connection(*this, s.fd.get(), peer).run();
  } catch (const std::exception& e) {  // an allocation failed
    log::warn("http server: connection from {}: {}", peer, e.what());
  }
  std::lock_guard lock(mu);
  s.fd.reset();
  s.done = true;
  --live;
}

// Joins the threads of the connections that ended.
void server::impl::reap() {
  std::list<slot> ended;
  {
    std::lock_guard lock(mu);
    for (auto it = slots.begin(); it != slots.end();) {
      auto next = std::next(it);
      if (it->done) ended.splice(ended.end(), slots, it);
      it = next;
    }
  }
  for (auto& s : ended)
    if (s.thread.joinable()) s.thread.join();
}

void server::impl::accept_loop() {
  while (!stopping) {
    pollfd p[2] = {{listener.get(), POLLIN, 0}, {wake.get(), POLLIN, 0}};
    if (::poll(p, 2, -1) < 0 && errno != EINTR) {
      log::error("http server: poll: {}", std::strerror(errno));
      return;
    }
    if (stopping) return;
    reap();
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    const int c = ::accept4(listener.get(), reinterpret_cast<sockaddr*>(&a), &len,
                            SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (c < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // The pending connection stays; do not spin on it.
        log::warn("http server: accept: {}", std::strerror(errno));
        std::this_thread::sleep_for(milliseconds(50));
      }
      continue;  // EAGAIN, ECONNABORTED, EINTR: nothing to accept
    }
    unique_fd fd(c);
    const int one = 1;
    (void)::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::string peer = address_text(a);
    {
      std::lock_guard lock(mu);
      if (live < opts.max_connections) {
        slot& s = slots.emplace_back();
        s.fd = std::move(fd);
        try {
          s.thread = std::thread([this, &s, peer] { serve(s, peer); });
          ++live;
          continue;
        } catch (const std::system_error& e) {
          log::warn("http server: cannot start a thread for {}: {}", peer, e.what());
          fd = std::move(s.fd);
          slots.pop_back();
        }
      }
    }
    // Over the limit: a word, without waiting for room to send it, and the close. What the
    // client sent already is read first, so that the close does not reset the connection.
    answer(fd.get(), 503, "too many connections\n", milliseconds(0));
    (void)::shutdown(fd.get(), SHUT_WR);
    char drop[4096];
    for (size_t total = 0; total < (64u << 10);) {
      const ssize_t n = ::recv(fd.get(), drop, sizeof drop, MSG_DONTWAIT);
      if (n <= 0) break;
      total += static_cast<size_t>(n);
    }
    log::debug("http server: refused {}: {} connections", peer, opts.max_connections);
  }
}

void server::impl::stop() {
  std::lock_guard once(stop_mu);
  if (stopped) return;
  stopped = true;
  stopping = true;
  const uint64_t one = 1;
  if (wake && ::write(wake.get(), &one, sizeof one) < 0)
    log::warn("http server: waking the acceptor: {}", std::strerror(errno));
  if (acceptor.joinable()) acceptor.join();
  listener.reset();
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mu);
    for (auto& s : slots) {
      if (!s.done && s.fd) (void)::shutdown(s.fd.get(), SHUT_RDWR);
      if (s.thread.joinable()) threads.push_back(std::move(s.thread));
    }
  }
  for (auto& t : threads) t.join();
  std::lock_guard lock(mu);
  slots.clear();
}

server::server(std::unique_ptr<impl> i) : impl_(std::move(i)) {}

server::~server() { stop(); }

uint16_t server::port() const noexcept { return impl_->port; }

bool server::stopping() const noexcept { return impl_->stopping; }

const std::atomic<bool>& server::stopping_flag() const noexcept { return impl_->stopping; }

void server::stop() { impl_->stop(); }

result<std::unique_ptr<server>> server::start(server_options o, request_handler h) {
  if (!h) return make_error(error_kind::invalid_argument, "http server: no handler");
  if (o.max_connections == 0)
    return make_error(error_kind::invalid_argument, "http server: max_connections is 0");
  sockaddr_storage a{};
  socklen_t len = 0;
  auto& in = reinterpret_cast<sockaddr_in&>(a);
  auto& in6 = reinterpret_cast<sockaddr_in6&>(a);
  if (::inet_pton(AF_INET, o.address.c_str(), &in.sin_addr) == 1) {
    in.sin_family = AF_INET;
    in.sin_port = htons(o.port);
    len = sizeof in;
  } else if (::inet_pton(AF_INET6, o.address.c_str(), &in6.sin6_addr) == 1) {
    in6.sin6_family = AF_INET6;
    in6.sin6_port = htons(o.port);
    len = sizeof in6;
  } else {
    return make_error(error_kind::invalid_argument, "http server: '{}' is not an IP address",
                      o.address);
  }
  const std::string where = address_text(a);

  auto i = std::make_unique<impl>();
  i->listener.reset(::socket(a.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!i->listener) return sys_error(errno, "http server: socket");
  const int one = 1;
  (void)::setsockopt(i->listener.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(i->listener.get(), reinterpret_cast<sockaddr*>(&a), len) != 0) {
    const int err = errno;
    auto e = sys_error(err, "http server: bind {}", where);
    if (err == EADDRINUSE) e.error().kind = error_kind::busy;
    return e;
  }
  if (::listen(i->listener.get(), SOMAXCONN) != 0)
    return sys_error(errno, "http server: listen {}", where);
  len = sizeof a;
  if (::getsockname(i->listener.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0)
    return sys_error(errno, "http server: getsockname");
  i->port = ntohs(a.ss_family == AF_INET ? in.sin_port : in6.sin6_port);
  i->wake.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!i->wake) return sys_error(errno, "http server: eventfd");
  i->opts = std::move(o);
  i->handler = std::move(h);
  try {
    i->acceptor = std::thread([p = i.get()] { p->accept_loop(); });
  } catch (const std::system_error& e) {
    return make_error(error_kind::io, "http server: cannot start its thread: {}", e.what());
  }
  log::debug("http server: listening on {}", address_text(a));
  return std::unique_ptr<server>(new server(std::move(i)));
}

}  // namespace evalbox::sandbox::http
