// Network policy `allow`: the run has its own network namespace with only loopback, and the
// helper (in the host's namespace) serves listening sockets that the child created inside and
// passed out with SCM_RIGHTS:
//   - a loopback target (an IP literal such as 127.0.0.1:8080) is relayed: the same address
//     inside forwards to the same address on the host;
//   - host names go through an HTTP CONNECT proxy at 127.0.0.1:<proxy_port> inside, which
//     checks the allow-list and connects from the host.
// Every attempt, allowed or refused, is recorded. The relay is single-threaded and driven by
// the helper's poll loop.
#pragma once

#include <poll.h>

#include <cstdint>
#include <expected>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/unique_fd.h"

namespace evalbox::sandbox::net {

inline constexpr uint16_t default_proxy_port = 3128;
// A proxy request whose head (up to the blank line) is longer than this is refused.
inline constexpr size_t max_request_head = 16384;

struct target {
  std::string host;  // lower-case name or IP literal (no brackets)
  uint16_t port = 0;
  bool ip_loopback = false;                // 127.0.0.0/8 or ::1 literal
  [[nodiscard]] std::string text() const;  // "host:port" ("[::1]:80")
};

result<target> parse_target(std::string_view text);

struct listener {
  std::string ip;  // inside address to listen on
  uint16_t port = 0;
  bool ipv6 = false;
  bool proxy = false;  // the CONNECT proxy; else a relay to `relay_to`
  target relay_to;
};

struct allow_plan {
  std::vector<listener> listeners;
  std::vector<target> proxied;  // names reachable through the proxy
  uint16_t proxy_port = 0;      // 0: no proxy
};

result<allow_plan> plan_allow(const std::vector<std::string>& allow);

// The CONNECT proxy's view of one request, parsed from its head (everything before the blank
// line). Two forms are served: "CONNECT host:port HTTP/1.1" (a tunnel, for HTTPS and anything
// else), and a plain-HTTP request in absolute form ("GET http://host[:port]/path HTTP/1.1"),
// forwarded with its request line rewritten to origin form.
struct proxy_request {
  target to;
  std::string forward;  // plain HTTP: the head to send first; empty for CONNECT (a tunnel)
};
// Why a request is refused: the status to answer, and what the attempt is recorded as.
struct proxy_refusal {
  std::string status;  // "400 Bad Request", ...
  std::string target;  // the request line (at most 200 bytes) or the authority asked for
  std::string detail;
};
std::expected<proxy_request, proxy_refusal> parse_proxy_request(std::string_view head);

// True when the plan lets the proxy connect to `t`: its host (lower case) and port are exactly
// an allow-list entry's.
bool proxy_allows(const allow_plan& plan, const target& t);

struct attempt {
  std::string target;
  bool allowed = false;
  std::string via;  // "relay" | "proxy"
  std::string detail;
};

class relay {
 public:
  explicit relay(allow_plan plan);
  ~relay();
  relay(const relay&) = delete;
  relay& operator=(const relay&) = delete;

  void add_listener(size_t index, unique_fd fd);
  // Appends the fds to watch; handle() must get the same vector back after poll().
  void fill(std::vector<pollfd>& fds);
  void handle(const std::vector<pollfd>& fds);
  [[nodiscard]] const std::vector<attempt>& attempts() const noexcept { return attempts_; }

 private:
  struct conn;
  void accept_on(size_t index);
  void pump(conn& c, bool from_inside);
  void proxy_request(conn& c);
  allow_plan plan_;
  std::vector<unique_fd> listeners_;
  std::vector<std::unique_ptr<conn>> conns_;
  std::vector<attempt> attempts_;
  size_t first_fd_ = 0;
};

}  // namespace evalbox::sandbox::net
