// evalbox-sandbox: runs one command of a prepared session inside the sandbox and writes its run
// record. Single-threaded on purpose: the clone3/exec window must not race other threads.
//
//   evalbox-sandbox --plan PLAN.json --record RECORD.json
//
// Table of contents (each pass in the order it runs; docs/sandbox.md explains why):
//   1. read the plan                       (plan.h; a bad plan is an error record)
//   2. compile the child's steps           (mount list, etc files, argv/env, Landlock, seccomp)
//   3. create the run's cgroup             (sandbox/cgroup)
//   4. clone3 into new namespaces          (user, mount, pid, ipc, uts, net unless host)
//   5. map ids, enter the cgroup, release  (uid_map/gid_map, cgroup.procs, sync pipe)
//   6. supervise                           (output caps, wall/cpu limits, relay, signals)
//   7. tear down and write the record      (kill what is left, remove the cgroup)
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <optional>

#include "sandbox/base/fs.h"
#include "sandbox/base/json.h"
#include "sandbox/base/unique_fd.h"
#include "sandbox/cgroup/cgroup.h"
#include "sandbox/helper/child.h"
#include "sandbox/landlock/landlock.h"
#include "sandbox/launch/plan.h"
#include "sandbox/launch/run_record.h"
#include "sandbox/net/relay.h"
#include "sandbox/seccomp/seccomp.h"
#include "sandbox/sys/syscalls.h"

namespace evalbox::sandbox::helper {
namespace {
namespace fs = std::filesystem;
using clock = std::chrono::steady_clock;

// Fixed descriptor numbers for the child's mount sources; nothing else uses them.
constexpr int source_fd_base = 600;

// Owns every string and array the child reads; built before clone3, never touched after.
struct compiled {
  std::deque<std::string> strings;
  std::vector<std::string> argv_s, env_s;
  std::vector<char*> argv, envp;
  child_context ctx;
  landlock::ruleset ll;
  seccomp::filter sf;
  net::allow_plan allow;
  std::string landlock_reason;
  // Mount sources are opened (O_PATH) while the child still has the helper's filesystem ids,
  // which may traverse the run directory (mode 0700); binds then name /proc/self/fd/N.
  std::vector<step> opens;
  int next_fd = source_fd_base;

