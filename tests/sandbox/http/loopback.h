// Servers for the HTTP client's tests, all on 127.0.0.1: a scripted plain server in a thread
// (one connection at a time, handed to the test's handler), a TLS server in a child process,
// and a CONNECT proxy handler. Every wait is bounded and ends when the server is destroyed;
// nothing connects beyond the loopback interface.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "sandbox/launch/host_program.h"

namespace evalbox::testing {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
using test_clock = std::chrono::steady_clock;

inline milliseconds since(test_clock::time_point t) {
  return std::chrono::duration_cast<milliseconds>(test_clock::now() - t);
}

inline bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

// A listening socket on 127.0.0.1, port chosen by the kernel.
inline int listen_loopback(uint16_t& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  port = ntohs(a.sin_port);
  EXPECT_EQ(::listen(fd, 16), 0);
  return fd;
}

inline bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Reads what arrives within `wait` (one read), or "" on a timeout or a closed connection.
inline std::string read_some(int fd, milliseconds wait) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(wait.count())) <= 0) return {};
  char buf[16384];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

inline std::string lower_ascii(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

// The head and (by Content-Length) the body of a request; every read bounded by 5 s.
inline std::string read_request(int fd) {
  std::string req;
  while (!contains(req, "\r\n\r\n")) {
    std::string more = read_some(fd, 5s);
    if (more.empty()) return req;
    req += more;
  }
  const size_t head = req.find("\r\n\r\n") + 4;
  size_t want = 0;
  const std::string low = lower_ascii(req.substr(0, head));
  if (auto cl = low.find("\r\ncontent-length:"); cl != std::string::npos)
    want = std::stoul(req.substr(cl + 17));
  while (req.size() < head + want) {
    std::string more = read_some(fd, 5s);
    if (more.empty()) break;
    req += more;
  }
  return req;
}

// One connection at a time on 127.0.0.1: the request is read (or, `raw`, only the first bytes
// that arrive), recorded, and handed with the socket to `on_request`, which answers as the
// test needs. Destruction stops waits made with pause() and joins the thread.
class loopback_server {
 public:
  using handler = std::function<void(loopback_server&, int fd, const std::string& request)>;

  explicit loopback_server(handler on_request, bool raw = false)
      : on_request_(std::move(on_request)), raw_(raw) {
    ::signal(SIGPIPE, SIG_IGN);  // a client that hangs up must not kill the test
    fd_ = listen_loopback(port_);
    thread_ = std::thread([this] { serve(); });
  }
  // A server that answers every request with `reply`.
  explicit loopback_server(std::string reply)
      : loopback_server(
            [reply](loopback_server&, int fd, const std::string&) { send_all(fd, reply); }) {}
  ~loopback_server() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  loopback_server(const loopback_server&) = delete;
  loopback_server& operator=(const loopback_server&) = delete;

  [[nodiscard]] uint16_t port() const { return port_; }
  [[nodiscard]] std::string url(std::string_view path = "/") const {
    return "http://127.0.0.1:" + std::to_string(port_) + std::string(path);
  }
  std::vector<std::string> requests() {
    std::lock_guard l(mu_);
    return requests_;
  }
  // Sleeps for `d` unless the server is being stopped; false then.
  bool pause(milliseconds d) const {
    const auto until = test_clock::now() + d;
    while (test_clock::now() < until) {
      if (stop_) return false;
      std::this_thread::sleep_for(5ms);
    }
    return !stop_;
  }
  [[nodiscard]] bool stopping() const { return stop_; }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      const std::string req = raw_ ? read_some(c, 5s) : read_request(c);
      {
        std::lock_guard l(mu_);
        requests_.push_back(req);
      }
      on_request_(*this, c, req);
      ::close(c);
    }
  }

  handler on_request_;
  bool raw_ = false;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<std::string> requests_;
  std::thread thread_;
};

inline std::string reply_with(int status, const std::string& body, const std::string& extra = "") {
  return "HTTP/1.1 " + std::to_string(status) +
         " X\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + extra +
         "Connection: close\r\n\r\n" + body;
}

