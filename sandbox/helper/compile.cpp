// The helper's compilation pass (compile.h): the allow-list root as an ordered list of named
// steps, each with the reason for its place (see docs/sandbox.md, "Order of steps").
#include "sandbox/helper/compile.h"

#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "sandbox/base/fs.h"
#include "sandbox/spec/system_paths.h"
#include "sandbox/sys/syscalls.h"

namespace evalbox::sandbox::helper {
namespace {
namespace fs = std::filesystem;

std::string passwd_text() {
  // The program runs as uid 0 of its user namespace: name it root and agent, home /home/agent.
  return "root:x:0:0:root:/home/agent:/bin/sh\n"
         "agent:x:0:0:agent:/home/agent:/bin/sh\n"
         "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
}

void add_setup(compiled& c, std::string name, step s) {
  s.name = c.keep(std::move(name));
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
  open.name = c.keep("open " + source);
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
    if (!ec) {
      add_symlink(c, root, target.string(), path);
      c.links[path] = (fs::path(path).parent_path() / target).lexically_normal();
    }
    return;
  }
  add_bind(c, root, path, path, false, !S_ISDIR(st.st_mode));
}

}  // namespace

status compile(const launch_plan& plan, compiled& c) {
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
  for (std::string_view p : system_paths) add_system_path(c, root, std::string(p));
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
  // The private /tmp comes before the binds, so that an agent installed below the host's /tmp
  // (read-only at the same path) is not hidden by it.
  add_tmpfs(c, root, "/tmp", fmt::format("mode=1777,size={},uid=0,gid=0", plan.tmp_bytes),
            MS_NOSUID | MS_NODEV);
  add_bind(c, root, plan.workspace_dir, "/workspace", true, false);
  add_bind(c, root, plan.home_dir, "/home/agent", true, false);
  for (const auto& m : plan.mounts) {
    // A target below one of the symlinks recreated above (/lib/x on merged-/usr Debian) is
    // mounted at the link's destination: mount targets never go through a symlink.
    fs::path target = m.target;
    for (const auto& [link, dest] : c.links) {
      if (target != link && is_within(target, link)) {
        target = dest / target.lexically_relative(link);
        break;
      }
    }
    add_bind(c, root, m.source.string(), target, m.writable, m.is_file);
  }
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
    // After set ids: a change of credentials clears the parent-death signal.
    s = {};
    s.kind = op::death_signal;
    add_setup(c, "parent death signal", s);
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
    ch.name = c.keep("chdir " + plan.cwd);
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
  c.ctx.seccomp = &seccomp::builtin();

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
    // Relayed loopback addresses are reached directly, not through the proxy.
    std::string direct;
    for (const auto& l : c.allow.listeners) {
      if (!l.proxy) direct += (direct.empty() ? "" : ",") + l.ip;
    }
    if (!direct.empty()) {
      env["NO_PROXY"] = direct;
      env["no_proxy"] = direct;
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
  return {};
}

}  // namespace evalbox::sandbox::helper