  const char* keep(std::string s) { return strings.emplace_back(std::move(s)).c_str(); }
  const char* name(std::string s) { return keep(std::move(s)); }
};

std::string passwd_text() {
  // The program runs as uid 0 of its user namespace: name it root and agent, home /home/agent.
  return "root:x:0:0:root:/home/agent:/bin/sh\n"
         "agent:x:0:0:agent:/home/agent:/bin/sh\n"
         "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
}

void add_setup(compiled& c, std::string name, step s) {
  s.name = c.name(std::move(name));
  c.ctx.setup.push_back(s);
}
void add_program(compiled& c, const char* name, op kind) {
  step s;
  s.name = name;
  s.kind = kind;
  c.ctx.program.push_back(s);
}

// mkdir of every missing parent of `inside` (a path inside the sandbox) under the new root.
void add_parents(compiled& c, const std::string& root, const fs::path& inside) {
  fs::path cur = "/";
  for (auto it = inside.begin(); it != inside.end(); ++it) {
    if (*it == "/") continue;
    if (std::next(it) == inside.end()) break;
    cur /= *it;
    step s;
    s.kind = op::make_dir;
    s.b = c.keep(root + cur.string());
    s.mode = 0755;
    add_setup(c, "mkdir " + cur.string(), s);
  }
}

void add_bind(compiled& c, const std::string& root, const std::string& source,
              const fs::path& inside, bool writable, bool is_file) {
  add_parents(c, root, inside);
  const std::string target = root + inside.string();
  step mk;
  mk.kind = is_file ? op::make_file : op::make_dir;
  mk.b = c.keep(target);
  mk.mode = is_file ? 0644 : 0755;
  add_setup(c, (is_file ? "create " : "mkdir ") + inside.string(), mk);
  step open;
  open.kind = op::open_path;
  open.b = c.keep(source);
  open.mode = c.next_fd++;
  open.name = c.name("open " + source);
  c.opens.push_back(open);
  step check;
  check.kind = op::check_target;
  check.b = mk.b;
  add_setup(c, "check " + inside.string(), check);
  step b;
  b.kind = op::mount;
  b.a = c.keep(fmt::format("/proc/self/fd/{}", open.mode));
  b.b = mk.b;
  b.flags = MS_BIND | MS_REC;
  add_setup(c, "bind " + inside.string(), b);
  // mount_setattr adds flags recursively and keeps the locked ones of host mounts.
  step attr;
  attr.kind = op::set_attr;
  attr.b = mk.b;
  attr.mode = 1;
  attr.flags = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (writable ? 0 : MOUNT_ATTR_RDONLY);
  add_setup(c, (writable ? "harden " : "read-only ") + inside.string(), attr);
}

void add_tmpfs(compiled& c, const std::string& root, const std::string& inside, std::string options,
               unsigned long flags) {
  step mk;
  mk.kind = op::make_dir;
  mk.b = c.keep(root + inside);
  mk.mode = 0755;
  add_setup(c, "mkdir " + inside, mk);
  step m;
  m.kind = op::mount;
  m.a = "tmpfs";
  m.b = mk.b;
  m.c = "tmpfs";
  m.flags = flags;
  m.data = c.keep(std::move(options));
  add_setup(c, "tmpfs " + inside, m);
}

void add_file(compiled& c, const std::string& root, const std::string& inside,
              std::string content) {
  step s;
  s.kind = op::write_file;
  s.b = c.keep(root + inside);
  s.data = c.keep(std::move(content));
  s.len = std::strlen(s.data);
  s.mode = 0644;
  add_setup(c, "write " + inside, s);
}

void add_symlink(compiled& c, const std::string& root, const std::string& target,
                 const std::string& inside) {
  step s;
  s.kind = op::make_symlink;
  s.a = c.keep(target);
  s.b = c.keep(root + inside);
  add_setup(c, "symlink " + inside, s);
}

// A host path the allow-list mounts at the same place: a symlink is recreated (Debian's /bin
// -> usr/bin), a directory or file is bound read-only, a missing one is skipped.
void add_system_path(compiled& c, const std::string& root, const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;
  if (S_ISLNK(st.st_mode)) {
    std::error_code ec;
    auto target = fs::read_symlink(path, ec);
    if (!ec) add_symlink(c, root, target.string(), path);
    return;
  }
  add_bind(c, root, path, path, false, !S_ISDIR(st.st_mode));
}

result<compiled*> compile(const launch_plan& plan, compiled& c) {
  // Targets are relative to the new root, which is the working directory while it is built.
  const std::string root = ".";
  const bool own_net = plan.network.mode != network_mode::host;
  if (plan.network.mode == network_mode::host && !plan.network.unsafe_host_network) {
    return make_error(error_kind::invalid_argument,
                      "network host requires network.unsafe_host_network");
  }
  step s;
  s.kind = op::wait_parent;
  add_setup(c, "wait for the helper", s);
  s = {};
  s.kind = op::death_signal;
  add_setup(c, "parent death signal", s);
  // After the helper moved us into the run's cgroup: that cgroup becomes our root, so the
  // host's hierarchy is not visible through /proc/self/cgroup.
  s = {};
  s.kind = op::unshare;
  s.flags = CLONE_NEWCGROUP;
  add_setup(c, "unshare cgroup", s);
  // Nothing we mount propagates back to the host (and host mounts still propagate in).
  s = {};
  s.kind = op::mount;
  s.b = "/";
  s.flags = MS_REC | MS_SLAVE;
  add_setup(c, "make / slave", s);
  s = {};
  s.kind = op::mount;
  s.a = "tmpfs";
  s.b = c.keep(plan.root_dir);
  s.c = "tmpfs";
  s.flags = MS_NOSUID | MS_NODEV;
  s.data = "mode=0755,size=4m,uid=0,gid=0";
  add_setup(c, "tmpfs root", s);
  const size_t head_end = c.ctx.setup.size();
  {
    step open;
    open.kind = op::open_path;
    open.b = c.keep(plan.root_dir);
    open.mode = c.next_fd++;
    open.name = "open the new root";
    c.opens.push_back(open);
  }
  for (const char* p : {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}) {
    add_system_path(c, root, p);
  }
  s = {};
  s.kind = op::make_dir;
  s.b = c.keep(root + "/etc");
  s.mode = 0755;
  add_setup(c, "mkdir /etc", s);
  add_file(c, root, "/etc/passwd", passwd_text());
  add_file(c, root, "/etc/group", "root:x:0:\nagent:x:0:\nnogroup:x:65534:\n");
  add_file(c, root, "/etc/hostname", plan.hostname + "\n");
  add_file(
      c, root, "/etc/hosts",
      fmt::format("127.0.0.1 localhost {0}\n::1 localhost ip6-localhost {0}\n", plan.hostname));
  add_file(c, root, "/etc/nsswitch.conf",
           "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n");
  std::string resolv = "# evalbox: no name service inside (network none or allow)\n";
  if (plan.network.mode == network_mode::host) resolv = read_file("/etc/resolv.conf").value_or("");
  add_file(c, root, "/etc/resolv.conf", resolv);
  for (const char* p : {"/etc/ssl", "/etc/ca-certificates", "/etc/alternatives", "/etc/ld.so.cache",
                        "/etc/localtime"}) {
    add_system_path(c, root, p);
  }
  add_bind(c, root, plan.workspace_dir, "/workspace", true, false);
  add_bind(c, root, plan.home_dir, "/home/agent", true, false);
  for (const auto& m : plan.mounts) {
    add_bind(c, root, m.source.string(), m.target, m.writable, m.is_file);
  }
  add_tmpfs(c, root, "/tmp", fmt::format("mode=1777,size={},uid=0,gid=0", plan.tmp_bytes),
            MS_NOSUID | MS_NODEV);
  add_tmpfs(c, root, "/dev", "mode=0755,size=64k,uid=0,gid=0", MS_NOSUID | MS_NOEXEC);
  for (const char* d : {"null", "zero", "full", "random", "urandom", "tty"}) {
    const std::string host = fmt::format("/dev/{}", d);
    if (::access(host.c_str(), F_OK) != 0) continue;
    // Device binds keep dev: /dev is the only place device nodes are usable.
    add_parents(c, root, host);
    step mk;
    mk.kind = op::make_file;
    mk.b = c.keep(root + host);
    mk.mode = 0666;
    add_setup(c, "create " + host, mk);
    step b;
    b.kind = op::mount;
    b.a = c.keep(host);
    b.b = mk.b;
    b.flags = MS_BIND;
    add_setup(c, "bind " + host, b);
  }
  s = {};
  s.kind = op::make_dir;
  s.b = c.keep(root + "/dev/pts");
  s.mode = 0755;
  add_setup(c, "mkdir /dev/pts", s);
  s = {};
  s.kind = op::mount;
  s.a = "devpts";
  s.b = c.keep(root + "/dev/pts");
  s.c = "devpts";
  s.flags = MS_NOSUID | MS_NOEXEC;
  s.data = "newinstance,ptmxmode=0666,mode=620";
  add_setup(c, "devpts /dev/pts", s);
  add_symlink(c, root, "pts/ptmx", "/dev/ptmx");
  add_symlink(c, root, "/proc/self/fd", "/dev/fd");
  add_symlink(c, root, "/proc/self/fd/0", "/dev/stdin");
  add_symlink(c, root, "/proc/self/fd/1", "/dev/stdout");
  add_symlink(c, root, "/proc/self/fd/2", "/dev/stderr");
  add_tmpfs(c, root, "/dev/shm", fmt::format("mode=1777,size={},uid=0,gid=0", plan.tmp_bytes),
            MS_NOSUID | MS_NODEV);
  s = {};
  s.kind = op::make_dir;
  s.b = c.keep(root + "/proc");
  s.mode = 0555;
  add_setup(c, "mkdir /proc", s);
  s = {};
  s.kind = op::mount;
  s.a = "proc";
  s.b = c.keep(root + "/proc");
  s.c = "proc";
  s.flags = MS_NOSUID | MS_NODEV | MS_NOEXEC;
  add_setup(c, "proc /proc", s);
  // An empty mount point for the program's own nested sandboxes.
  s = {};
  s.kind = op::make_dir;
  s.b = c.keep(root + "/mnt");
  s.mode = 0755;
  add_setup(c, "mkdir /mnt", s);
  // Splice: head, the source opens, then become uid 0 of the namespace (files created on the
  // new tmpfs need a mapped owner) and enter the new root, then the body built above.
  {
    std::vector<step> body(c.ctx.setup.begin() + static_cast<long>(head_end), c.ctx.setup.end());
    c.ctx.setup.resize(head_end);
    for (const auto& o : c.opens) c.ctx.setup.push_back(o);
    s = {};
    s.kind = op::set_ids;
    add_setup(c, "set ids", s);
    s = {};
    s.kind = op::change_dir;
    s.b = c.keep(fmt::format("/proc/self/fd/{}", source_fd_base));
    add_setup(c, "chdir new root", s);
    for (const auto& b : body) c.ctx.setup.push_back(b);
  }
  s = {};
  s.kind = op::close_range;
  s.mode = source_fd_base;
  s.len = static_cast<uint64_t>(c.next_fd);
  add_setup(c, "close source fds", s);
  s = {};
  s.kind = op::pivot_root;
  add_setup(c, "pivot_root", s);
  s = {};
  s.kind = op::set_attr;
  s.b = "/";
  s.flags = MOUNT_ATTR_RDONLY;
  add_setup(c, "read-only /", s);
  s = {};
  s.kind = op::set_hostname;
  s.a = c.keep(plan.hostname);
  add_setup(c, "sethostname", s);
  if (own_net) {
    s = {};
    s.kind = op::loopback_up;
    add_setup(c, "loopback up", s);
  }
  if (plan.network.mode == network_mode::allow) {
    c.allow = EB_TRY(net::plan_allow(plan.network.allow));
    for (size_t i = 0; i < c.allow.listeners.size(); ++i) {
      const auto& l = c.allow.listeners[i];
      s = {};
      s.kind = op::listen_pass;
      s.a = c.keep(l.ip);
      s.flags = l.port;
      s.mode = l.ipv6 ? 6 : 4;
      s.len = i;
      add_setup(c, fmt::format("listen {}:{}", l.ip, l.port), s);
    }
  }
  auto add_rlimit = [&](const char* name, int res, uint64_t soft, uint64_t hard) {
    step r;
    r.kind = op::rlimit;
    r.mode = res;
    r.len = soft;
    r.len2 = hard;
    add_setup(c, name, r);
  };
  add_rlimit("rlimit core", RLIMIT_CORE, 0, 0);
  {
    rlimit cur{};
    ::getrlimit(RLIMIT_NOFILE, &cur);
    uint64_t hard = std::min<uint64_t>(cur.rlim_max, 65536);
    add_rlimit("rlimit nofile", RLIMIT_NOFILE, std::min<uint64_t>(hard, 4096), hard);
  }
  if (plan.limits.disk_bytes) {
    add_rlimit("rlimit fsize", RLIMIT_FSIZE, plan.limits.disk_bytes, plan.limits.disk_bytes);
  }
  if (plan.limits.cpu_ms) {
    // A second fence behind the cgroup's CPU accounting: per process, SIGXCPU then SIGKILL.
    uint64_t sec = (plan.limits.cpu_ms + 999) / 1000;
    add_rlimit("rlimit cpu", RLIMIT_CPU, sec + 1, sec + 2);
  }
  // A new session detaches the program from any terminal of the caller. With the caller's
  // terminal passed through (sandbox shell) it stays in the caller's foreground group, so that
  // Ctrl-C reaches it; TIOCSTI/TIOCLINUX are denied by seccomp either way.
  if (!plan.inherit_stdio) add_program(c, "new session", op::new_session);
  add_program(c, "stdio", op::stdio);
  {
    step ch;
    ch.kind = op::change_dir;
    ch.b = c.keep(plan.cwd);
    ch.name = c.name("chdir " + plan.cwd);
    c.ctx.program.push_back(ch);
  }
  add_program(c, "oom score", op::oom_score);
  add_program(c, "close fds", op::close_fds);
  add_program(c, "no_new_privs", op::no_new_privs);
  add_program(c, "drop capabilities", op::drop_caps);
  add_program(c, "landlock", op::landlock);
  add_program(c, "seccomp", op::seccomp);
  add_program(c, "execve", op::exec);

  // Landlock: negotiated now, applied in the program's process.
  int abi = landlock::kernel_abi();
  // Candidates without Landlock are those whose own sandbox must mount: they also keep the one
  // capability a nested user namespace needs to map its root to ours.
  c.ctx.keep_setfcap = !plan.landlock;
  if (!plan.landlock) {
    c.landlock_reason = "disabled for this candidate (its own sandbox needs mount)";
  } else if (abi == 0) {
    c.landlock_reason = "the kernel does not offer Landlock";
  } else {
    std::vector<landlock::path_rule> rules = {
        {"/", landlock::access::read_only},
        {"/workspace", landlock::access::read_write},
        {"/home/agent", landlock::access::read_write},
        {"/tmp", landlock::access::read_write},
        {"/dev/shm", landlock::access::read_write},
        {"/dev/pts", landlock::access::device},
        {"/dev/ptmx", landlock::access::device},
    };
    for (const char* d : {"/dev/null", "/dev/zero", "/dev/full", "/dev/tty"}) {
      rules.push_back({d, landlock::access::device});
    }
    for (const auto& m : plan.mounts) {
      if (m.writable) rules.push_back({m.target.string(), landlock::access::read_write});
    }
    c.ll = landlock::make_ruleset(abi, rules);
    c.ctx.landlock = &c.ll;
  }
  c.sf = EB_TRY(seccomp::compile());
  c.ctx.seccomp = &c.sf;

  c.argv_s = plan.argv;
  for (auto& a : c.argv_s) c.argv.push_back(a.data());
  c.argv.push_back(nullptr);
  std::map<std::string, std::string> env = plan.env;
  if (c.allow.proxy_port) {
    const std::string url = fmt::format("http://127.0.0.1:{}", c.allow.proxy_port);
    for (const char* k :
         {"HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy"}) {
      env[k] = url;
    }
  }
  for (const auto& [k, v] : env) c.env_s.push_back(k + "=" + v);
  for (auto& e : c.env_s) c.envp.push_back(e.data());
  c.envp.push_back(nullptr);
  c.ctx.argv = c.argv.data();
  c.ctx.envp = c.envp.data();
  if (auto last = read_file("/proc/sys/kernel/cap_last_cap")) {
    c.ctx.cap_last = std::atoi(last->c_str());
  }
  return &c;
}

struct pipe_pair {
  unique_fd read, write;
};
result<pipe_pair> make_pipe(int read_flags = O_CLOEXEC, int write_flags = O_CLOEXEC) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return sys_error(errno, "pipe2");
  pipe_pair pp{unique_fd(p[0]), unique_fd(p[1])};
  if (!(read_flags & O_CLOEXEC)) ::fcntl(p[0], F_SETFD, 0);
  if (!(write_flags & O_CLOEXEC)) ::fcntl(p[1], F_SETFD, 0);
  if (read_flags & O_NONBLOCK) ::fcntl(p[0], F_SETFL, O_NONBLOCK);
  return pp;
}

status write_proc(pid_t pid, const char* file, std::string_view text) {
  const std::string path = fmt::format("/proc/{}/{}", pid, file);
  unique_fd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) return sys_error(errno, "open({})", path);
  if (::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    return sys_error(errno, "write({}, {})", path, text);
  }
  return {};
}