// TLS on 127.0.0.1: tls_server.py (Python's ssl module) as a child process, so that OpenSSL
// stays in the client's one file. Each connection is handshaken with `cert`/`key`, its request
// recorded and answered 200 "hello". Destruction closes the child's stdin (it exits) and reaps
// it, killing it after 5 s.
class tls_server {
 public:
  tls_server(const std::filesystem::path& cert, const std::filesystem::path& key,
             const std::filesystem::path& record)
      : record_(record) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) {
      ADD_FAILURE() << "pipe2: " << std::strerror(errno);
      return;
    }
    const std::string script = EVALBOX_SOURCE_DIR "/tests/sandbox/http/tls_server.py";
    auto child = evalbox::sandbox::start_host_process(
        {EVALBOX_PYTHON,
         {script, cert.string(), key.string(), record.string()},
         {{in[0], 0}, {out[1], 1}},
         true});
    ::close(in[0]);
    ::close(out[1]);
    stdin_ = in[1];
    if (!child) {
      ::close(out[0]);
      ADD_FAILURE() << "start tls_server.py: " << child.error().message;
      return;
    }
    child_ = std::move(*child);
    // The first line is the port; Python starts well within 10 s.
    std::string line;
    const auto until = test_clock::now() + 10s;
    while (!contains(line, "\n") && test_clock::now() < until) {
      std::string more = read_some(out[0], 100ms);
      line += more;
      if (more.empty() && ::waitpid(child_.pid(), nullptr, WNOHANG) == child_.pid()) break;
    }
    ::close(out[0]);
    port_ = static_cast<uint16_t>(std::atoi(line.c_str()));
    EXPECT_NE(port_, 0) << "tls_server.py did not start: '" << line << "'";
  }
  // Closing stdin asks the child to exit; owned_process kills and reaps it if it has not.
  ~tls_server() {
    if (stdin_ >= 0) ::close(stdin_);
    if (!child_.owned()) return;
    const auto until = test_clock::now() + 5s;
    while (::waitpid(child_.pid(), nullptr, WNOHANG) == 0 && test_clock::now() < until)
      std::this_thread::sleep_for(10ms);
  }
  tls_server(const tls_server&) = delete;
  tls_server& operator=(const tls_server&) = delete;

  [[nodiscard]] uint16_t port() const { return port_; }
  // The heads of the requests received so far.
  [[nodiscard]] std::vector<std::string> requests() const {
    std::ifstream f(record_, std::ios::binary);
    std::vector<std::string> out;
    std::string req;
    while (std::getline(f, req, '\0')) out.push_back(req);
    return out;
  }

 private:
  std::filesystem::path record_;
  evalbox::sys::owned_process child_;
  int stdin_ = -1;
  uint16_t port_ = 0;
};

// A CA and leaves it signed, made in `dir` with the openssl CLI: ca.pem; leaf.pem/leaf.key for
// localhost, 127.0.0.1 and registry.test; other.pem/other.key for other.test only. Returns
// openssl's output when it failed.
inline std::optional<std::string> make_test_certificates(const std::filesystem::path& d) {
  std::ofstream(d / "leaf.ext") << "basicConstraints=CA:FALSE\n"
                                   "keyUsage=digitalSignature\n"
                                   "extendedKeyUsage=serverAuth\n"
                                   "subjectAltName=DNS:localhost,IP:127.0.0.1,DNS:registry.test\n";
  std::ofstream(d / "other.ext") << "basicConstraints=CA:FALSE\n"
                                    "extendedKeyUsage=serverAuth\n"
                                    "subjectAltName=DNS:other.test\n";
  const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  std::string script = "set -e; cd '" + d.string() + "'\n" + "openssl req -x509 " + key +
                       " -keyout ca.key -out ca.pem -days 2 -subj /CN=evalbox-test-ca"
                       " -addext basicConstraints=critical,CA:TRUE"
                       " -addext keyUsage=critical,keyCertSign,cRLSign\n";
  int serial = 2;
  for (const char* name : {"leaf", "other"}) {
    const std::string n = name;
    script += "openssl req -new " + key + " -keyout " + n + ".key -out " + n +
              ".csr -subj /CN=" + (n == "leaf" ? "localhost" : "other.test") + "\n" +
              "openssl x509 -req -in " + n + ".csr -CA ca.pem -CAkey ca.key -set_serial " +
              std::to_string(serial++) + " -days 2 -extfile " + n + ".ext -out " + n + ".pem\n";
  }
  std::ofstream(d / "make.sh") << script;
  const std::string cmd =
      "sh '" + (d / "make.sh").string() + "' >'" + (d / "make.log").string() + "' 2>&1";
  if (std::system(cmd.c_str()) == 0) return std::nullopt;
  std::ifstream log(d / "make.log");
  return std::string(std::istreambuf_iterator<char>(log), {});
}

// A CONNECT proxy that reaches every target at 127.0.0.1 (whatever name it is asked for:
// nothing leaves the host) and relays both ways until one side closes.
inline void connect_proxy(loopback_server& self, int client, const std::string& req) {
  const size_t sp1 = req.find(' ');
  const size_t sp2 = req.find(' ', sp1 + 1);
  if (req.rfind("CONNECT ", 0) != 0 || sp2 == std::string::npos) {
    send_all(client, reply_with(400, ""));
    return;
  }
  const std::string authority = req.substr(sp1 + 1, sp2 - sp1 - 1);
  const int upstream = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(std::stoi(authority.substr(authority.rfind(':') + 1))));
  if (::connect(upstream, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    send_all(client, reply_with(502, ""));
    ::close(upstream);
    return;
  }
  send_all(client, "HTTP/1.1 200 Connection established\r\n\r\n");
  pollfd fds[2] = {{client, POLLIN, 0}, {upstream, POLLIN, 0}};
  const auto until = test_clock::now() + 10s;
  while (!self.stopping() && test_clock::now() < until) {
    if (::poll(fds, 2, 50) < 0) break;
    bool closed = false;
    for (int i = 0; i < 2; ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[16384];
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n <= 0 || !send_all(fds[1 - i].fd, std::string_view(buf, static_cast<size_t>(n))))
        closed = true;
    }
    if (closed) break;
  }
  ::close(upstream);
}

}  // namespace evalbox::testing
