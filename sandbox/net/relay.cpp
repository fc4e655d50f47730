// The loopback relay and the CONNECT proxy of network policy `allow`.
#include "sandbox/net/relay.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace evalbox::sandbox::net {

std::string target::text() const {
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

result<target> parse_target(std::string_view text) {
  target t;
  std::string_view host, port;
  if (text.starts_with('[')) {
    auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return make_error(error_kind::invalid_argument, "network target {}: expected [ip]:port",
                        text);
    }
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string_view::npos || colon == 0) {
      return make_error(error_kind::invalid_argument, "network target {}: expected host:port",
                        text);
    }
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  unsigned long p = 0;
  for (char ch : port) {
    if (ch < '0' || ch > '9')
      p = 70000;
    else
      p = p * 10 + static_cast<unsigned long>(ch - '0');
    if (p > 65535) break;
  }
  if (port.empty() || p == 0 || p > 65535) {
    return make_error(error_kind::invalid_argument, "network target {}: bad port", text);
  }
  t.port = static_cast<uint16_t>(p);
  t.host.assign(host);
  std::transform(t.host.begin(), t.host.end(), t.host.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  in_addr a4{};
  in6_addr a6{};
  if (::inet_pton(AF_INET, t.host.c_str(), &a4) == 1) {
    t.ip_loopback = (ntohl(a4.s_addr) >> 24) == 127;
  } else if (::inet_pton(AF_INET6, t.host.c_str(), &a6) == 1) {
    t.ip_loopback = IN6_IS_ADDR_LOOPBACK(&a6);
  }
  return t;
}

result<allow_plan> plan_allow(const std::vector<std::string>& allow) {
  allow_plan p;
  for (const auto& entry : allow) {
    target t = EB_TRY(parse_target(entry));
    if (t.ip_loopback) {
      listener l;
      l.ip = t.host;
      l.port = t.port;
      l.ipv6 = t.host.find(':') != std::string::npos;
      l.relay_to = t;
      p.listeners.push_back(std::move(l));
    } else {
      in_addr a4{};
      in6_addr a6{};
      if (::inet_pton(AF_INET, t.host.c_str(), &a4) == 1 ||
          ::inet_pton(AF_INET6, t.host.c_str(), &a6) == 1) {
        // Only names go through the proxy; a non-loopback IP literal would be the machine's
        // other interfaces or the outside, reachable by address alone: refuse at plan time.
        return make_error(error_kind::invalid_argument,
                          "network allow {}: only loopback IP literals or host names", entry);
      }
      p.proxied.push_back(std::move(t));
    }
  }
  if (!p.proxied.empty()) {
    uint16_t port = default_proxy_port;
    while (std::any_of(p.listeners.begin(), p.listeners.end(),
                       [&](const listener& l) { return l.ip == "127.0.0.1" && l.port == port; })) {
      ++port;
    }
    p.proxy_port = port;
    listener l;
    l.ip = "127.0.0.1";
    l.port = port;
    l.proxy = true;
    p.listeners.push_back(std::move(l));
  }
  return p;
}

std::expected<proxy_request, proxy_refusal> parse_proxy_request(std::string_view head) {
  const std::string_view line = head.substr(0, head.find("\r\n"));
  const auto sp1 = line.find(' ');
  const auto sp2 = line.rfind(' ');
  if (sp1 == std::string_view::npos || sp2 == sp1)
    return std::unexpected(proxy_refusal{"400 Bad Request", std::string(line.substr(0, 200)),
                                         "malformed request line"});
  const std::string_view method = line.substr(0, sp1);
  const std::string_view uri = line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string authority;
  proxy_request r;
  if (method == "CONNECT") {
    authority = uri;
  } else if (uri.starts_with("http://")) {
    const auto slash = uri.find('/', 7);
    authority = uri.substr(7, slash == std::string_view::npos ? std::string_view::npos : slash - 7);
    if (authority.find(':') == std::string::npos || authority.ends_with(']')) authority += ":80";
    const std::string_view path = slash == std::string_view::npos ? "/" : uri.substr(slash);
    r.forward =
        fmt::format("{} {}{}{}\r\n\r\n", method, path, line.substr(sp2), head.substr(line.size()));
  } else {
    return std::unexpected(
        proxy_refusal{"405 Method Not Allowed", std::string(line.substr(0, 200)),
                      "only CONNECT and absolute http:// requests are supported"});
  }
  auto to = parse_target(authority);
  if (!to) return std::unexpected(proxy_refusal{"400 Bad Request", authority, to.error().message});
  r.to = std::move(*to);
  return r;
}

bool proxy_allows(const allow_plan& plan, const target& t) {
  return std::any_of(plan.proxied.begin(), plan.proxied.end(),
                     [&](const target& a) { return a.host == t.host && a.port == t.port; });
}

struct relay::conn {
  unique_fd inside, outside;
  std::string to_outside, to_inside;  // pending bytes
  bool proxy_pending = false;         // reading the CONNECT request
  bool inside_eof = false, outside_eof = false;
  bool dead = false;
};

relay::relay(allow_plan plan) : plan_(std::move(plan)) {
  listeners_.resize(plan_.listeners.size());
}
relay::~relay() = default;

void relay::add_listener(size_t index, unique_fd fd) {
  if (index < listeners_.size()) {
    ::fcntl(fd.get(), F_SETFL, O_NONBLOCK);
    listeners_[index] = std::move(fd);
  }
}

namespace {
unique_fd connect_to(const std::string& host, uint16_t port, std::string& detail) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res); rc != 0) {
    detail = fmt::format("resolve: {}", ::gai_strerror(rc));
    return {};
  }
  unique_fd out;
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    unique_fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd) continue;
    if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) == 0) {
      out = std::move(fd);
      break;
    }
    detail = fmt::format("connect: {}", errno_name(errno));
  }
  ::freeaddrinfo(res);
  if (out) {
    detail.clear();
    ::fcntl(out.get(), F_SETFL, O_NONBLOCK);
  }
  return out;
}
}  // namespace