// One captured stream: a pipe from the program into a host file, with the shared byte cap.
struct stream {
  unique_fd pipe;
  unique_fd file;
  bool open = false;
};

class supervisor {
 public:
  supervisor(const launch_plan& plan, run_record& rec) : plan_(plan), rec_(rec) {}
  status run();

 private:
  void kill_run(outcome_kind why);
  void on_output(stream& s);
  status start(compiled& c);

  const launch_plan& plan_;
  run_record& rec_;
  std::unique_ptr<cgroup::run_cgroup> cg_;
  std::optional<outcome_kind> forced_;  // why evalbox killed the run, if it did
  pid_t pid_ = -1;
  unique_fd pidfd_;
  stream out_, err_;
  uint64_t kept_ = 0;
  bool truncated_ = false;
};

void supervisor::kill_run(outcome_kind why) {
  if (!forced_) forced_ = why;
  // SIGKILL to pid 1 of the run: the kernel kills the whole pid namespace with it.
  if (pidfd_) sys::pidfd_send_signal(pidfd_.get(), SIGKILL, nullptr, 0);
}

void supervisor::on_output(stream& s) {
  char buf[65536];
  ssize_t n = ::read(s.pipe.get(), buf, sizeof buf);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
    s.open = false;
    return;
  }
  if (n < 0) return;
  rec_.output_bytes += static_cast<uint64_t>(n);
  const uint64_t cap = plan_.limits.output_bytes;
  uint64_t take = static_cast<uint64_t>(n);
  if (cap && kept_ + take > cap) take = cap - kept_;
  if (!truncated_ && take > 0) (void)!::write(s.file.get(), buf, take);
  kept_ += take;
  if (cap && !truncated_ && take < static_cast<uint64_t>(n)) {
    truncated_ = true;
    rec_.output_truncated = true;
    const std::string marker =
        fmt::format("\n[evalbox: output truncated: the run passed its limit of {} bytes]\n", cap);
    (void)!::write(s.file.get(), marker.data(), marker.size());
    kill_run(outcome_kind::output_limit);
  }
}

