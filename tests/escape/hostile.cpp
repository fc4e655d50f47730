// evalbox-hostile: the hostile actions the escape tests run inside the sandbox, one per mode.
// Each prints what happened ("ok ..." or the errno name) and exits 0 when the action worked,
// 1 when it was refused, so the tests can assert containment from both.
#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

int report(bool ok, const char* what) {
  if (ok) {
    std::printf("ok %s\n", what);
    return 0;
  }
  std::printf("refused %s: %s\n", what, strerrorname_np(errno) ? strerrorname_np(errno) : "?");
  return 1;
}

int read_path(const char* path) {
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return report(false, path);
  char buf[256];
  ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  return report(n >= 0, path);
}

int write_path(const char* path) {
  int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return report(false, path);
  ssize_t n = ::write(fd, "x", 1);
  ::close(fd);
  return report(n == 1, path);
}

int open_fds() {
  std::string out;
  for (int fd = 0; fd < 4096; ++fd) {
    if (::fcntl(fd, F_GETFD) >= 0) out += (out.empty() ? "" : " ") + std::to_string(fd);
  }
  std::printf("fds %s\n", out.c_str());
  return 0;
}

int fork_bomb(int max) {
  // A second fence behind the run's pids limit, whatever shell started us.
  rlimit nproc{400, 400};
  ::setrlimit(RLIMIT_NPROC, &nproc);
  int forked = 0, refused = 0;
  for (int i = 0; i < max; ++i) {
    pid_t p = ::fork();
    if (p == 0) {
      ::sleep(3);
      ::_exit(0);
    }
    if (p < 0)
      ++refused;
    else
      ++forked;
  }
  std::printf("forked %d refused %d\n", forked, refused);
  std::fflush(stdout);
  return 0;
}

int memory_hog(size_t max_mib) {
  std::vector<char*> blocks;
  for (size_t i = 0; i < max_mib; ++i) {
    char* b = static_cast<char*>(std::malloc(1 << 20));
    if (!b) break;
    std::memset(b, 1, 1 << 20);
    blocks.push_back(b);
  }
  std::printf("allocated %zu MiB\n", blocks.size());
  return 0;
}

int connect_to(const char* ip, int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, ip, &sa.sin_addr);
  int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
  return report(rc == 0, "connect");
}

// One HTTP request (POST `path`, `key` as a Bearer token): prints "http STATUS", "http none"
// when the connection closed without an answer, or the connect's errno.
int http_post(const char* ip, int port, const char* path, const char* key) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, ip, &sa.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0)
    return report(false, "connect");
  const std::string req = std::string("POST ") + path +
                          " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + key +
                          "\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
                          "Connection: close\r\n\r\n{}";
  (void)!::write(fd, req.data(), req.size());
  char head[64] = {};
  size_t got = 0;
  while (got < 12) {
    const ssize_t n = ::read(fd, head + got, sizeof head - 1 - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  if (got < 12) {
    std::printf("http none\n");
    return 1;
  }
  std::printf("http %.3s\n", head + 9);  // "HTTP/1.1 200 ..."
  return 0;
}

int interfaces() {
  struct if_nameindex* list = ::if_nameindex();
  std::string out;
  for (auto* i = list; i && i->if_index; ++i)
    out += (out.empty() ? "" : " ") + std::string(i->if_name);
  std::printf("interfaces %s\n", out.c_str());
  return 0;
}

int whoami() {
  std::string caps = "?";
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f)) {
      if (std::strncmp(line, "CapEff:", 7) == 0) {
        caps = line + 8;
        caps.erase(caps.find_last_not_of(" \t\n") + 1);
      }
    }
    std::fclose(f);
  }
  std::printf("euid %d capeff %s\n", ::geteuid(), caps.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::string mode = argv[1];
  if (mode == "read" && argc == 3) return read_path(argv[2]);
  if (mode == "write" && argc == 3) return write_path(argv[2]);
  if (mode == "fds") return open_fds();
  if (mode == "fork-bomb" && argc == 3) return fork_bomb(std::atoi(argv[2]));
  if (mode == "memory-hog" && argc == 3) return memory_hog(std::strtoul(argv[2], nullptr, 10));
  if (mode == "connect" && argc == 4) return connect_to(argv[2], std::atoi(argv[3]));
  if (mode == "http" && argc == 6) return http_post(argv[2], std::atoi(argv[3]), argv[4], argv[5]);
  if (mode == "interfaces") return interfaces();
  if (mode == "whoami") return whoami();
  if (mode == "ptrace" && argc == 3) {
    return report(::ptrace(PTRACE_ATTACH, std::atoi(argv[2]), nullptr, nullptr) == 0, "ptrace");
  }
  if (mode == "kexec") {
    return report(::syscall(SYS_kexec_load, 0, 0, nullptr, 0) == 0, "kexec_load");
  }
  if (mode == "init-module") {
    static char image[64] = {};
    return report(::syscall(SYS_init_module, image, sizeof image, "") == 0, "init_module");
  }
  if (mode == "finit-module") {
    int fd = ::open("/usr/bin/true", O_RDONLY | O_CLOEXEC);
    return report(::syscall(SYS_finit_module, fd, "", 0) == 0, "finit_module");
  }
  if (mode == "mount-usr") {
    return report(::mount("x", "/usr", "tmpfs", 0, nullptr) == 0, "mount tmpfs on /usr");
  }
  if (mode == "remount-usr-rw") {
    return report(::mount(nullptr, "/usr", nullptr, MS_REMOUNT | MS_BIND, nullptr) == 0,
                  "remount /usr rw");
  }
  if (mode == "write-usr") return write_path("/usr/evalbox-escape");
  std::fprintf(stderr, "evalbox-hostile: unknown mode %s\n", mode.c_str());
  return 2;
}