void relay::accept_on(size_t index) {
  unique_fd in(::accept4(listeners_[index].get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
  if (!in) return;
  auto c = std::make_unique<conn>();
  c->inside = std::move(in);
  const listener& l = plan_.listeners[index];
  if (l.proxy) {
    c->proxy_pending = true;
  } else {
    attempt a{l.relay_to.text(), true, "relay", ""};
    c->outside = connect_to(l.relay_to.host, l.relay_to.port, a.detail);
    if (!c->outside) c->dead = true;
    attempts_.push_back(std::move(a));
  }
  conns_.push_back(std::move(c));
}

void relay::proxy_request(conn& c) {
  char buf[4096];
  ssize_t n = ::read(c.inside.get(), buf, sizeof buf);
  if (n <= 0) {
    if (n == 0 || (errno != EAGAIN && errno != EINTR)) c.dead = true;
    return;
  }
  c.to_outside.append(buf, static_cast<size_t>(n));
  auto refuse = [&](const std::string& status) {
    std::string r = fmt::format("HTTP/1.1 {}\r\nContent-Length: 0\r\n\r\n", status);
    (void)!::send(c.inside.get(), r.data(), r.size(), MSG_NOSIGNAL);
    c.dead = true;
  };
  auto end = c.to_outside.find("\r\n\r\n");
  if (end == std::string::npos) {
    if (c.to_outside.size() > max_request_head) {
      // Refused like any other request, and recorded: every attempt is.
      const std::string_view head = c.to_outside;
      attempts_.push_back({std::string(head.substr(0, std::min<size_t>(head.find("\r\n"), 200))),
                           false, "proxy",
                           fmt::format("request head larger than {} bytes", max_request_head)});
      refuse("431 Request Header Fields Too Large");
    }
    return;
  }
  const auto request = parse_proxy_request(std::string_view(c.to_outside).substr(0, end));
  std::string rest = c.to_outside.substr(end + 4);
  c.to_outside.clear();
  c.proxy_pending = false;
  if (!request) {
    const proxy_refusal& no = request.error();
    attempts_.push_back({no.target, false, "proxy", no.detail});
    refuse(no.status);
    return;
  }
  const target& to = request->to;
  attempt a{to.text(), proxy_allows(plan_, to), "proxy", ""};
  if (!a.allowed) {
    a.detail = "not in the allow-list";
    attempts_.push_back(std::move(a));
    refuse("403 Forbidden");
    return;
  }
  c.outside = connect_to(to.host, to.port, a.detail);
  if (!c.outside) {
    refuse("502 Bad Gateway");
  } else if (request->forward.empty()) {
    const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
    c.to_inside.assign(ok, sizeof ok - 1);
    c.to_outside = std::move(rest);
  } else {
    c.to_outside = request->forward + rest;
  }
  attempts_.push_back(std::move(a));
}

void relay::pump(conn& c, bool from_inside) {
  int src = from_inside ? c.inside.get() : c.outside.get();
  std::string& buf = from_inside ? c.to_outside : c.to_inside;
  if (buf.size() >= (1u << 16)) return;  // back-pressure: wait until the other side drains
  char tmp[16384];
  ssize_t n = ::read(src, tmp, sizeof tmp);
  if (n > 0) {
    buf.append(tmp, static_cast<size_t>(n));
  } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
    (from_inside ? c.inside_eof : c.outside_eof) = true;
  }
}

void relay::fill(std::vector<pollfd>& fds) {
  // Flush what can be written now, drop finished connections, then list what to watch.
  for (auto& c : conns_) {
    auto flush = [&](int fd, std::string& buf) {
      if (buf.empty() || fd < 0) return;
      // MSG_NOSIGNAL: a peer that closed early (a client that read only the head) is a dead
      // connection, not a SIGPIPE that kills the helper and the run with it.
      ssize_t w = ::send(fd, buf.data(), buf.size(), MSG_NOSIGNAL);
      if (w > 0)
        buf.erase(0, static_cast<size_t>(w));
      else if (w < 0 && errno != EAGAIN && errno != EINTR)
        c->dead = true;
    };
    if (!c->proxy_pending) flush(c->outside.get(), c->to_outside);
    flush(c->inside.get(), c->to_inside);
    if (c->inside_eof && c->to_outside.empty() && c->outside) ::shutdown(c->outside.get(), SHUT_WR);
    if (c->outside_eof && c->to_inside.empty()) ::shutdown(c->inside.get(), SHUT_WR);
    if (c->inside_eof && c->outside_eof) c->dead = true;
    if (c->dead && !c->to_inside.empty() && !c->outside) {
      flush(c->inside.get(), c->to_inside);
    }
  }
  std::erase_if(conns_, [](const auto& c) { return c->dead; });
  first_fd_ = fds.size();
  for (const auto& l : listeners_) fds.push_back({l ? l.get() : -1, POLLIN, 0});
  for (const auto& c : conns_) {
    short in_events = c->inside_eof ? 0 : POLLIN;
    if (!c->to_inside.empty()) in_events |= POLLOUT;
    fds.push_back({c->inside.get(), in_events, 0});
    short out_events = (c->outside_eof || !c->outside) ? 0 : POLLIN;
    if (!c->to_outside.empty()) out_events |= POLLOUT;
    fds.push_back({c->outside ? c->outside.get() : -1, out_events, 0});
  }
}

void relay::handle(const std::vector<pollfd>& fds) {
  size_t i = first_fd_;
  const size_t nconns = conns_.size();
  for (size_t l = 0; l < listeners_.size(); ++l, ++i) {
    if (i < fds.size() && (fds[i].revents & POLLIN)) accept_on(l);
  }
  for (size_t k = 0; k < nconns; ++k, i += 2) {
    conn& c = *conns_[k];
    if (i + 1 >= fds.size()) break;
    if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
      if (c.proxy_pending)
        proxy_request(c);
      else
        pump(c, true);
    }
    if (fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR)) pump(c, false);
  }
}

}  // namespace evalbox::sandbox::net