status supervisor::run() {
  compiled c;
  EB_TRY_CTX(compile(plan_, c), "compile the launch plan");
  rec_.binding_digest = plan_.binding_digest;
  json mech = json::object();
  mech["user_ns"] = {{"host_uid", plan_.host_uid}, {"host_gid", plan_.host_gid}};
  mech["landlock_abi"] = c.ll.abi;
  if (c.ll.abi == 0) mech["landlock_reason"] = c.landlock_reason;
  mech["seccomp_digest"] = c.sf.digest;
  mech["capabilities"] =
      c.ctx.keep_setfcap ? "CAP_SETFCAP (namespace-local, nested sandboxes)" : "none";
  mech["no_new_privs"] = true;
  mech["network"] = plan_.network.mode == network_mode::none    ? "none"
                    : plan_.network.mode == network_mode::allow ? "allow"
                                                                : "host (unsafe)";
  mech["cgroup"] = "none";
  rec_.mechanisms = mech;
  auto st = start(c);
  const std::string cg = cg_ ? fmt::format("cgroup {}", cg_->version()) : "";
  rec_.mechanisms["cgroup"] = cg_ ? std::string(cg_->version()) : "none";
  // Each limit with the mechanisms that enforced it (0 = no limit).
  const auto& l = plan_.limits;
  auto by = [](std::initializer_list<std::string> parts) {
    json a = json::array();
    for (const auto& p : parts) {
      if (!p.empty()) a.push_back(p);
    }
    return a;
  };
  rec_.mechanisms["limits"] = {
      {"memory_bytes", {{"value", l.memory_bytes}, {"by", by({cg})}}},
      {"pids", {{"value", l.pids}, {"by", by({cg})}}},
      {"cpu_ms",
       {{"value", l.cpu_ms}, {"by", by({cg.empty() ? "" : cg + " accounting", "RLIMIT_CPU"})}}},
      {"wall_ms", {{"value", l.wall_ms}, {"by", by({"helper"})}}},
      {"output_bytes",
       {{"value", l.output_bytes}, {"by", by({plan_.inherit_stdio ? "" : "helper"})}}},
      {"disk_bytes", {{"value", l.disk_bytes}, {"by", by({"RLIMIT_FSIZE", "tmpfs size"})}}},
  };
  if (cg_) (void)cg_->destroy();
  return st;
}

