// A small HTTP/1.1 server on the host: how the model gateway serves agents on 127.0.0.1 (each
// request forwarded to an upstream, the answer streamed back, SSE included). Its input is
// hostile (an agent writes it): requests are parsed by Boost.Beast's parser, with limits on the
// head and the body, and Beast stays in server.cpp.
//
// Theory of operation. start() binds and listens, then one acceptor thread polls the listening
// socket and an eventfd that stop() signals. Each accepted connection gets its own thread (at
// most max_connections at once; one more is answered 503 and closed by the acceptor). A
// connection thread reads a request (the head and the whole body) within read_timeout, calls
// the handler with it and a response_stream, and, when the response was ended and keep-alive
// holds (HTTP/1.1 without "Connection: close"), reads the next one. What cannot reach a handler
// is answered by the server, which then closes: a malformed request 400, a head over max_head
// 431, a body over max_body 413, a request not complete within read_timeout 408. Writes go
// straight to the socket (TCP_NODELAY, no buffering beyond the kernel's), each bounded by
// write_timeout. stop() stops accepting, shuts every connection's socket down (which wakes
// every blocked poll and fails every later write) and joins every thread; a handler that waits
// on something else polls stopping().
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"
#include "sandbox/http/client.h"

namespace evalbox::sandbox::http {

// A whole request, as received.
struct incoming_request {
  std::string method;   // "POST"
  std::string target;   // origin-form as sent: "/v1/messages?beta=true"
  header_list headers;  // as received, in order (names as sent)
  std::string body;     // whole body (Content-Length or chunked), at most max_body
  std::string peer;     // "127.0.0.1:54321"
  // The first header of that name (case-insensitive), or nullopt.
  [[nodiscard]] std::optional<std::string> header(std::string_view name) const;
};

// One response. A handler calls begin() once, then write() any number of times, then end().
// Used only on the handler's thread, during the handler's call.
class response_stream {
 public:
  virtual ~response_stream() = default;
  // Status line (200..599) and headers. The body is framed with Content-Length when `length` is
  // set, else chunked (to an HTTP/1.0 client: unframed, ended by closing). Hop-by-hop and
  // framing headers in `headers` (Connection and the headers it names, Keep-Alive,
  // Transfer-Encoding, Content-Length, TE, Trailer, Upgrade, Proxy-*) are dropped; the server
  // writes its own. A header name or value that would break the head (CR, LF, NUL, a name that
  // is not a token) is an error, invalid_argument, and nothing is sent.
  virtual status begin(int status, const header_list& headers, std::optional<uint64_t> length) = 0;
  // Sent now (no buffering beyond the kernel), bounded by write_timeout. A zero-length write
  // sends nothing. Past `length`: invalid_argument, nothing sent.
  virtual status write(std::string_view bytes) = 0;
  // The chunked terminator; keeps the connection for keep-alive. Short of `length`: an error,
  // and the connection is closed (the client sees a cut response).
  virtual status end() = 0;
  // Closes the connection without ending the body (the client sees a cut response).
  virtual void abort() = 0;
  [[nodiscard]] virtual bool begun() const = 0;
};
// After a write error (the peer gone: io; write_timeout passed: expired), every later write()
// and end() returns that error and the connection is closed once the handler returns. A handler
// that returns without begin() gets a 502 sent for it; one that began but did not end() (nor
// abort()) has its response ended for it. An exception out of a handler is caught: a 502 if it
// had not begun, else its response is aborted.
using request_handler = std::function<void(const incoming_request&, response_stream&)>;

struct server_options {
  std::string address = "127.0.0.1";  // an IPv4 or IPv6 address (no name lookup)
  uint16_t port = 0;                  // 0: a free port
  size_t max_head = 64u << 10;        // request line and headers
  size_t max_body = 32u << 20;
  std::chrono::milliseconds read_timeout{60000};   // for a whole request, and the idle wait
                                                   // between keep-alive requests
  std::chrono::milliseconds write_timeout{60000};  // each write
  size_t max_connections = 64;                     // beyond it: 503 and close
};

class server {
 public:
  // Binds, listens and starts the acceptor. Errors: the address is not one (invalid_argument),
  // bind or listen failed (busy for a port in use, else io).
  static result<std::unique_ptr<server>> start(server_options o, request_handler h);
  ~server();  // stop()
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  [[nodiscard]] uint16_t port() const noexcept;
  // True once stop() was called: a handler waiting on an upstream polls it.
  [[nodiscard]] bool stopping() const noexcept;
  // The same flag, to pass as sandbox::http::options::cancel.
  [[nodiscard]] const std::atomic<bool>& stopping_flag() const noexcept;
  // Stops accepting, shuts down every connection (::shutdown wakes blocked polls), joins every
  // thread. Idempotent. Not from a handler (it would join its own thread).
  void stop();

  struct impl;

 private:
  explicit server(std::unique_ptr<impl> i);
  std::unique_ptr<impl> impl_;
};

}  // namespace evalbox::sandbox::http