status supervisor::start(compiled& c) {
  // Standard streams.
  unique_fd stdin_fd;
  pipe_pair outp, errp;
  const bool merged = !plan_.inherit_stdio && plan_.stdout_path == plan_.stderr_path;
  if (!plan_.inherit_stdio) {
    const char* in = plan_.stdin_path.empty() ? "/dev/null" : plan_.stdin_path.c_str();
    stdin_fd.reset(::open(in, O_RDONLY | O_CLOEXEC));
    if (!stdin_fd) return sys_error(errno, "open stdin {}", in);
    auto open_out = [](const std::string& p) {
      return unique_fd(::open(p.empty() ? "/dev/null" : p.c_str(),
                              O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    };
    out_.file = open_out(plan_.stdout_path);
    if (!out_.file) return sys_error(errno, "open stdout {}", plan_.stdout_path);
    outp = EB_TRY(make_pipe(O_CLOEXEC | O_NONBLOCK));
    out_.pipe = std::move(outp.read);
    out_.open = true;
    if (!merged) {
      err_.file = open_out(plan_.stderr_path);
      if (!err_.file) return sys_error(errno, "open stderr {}", plan_.stderr_path);
      errp = EB_TRY(make_pipe(O_CLOEXEC | O_NONBLOCK));
      err_.pipe = std::move(errp.read);
      err_.open = true;
    }
    c.ctx.stdin_fd = stdin_fd.get();
    c.ctx.stdout_fd = outp.write.get();
    c.ctx.stderr_fd = merged ? outp.write.get() : errp.write.get();
  }
  auto sync = EB_TRY(make_pipe());
  auto errors = EB_TRY(make_pipe());
  auto status_p = EB_TRY(make_pipe());
  unique_fd net_parent, net_child;
  if (!c.allow.listeners.empty()) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
      return sys_error(errno, "socketpair");
    }
    net_parent.reset(sv[0]);
    net_child.reset(sv[1]);
  }
  c.ctx.sync_fd = sync.read.get();
  c.ctx.error_fd = errors.write.get();
  c.ctx.status_fd = status_p.write.get();
  c.ctx.net_fd = net_child.get();
  const bool root = ::geteuid() == 0;
  c.ctx.map_groups = root;

  // The run's cgroup, before the child exists, so that no task of the run is ever outside.
  const std::string leaf = fmt::format("{}-{}", plan_.label, plan_.seq);
  if (auto cg = cgroup::create_for_host(plan_.run_id, leaf,
                                        {plan_.limits.memory_bytes, plan_.limits.pids})) {
    cg_ = std::move(*cg);
  } else if (root) {
    return std::unexpected(std::move(cg.error()).with_context("create the run's cgroup"));
  }

  // Termination requests arrive through a signalfd; the child unblocks them for itself.
  sigset_t mask;
  sigemptyset(&mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGCHLD}) sigaddset(&mask, sig);
  ::sigprocmask(SIG_BLOCK, &mask, nullptr);
  unique_fd sigfd(::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!sigfd) return sys_error(errno, "signalfd");

  uint64_t flags =
      CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_PIDFD;
  if (plan_.network.mode != network_mode::host) flags |= CLONE_NEWNET;
  int pidfd_raw = -1;
  clone_args args{};
  args.flags = flags;
  args.pidfd = reinterpret_cast<uint64_t>(&pidfd_raw);
  args.exit_signal = SIGCHLD;
  if (cg_ && cg_->clone_into_fd() >= 0) {
    args.flags |= CLONE_INTO_CGROUP;
    args.cgroup = static_cast<uint64_t>(cg_->clone_into_fd());
  }
  const auto started = clock::now();
  pid_t pid = sys::clone3(&args);
  if (pid < 0)
    return sys_error(errno, "clone3(user, mount, pid, ipc, uts{})",
                     (flags & CLONE_NEWNET) ? ", net" : "");
  if (pid == 0) child_main(c.ctx);
  pid_ = pid;
  pidfd_.reset(pidfd_raw);

  // Release only once ids and cgroup are in place; on any failure here the child is killed.
  auto release = [&]() -> status {
    const uid_t uid = root ? plan_.host_uid : ::getuid();
    const gid_t gid = root ? plan_.host_gid : ::getgid();
    if (!root) EB_TRY(write_proc(pid, "setgroups", "deny"));
    EB_TRY(write_proc(pid, "uid_map", fmt::format("0 {} 1\n", uid)));
    EB_TRY(write_proc(pid, "gid_map", fmt::format("0 {} 1\n", gid)));
    if (cg_ && cg_->clone_into_fd() < 0) EB_TRY(cg_->add_pid(pid));
    // Pid 1 must outlive the program under memory pressure so the report gets out; the
    // program's process resets this to 0. Needs CAP_SYS_RESOURCE: best effort.
    (void)write_proc(pid, "oom_score_adj", "-1000");
    if (::write(sync.write.get(), "x", 1) != 1) return sys_error(errno, "release the child");
    return {};
  };
  sync.read.reset();
  errors.write.reset();
  status_p.write.reset();
  net_child.reset();
  outp.write.reset();
  errp.write.reset();
  stdin_fd.reset();
  if (auto r = release(); !r) {
    kill_run(outcome_kind::exited);
    ::waitpid(pid, nullptr, 0);
    return std::unexpected(std::move(r.error()).with_context("set up the child"));
  }
  sync.write.reset();

  std::optional<net::relay> relay;
  if (!c.allow.listeners.empty()) relay.emplace(c.allow);
  ::fcntl(status_p.read.get(), F_SETFL, O_NONBLOCK);
  ::fcntl(errors.read.get(), F_SETFL, O_NONBLOCK);

  std::optional<int> wait_status;
  std::optional<step_failure> failure;
  bool exited = false;
  rusage ru{};
  int exit_raw = 0;
  std::optional<clock::time_point> drain_deadline;
  const auto wall_deadline = plan_.limits.wall_ms
                                 ? started + std::chrono::milliseconds(plan_.limits.wall_ms)
                                 : clock::time_point::max();
  for (;;) {
    if (exited &&
        ((!out_.open && !err_.open) || (drain_deadline && clock::now() > *drain_deadline))) {
      break;
    }
    std::vector<pollfd> fds = {
        {pidfd_.get(), static_cast<short>(exited ? 0 : POLLIN), 0},
        {sigfd.get(), POLLIN, 0},
        {out_.open ? out_.pipe.get() : -1, POLLIN, 0},
        {err_.open ? err_.pipe.get() : -1, POLLIN, 0},
        {status_p.read ? status_p.read.get() : -1, POLLIN, 0},
        {errors.read ? errors.read.get() : -1, POLLIN, 0},
        {net_parent ? net_parent.get() : -1, POLLIN, 0},
    };
    if (relay) relay->fill(fds);
    int n = ::poll(fds.data(), fds.size(), 25);
    if (n < 0 && errno != EINTR) return sys_error(errno, "poll");
    if (fds[1].revents & POLLIN) {
      signalfd_siginfo si{};
      while (::read(sigfd.get(), &si, sizeof si) == sizeof si) {
        if (si.ssi_signo == SIGCHLD) continue;
        // With a terminal passed through, Ctrl-C is the program's to handle.
        if (si.ssi_signo == SIGINT && plan_.inherit_stdio) continue;
        kill_run(outcome_kind::cancelled);
      }
    }
    if (fds[2].revents) on_output(out_);
    if (fds[3].revents) on_output(err_);
    if (fds[4].revents) {
      int ws = 0;
      ssize_t r = ::read(status_p.read.get(), &ws, sizeof ws);
      if (r == sizeof ws) wait_status = ws;
      if (r == 0 || r == sizeof ws) status_p.read.reset();
    }
    if (fds[5].revents) {
      step_failure f{};
      ssize_t r = ::read(errors.read.get(), &f, sizeof f);
      if (r == sizeof f && !failure) failure = f;
      if (r == 0) errors.read.reset();
    }
    if (fds[6].revents & POLLIN) {
      char tag = 0;
      iovec iov{&tag, 1};
      alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int))] = {};
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = cbuf;
      msg.msg_controllen = sizeof cbuf;
      if (::recvmsg(net_parent.get(), &msg, MSG_CMSG_CLOEXEC) == 1) {
        cmsghdr* cm = CMSG_FIRSTHDR(&msg);
        if (cm && cm->cmsg_type == SCM_RIGHTS) {
          int fd = -1;
          std::memcpy(&fd, CMSG_DATA(cm), sizeof fd);
          relay->add_listener(static_cast<unsigned char>(tag), unique_fd(fd));
        }
      } else {
        net_parent.reset();
      }
    }
    if (relay) relay->handle(fds);
    if (!exited && (fds[0].revents & POLLIN)) {
      // Pid 1 is gone: the run is over (every other process of it dies with it).
      if (::wait4(pid_, &exit_raw, 0, &ru) == pid_) {
        exited = true;
        rec_.wall_ms = static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - started).count());
        drain_deadline = clock::now() + std::chrono::seconds(2);
        // Collect a last report still in the pipes.
        int ws = 0;
        if (status_p.read && ::read(status_p.read.get(), &ws, sizeof ws) == sizeof ws) {
          wait_status = ws;
        }
        step_failure f{};
        if (errors.read && ::read(errors.read.get(), &f, sizeof f) == sizeof f && !failure) {
          failure = f;
        }
      }
    }
    if (!exited) {
      if (clock::now() >= wall_deadline) kill_run(outcome_kind::timed_out);
      if (cg_ && plan_.limits.cpu_ms) {
        if (auto u = cg_->read_usage(); u && u->cpu_ns / 1000000 >= plan_.limits.cpu_ms) {
          kill_run(outcome_kind::cpu_limit);
        }
      }
    }
  }
  if (relay) {
    for (const auto& a : relay->attempts()) {
      rec_.connections.push_back({a.target, a.allowed, a.via, a.detail});
    }
  }
  uint64_t cpu_ms = static_cast<uint64_t>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
                    static_cast<uint64_t>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
  cgroup::usage u;
  if (cg_) {
    if (auto r = cg_->read_usage()) u = *r;
  }
  rec_.cpu_ms = std::max<uint64_t>(cpu_ms, u.cpu_ns / 1000000);
  rec_.peak_memory_bytes = u.peak_memory_bytes;
  rec_.pids_limit_hit = u.pids_limit_hit;
  if (failure) {
    const auto& steps = failure->phase == 0 ? c.ctx.setup : c.ctx.program;
    const char* name = static_cast<size_t>(failure->index) < steps.size()
                           ? steps[static_cast<size_t>(failure->index)].name
                           : "fork program";
    rec_.error_step = name;
    rec_.error =
        fmt::format("step {}: {}: {}", name, errno_name(failure->err), std::strerror(failure->err));
    return {};
  }
  if (forced_) {
    rec_.outcome = *forced_;
    return {};
  }
  if (!wait_status) {
    // Pid 1 died without a report: only the OOM killer does that (pid 1 is protected, but
    // not beyond the memory limit of its own cgroup), or a kill from outside.
    if (u.oom_kills > 0) {
      rec_.outcome = outcome_kind::oom_killed;
      return {};
    }
    rec_.error_step = "init";
    rec_.error = fmt::format("the run's init died without a report (wait status {:#x})", exit_raw);
    return {};
  }
  const int ws = *wait_status;
  if (WIFEXITED(ws)) {
    rec_.outcome = outcome_kind::exited;
    rec_.exit_code = WEXITSTATUS(ws);
  } else if (WIFSIGNALED(ws)) {
    const int sig = WTERMSIG(ws);
    if (sig == SIGKILL && u.oom_kills > 0) {
      rec_.outcome = outcome_kind::oom_killed;
    } else if (sig == SIGXCPU ||
               (sig == SIGKILL && plan_.limits.cpu_ms && rec_.cpu_ms >= plan_.limits.cpu_ms)) {
      rec_.outcome = outcome_kind::cpu_limit;  // RLIMIT_CPU, the second fence
    } else {
      rec_.outcome = outcome_kind::signaled;
      rec_.signal = sig;
    }
  }
  return {};
}

int usage_error(const char* msg) {
  std::fprintf(stderr,
               "evalbox-sandbox: %s\n"
               "usage: evalbox-sandbox --plan PLAN.json --record RECORD.json\n"
               "Runs one command of a prepared evalbox session in the sandbox; normally started\n"
               "by evalbox itself (see `evalbox sandbox exec --help`).\n",
               msg);
  return 64;
}

}  // namespace

int main(int argc, char** argv) {
  // If whoever started us dies, so do we (and pid 1 of the run follows us: its own
  // death signal), so that no run outlives its launcher.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  std::string plan_path, record_path;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--plan" && i + 1 < argc) {
      plan_path = argv[++i];
    } else if (a == "--record" && i + 1 < argc) {
      record_path = argv[++i];
    } else if (a == "--help" || a == "-h") {
      usage_error("help");
      return 0;
    } else {
      return usage_error("unknown argument");
    }
  }
  if (plan_path.empty() || record_path.empty())
    return usage_error("--plan and --record are required");
  run_record rec;
  auto write_record = [&]() {
    if (auto w = write_file_atomic(record_path, pretty_json(rec.to_json()), 0644); !w) {
      std::fprintf(stderr, "evalbox-sandbox: write record: %s\n", w.error().message.c_str());
      return 70;
    }
    return 0;
  };
  auto j = read_json_file(plan_path);
  if (!j) {
    rec.error_step = "read plan";
    rec.error = j.error().message;
    return write_record();
  }
  auto plan = launch_plan::from_json(*j);
  if (!plan) {
    rec.error_step = "read plan";
    rec.error = plan.error().message;
    return write_record();
  }
  supervisor sup(*plan, rec);
  if (auto s = sup.run(); !s) {
    if (rec.error_step.empty()) rec.error_step = "helper";
    rec.error = s.error().message;
  }
  return write_record();
}

}  // namespace evalbox::sandbox::helper

int main(int argc, char** argv) { return evalbox::sandbox::helper::main(argc, argv); }
