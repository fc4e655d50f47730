// The helper's compilation pass (compile.h): the allow-list root as an ordered list of named
// steps, each with the reason for its place (see docs/sandbox.md, "Order of steps").
//
// compile() is the table of contents. The new root is described first, as data (which mounts,
// from which sources); pid 1's steps are then laid out in the order they run, taking the source
// opens and the mounts from that description, and the program's process follows.
#include "sandbox/helper/compile.h"

#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>

#include "base/fs.h"
#include "sandbox/spec/system_paths.h"
#include "sandbox/sys/syscalls.h"

namespace evalbox::sandbox::helper {
namespace {
namespace fs = std::filesystem;

// Read-only from the host's /etc (the rest of /etc is generated).
constexpr const char* etc_binds[] = {"/etc/ssl", "/etc/ca-certificates", "/etc/alternatives",
                                     "/etc/ld.so.cache", "/etc/localtime"};
// Device nodes bound into the private /dev (when the host has them).
constexpr const char* devices[] = {"null", "zero", "full", "random", "urandom", "tty"};

// Targets are relative to the new root, which is the working directory while it is built.
const std::string relative_root = ".";

// Appends a step to `list`, its name kept alive by `c`.
void emit(compiled& c, std::vector<step>& list, std::string name, step s) {
  s.name = c.keep(std::move(name));
  list.push_back(s);
}
void setup(compiled& c, std::string name, step s) { emit(c, c.ctx.setup, std::move(name), s); }
step of(op kind) {
  step s;
  s.kind = kind;
  return s;
}

// The new root, described before any of pid 1's steps are laid out: the mounts it runs once it
// stands in the new root, and the sources they bind, opened (O_PATH) at fixed fds from
// source_fd_base while pid 1 still has the helper's filesystem ids (docs/sandbox.md, "Why
// sources are opened first"). The new root itself is the first source.
struct new_root {
  compiled& c;
  std::vector<step> opens;
  std::vector<step> mounts;
  int next_fd = source_fd_base;
  std::map<std::string, fs::path> links;  // recreated system symlinks -> their destination
  // An image's root: its tree is the image's (hostile input, and the program's own from a
  // previous launch of the session), so every mount target is checked to lie beneath the new
  // root without a symlink, not only those of binds.
  bool image = false;

  new_root(compiled& out, const std::string& root_dir, bool image_root)
      : c(out), image(image_root) {
    open_source(root_dir, "open the new root");
  }

  // The fd pid 1 will hold `source` at.
  int open_source(const std::string& source, std::string name) {
    step s = of(op::open_path);
    s.target = c.keep(source);
    s.fd = next_fd++;
    emit(c, opens, std::move(name), s);
    return s.fd;
  }
  void add(std::string name, step s) { emit(c, mounts, std::move(name), s); }

  // Directories the steps so far made or mounted on (paths inside the sandbox): a mkdir of one
  // again would only say EEXIST, after opening its parent (three system calls of pid 1's, for
  // each of /etc's binds and /dev's devices). A mount hides what was made below its point.
  // Held in normal form (made_key), so that "below" is a comparison of strings: the launch's
  // ~30 mounts each tested every entry, and normalizing both sides of each test took about
  // 250 µs of the helper's CPU per launch, on the way to pid 1's clone.
  std::set<std::string> made;
  static std::string made_key(const std::string& inside) {
    return is_normal_absolute(inside) ? inside : normalize(inside).string();
  }
  // `d` is `dir` or lies below it; both in normal form.
  static bool at_or_below(const std::string& d, const std::string& dir) {
    if (dir == "/") return true;
    return d.starts_with(dir) && (d.size() == dir.size() || d[dir.size()] == '/');
  }
  void mounted(const std::string& inside) {
    const std::string key = made_key(inside);
    std::erase_if(made, [&](const std::string& d) { return d != key && at_or_below(d, key); });
    made.insert(key);
  }

  // Returns the target, for the mount that goes there.
  const char* make_dir(const std::string& inside, int mode) {
    std::string key = made_key(inside);
    if (made.contains(key)) return c.keep(relative_root + inside);
    step s = of(op::make_dir);
    s.target = c.keep(relative_root + inside);
    s.mode = mode;
    add("mkdir " + inside, s);
    made.insert(std::move(key));
    return s.target;
  }

  // mkdir of every missing parent of `inside` (a path inside the sandbox).
  void parents(const fs::path& inside) {
    fs::path cur = "/";
    for (auto it = inside.begin(); it != inside.end(); ++it) {
      if (*it == "/") continue;
      if (std::next(it) == inside.end()) break;
      cur /= *it;
      make_dir(cur.string(), 0755);
    }
  }

  // A target that is not a bind's: checked like one in an image's root (see `image`).
  void check(const std::string& inside, const char* target) {
    if (!image) return;
    step s = of(op::check_target);
    s.target = target;
    add("check " + inside, s);
  }

  // `replace_link`: a symlink the image has at a file target is replaced by the mount point
  // (an image's /etc/resolv.conf often links into /run).
  void bind(const std::string& source, const fs::path& inside, bool writable, bool is_file,
            bool replace_link = false) {
    parents(inside);
    const std::string target = relative_root + inside.string();
    step mk = of(is_file ? op::make_file : op::make_dir);
    mk.target = c.keep(target);
    mk.mode = is_file ? 0644 : 0755;
    mk.replace_symlink = replace_link;
    if (is_file || !made.contains(made_key(inside.string())))
      add((is_file ? "create " : "mkdir ") + inside.string(), mk);
    const int fd = open_source(source, "open " + source);
    step check = of(op::check_target);
    check.target = mk.target;
    add("check " + inside.string(), check);
    step b = of(op::mount);
    b.source = c.keep(fmt::format("/proc/self/fd/{}", fd));
    b.target = mk.target;
    b.flags = MS_BIND | MS_REC;
    add("bind " + inside.string(), b);
    // mount_setattr adds flags recursively and keeps the locked ones of host mounts.
    step attr = of(op::set_attr);
    attr.target = mk.target;
    attr.recursive = true;
    attr.flags = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (writable ? 0 : MOUNT_ATTR_RDONLY);
    add((writable ? "harden " : "read-only ") + inside.string(), attr);
    mounted(inside.string());
  }

  // A session's writable tree (launch_plan::workspace_overlay, home_overlay): an overlay of its
  // layers under its upper, made by the sandbox's root in its user namespace (userxattr) and
  // attached at `inside`, whose mount point is checked and opened (beneath the new root) first.
  void overlay(const launch_overlay& ov, const fs::path& inside) {
    parents(inside);
    const char* target = make_dir(inside.string(), 0755);
    step chk = of(op::check_target);
    chk.target = target;
    add("check " + inside.string(), chk);
    std::vector<int> lowers;
    for (size_t i = 0; i < ov.lowers.size(); ++i)
      lowers.push_back(
          open_source(ov.lowers[i], fmt::format("open {} layer {}", inside.string(), i + 1)));
    const int upper = open_source(ov.upper, "open the upper of " + inside.string());
    const int work = open_source(ov.work, "open the work directory of " + inside.string());
    step point = of(op::open_path);
    point.target = target;
    point.fd = next_fd++;
    add("open the mount point " + inside.string(), point);
    const int context = next_fd++;
    step open = of(op::fs_open);
    open.fstype = "overlay";
    open.fd = context;
    add("overlay " + inside.string() + ": fsopen", open);
    auto config = [&](std::string name, unsigned cmd, const char* key, const char* value) {
      step cfg = of(op::fs_config);
      cfg.fd = context;
      cfg.flags = cmd;
      cfg.key = key;
      cfg.value = value;
      add("overlay " + inside.string() + ": " + name, cfg);
    };
    for (size_t i = 0; i < lowers.size(); ++i)
      config(fmt::format("layer {}", i + 1), FSCONFIG_SET_STRING, "lowerdir+",
             c.keep(fmt::format("/proc/self/fd/{}", lowers[i])));
    config("upper", FSCONFIG_SET_STRING, "upperdir",
           c.keep(fmt::format("/proc/self/fd/{}", upper)));
    config("work", FSCONFIG_SET_STRING, "workdir", c.keep(fmt::format("/proc/self/fd/{}", work)));
    config("userxattr", FSCONFIG_SET_FLAG, "userxattr", nullptr);
    config("create", FSCONFIG_CMD_CREATE, nullptr, nullptr);
    step attach = of(op::fs_attach);
    attach.fd = context;
    attach.target_fd = point.fd;
    attach.flags = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
    add("overlay " + inside.string() + ": mount", attach);
    mounted(inside.string());
  }

  void tmpfs(const std::string& inside, std::string options, unsigned long flags) {
    step m = of(op::mount);
    m.target = make_dir(inside, 0755);
    check(inside, m.target);
    m.source = "tmpfs";
    m.fstype = "tmpfs";
    m.flags = flags;
    m.data = c.keep(std::move(options));
    add("tmpfs " + inside, m);
    mounted(inside);
  }

  void file(const std::string& inside, std::string content) {
    step s = of(op::write_file);
    s.target = c.keep(relative_root + inside);
    s.data = c.keep(std::move(content));
    s.size = std::strlen(s.data);
    s.mode = 0644;
    add("write " + inside, s);
  }

  void symlink(const std::string& target, const std::string& inside) {
    step s = of(op::make_symlink);
    s.source = c.keep(target);
    s.target = c.keep(relative_root + inside);
    add("symlink " + inside, s);
    const std::string key = made_key(inside);
    std::erase_if(made, [&](const std::string& d) { return at_or_below(d, key); });
  }

  // A host path mounted at the same place: a symlink is recreated (Debian's /bin -> usr/bin),
  // a directory or file is bound read-only, a missing one is skipped.
  void system_path(const std::string& path, const host_view::path_entry& e) {
    using kind = host_view::path_entry::kind;
    if (e.type == kind::missing) return;
    if (e.type == kind::symlink) {
      symlink(e.link_target, path);
      links[path] = (fs::path(path).parent_path() / e.link_target).lexically_normal();
      return;
    }
    bind(path, path, false, e.type == kind::file);
  }

  // A target below one of the recreated symlinks (/lib/x on merged-/usr Debian) is mounted at
  // the link's destination: mount targets never go through a symlink.
  fs::path beside_links(const fs::path& target) const {
    for (const auto& [link, dest] : links)
      if (target != link && is_within(target, link)) return dest / target.lexically_relative(link);
    return target;
  }
};

std::string passwd_text() {
  // The program runs as uid 0 of its user namespace: name it root and agent, home the managed
  // home.
  return fmt::format(
      "root:x:0:0:root:{0}:/bin/sh\n"
      "agent:x:0:0:agent:{0}:/bin/sh\n"
      "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
      sandbox_home);
}

// --- The new root, part by part, in mount order. ---

// Read-only /usr, /bin, /lib... as the host has them.
void add_system_paths(new_root& r, const host_view& host) {
  for (std::string_view p : system_paths) r.system_path(std::string(p), host.at(std::string(p)));
}

std::string hosts_text(const launch_plan& plan) {
  return fmt::format("127.0.0.1 localhost {0}\n::1 localhost ip6-localhost {0}\n", plan.hostname);
}
std::string resolv_text(const launch_plan& plan, const host_view& host) {
  return plan.network.mode == network_mode::host
             ? host.resolv_conf
             : "# evalbox: no name service inside (network none or allow)\n";
}

// An image's /etc is the image's own (its users, its certificates), but the host name, the
// hosts file and the name service are the run's: generated files the helper writes beside the
// root's mount point before clone3, bound read-only over the image's.
void add_image_etc(new_root& r, const launch_plan& plan, const host_view& host) {
  const std::string dir = plan.root_dir + ".etc";
  r.c.host_dir = dir;
  const std::pair<const char*, std::string> files[] = {
      {"hostname", plan.hostname + "\n"},
      {"hosts", hosts_text(plan)},
      {"resolv.conf", resolv_text(plan, host)},
  };
  for (const auto& [name, content] : files) {
    const std::string source = dir + "/" + name;
    r.c.host_files.emplace_back(source, content);
    r.bind(source, fs::path("/etc") / name, false, true, /*replace_link=*/true);
  }
}

// Generated identity and name-service files, and read-only binds of what programs need from
// the host's /etc (certificates, the loader cache, the time zone).
void add_etc(new_root& r, const launch_plan& plan, const host_view& host) {
  if (plan.image) return add_image_etc(r, plan, host);
  r.make_dir("/etc", 0755);
  r.file("/etc/passwd", passwd_text());
  r.file("/etc/group", "root:x:0:\nagent:x:0:\nnogroup:x:65534:\n");
  r.file("/etc/hostname", plan.hostname + "\n");
  r.file("/etc/hosts", hosts_text(plan));
  r.file("/etc/nsswitch.conf", "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n");
  r.file("/etc/resolv.conf", resolv_text(plan, host));
  for (const char* p : etc_binds) r.system_path(p, host.at(p));
}

// The private /tmp comes before the binds, so that an agent installed below the host's /tmp
// (read-only at the same path) is not hidden by it.
void add_tmp(new_root& r, const launch_plan& plan) {
  r.tmpfs("/tmp", fmt::format("mode=1777,size={},uid=0,gid=0", plan.tmp_bytes),
          MS_NOSUID | MS_NODEV);
}

// The session's two writable trees, then its mounts in the plan's order (leases, bundles,
// read-only paths, the caller's extra mounts).
void add_session_binds(new_root& r, const launch_plan& plan) {
  if (plan.workspace_overlay)
    r.overlay(*plan.workspace_overlay, plan.workspace_target);
  else
    r.bind(plan.workspace_dir, plan.workspace_target, true, false);
  if (plan.home_overlay)
    r.overlay(*plan.home_overlay, sandbox_home);
  else
    r.bind(plan.home_dir, sandbox_home, true, false);
  for (const auto& m : plan.mounts)
    r.bind(m.source.string(), r.beside_links(m.target), m.writable, m.is_file);
}

// A minimal /dev: a few host devices, a private devpts, the usual links and a /dev/shm tmpfs.
void add_dev(new_root& r, const launch_plan& plan, const host_view& host) {
  r.tmpfs("/dev", "mode=0755,size=64k,uid=0,gid=0", MS_NOSUID | MS_NOEXEC);
  for (const char* d : devices) {
    if (!host.devices.contains(d)) continue;
    const std::string path = fmt::format("/dev/{}", d);
    // Device binds keep dev: /dev is the only place device nodes are usable.
    r.parents(path);
    step mk = of(op::make_file);
    mk.target = r.c.keep(relative_root + path);
    mk.mode = 0666;
    r.add("create " + path, mk);
    step b = of(op::mount);
    b.source = r.c.keep(path);
    b.target = mk.target;
    b.flags = MS_BIND;
    r.add("bind " + path, b);
    r.mounted(path);
  }
  step pts = of(op::mount);
  pts.source = "devpts";
  pts.target = r.make_dir("/dev/pts", 0755);
  pts.fstype = "devpts";
  pts.flags = MS_NOSUID | MS_NOEXEC;
  pts.data = "newinstance,ptmxmode=0666,mode=620";
  r.add("devpts /dev/pts", pts);
  r.mounted("/dev/pts");
  r.symlink("pts/ptmx", "/dev/ptmx");
  r.symlink("/proc/self/fd", "/dev/fd");
  r.symlink("/proc/self/fd/0", "/dev/stdin");
  r.symlink("/proc/self/fd/1", "/dev/stdout");
  r.symlink("/proc/self/fd/2", "/dev/stderr");
  r.tmpfs("/dev/shm", fmt::format("mode=1777,size={},uid=0,gid=0", plan.tmp_bytes),
          MS_NOSUID | MS_NODEV);
  // In an image's root Landlock must leave / writable, so /dev itself (not /dev/shm, not
  // /dev/pts: mounts of their own) is made read-only once built; the host's root is covered
  // by Landlock's read-only /.
  if (plan.image) {
    step ro = of(op::set_attr);
    ro.target = r.c.keep(relative_root + "/dev");
    ro.flags = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC;
    r.add("read-only /dev", ro);
  }
}

// A procfs of the run's own pid namespace, and an empty /mnt for the program's own nested
// sandboxes.
void add_proc_and_mnt(new_root& r) {
  step p = of(op::mount);
  p.source = "proc";
  p.target = r.make_dir("/proc", 0555);
  r.check("/proc", p.target);
  p.fstype = "proc";
  p.flags = MS_NOSUID | MS_NODEV | MS_NOEXEC;
  r.add("proc /proc", p);
  r.mounted("/proc");
  r.make_dir("/mnt", 0755);
}

// An image's layers (top-most first), its upper and overlayfs's work directory, opened as sources
// like the binds' (pid 1 holds the layers by fd: the store is not reachable by path as the
// sandbox's root). The fds the overlay step names them by.
struct image_layers {
  std::vector<int> lowers;
  int upper = -1, work = -1;
  int context = -1;  // the overlay's filesystem context, then its mount
};

image_layers add_image_layers(new_root& r, const launch_image& img) {
  image_layers out;
  for (size_t i = 0; i < img.lowers.size(); ++i)
    out.lowers.push_back(r.open_source(img.lowers[i], fmt::format("open layer {}", i + 1)));
  out.upper = r.open_source(img.upper, "open the root's upper");
  out.work = r.open_source(img.work, "open the root's work directory");
  out.context = r.next_fd++;  // no open: the overlay step makes it
  return out;
}

// --- Pid 1's steps, in the order they run. ---

// Waits until the helper has written the id maps, moves itself into the run's cgroup (v1: with
// the tasks files that came with the release; on v2, or born in it, there are none); then
// makes that cgroup its root (the host's hierarchy is not visible through /proc/self/cgroup),
// stops mount propagation to the host and mounts the empty tmpfs the new root grows on (an
// image's root is mounted later, as the sandbox's root: add_image_root).
void add_private_mount_tree(compiled& c, const launch_plan& plan) {
  setup(c, "wait for the helper", of(op::wait_parent));
  setup(c, "enter the run's cgroups", of(op::enter_cgroups));
  step s = of(op::unshare);
  s.flags = CLONE_NEWCGROUP;
  setup(c, "unshare cgroup", s);
  // Nothing we mount propagates back to the host (and host mounts still propagate in).
  s = of(op::mount);
  s.target = "/";
  s.flags = MS_REC | MS_SLAVE;
  setup(c, "make / slave", s);
  if (plan.image) return;
  s = of(op::mount);
  s.source = "tmpfs";
  s.target = c.keep(plan.root_dir);
  s.fstype = "tmpfs";
  s.flags = MS_NOSUID | MS_NODEV;
  s.data = "mode=0755,size=4m,uid=0,gid=0";
  setup(c, "tmpfs root", s);
}

// Opens every source (the new root first) with the helper's filesystem ids, then becomes uid 0
// of the namespace: files created on the new tmpfs need a mapped owner.
void add_sources_then_ids(compiled& c, const new_root& r) {
  for (const step& open : r.opens) c.ctx.setup.push_back(open);
  setup(c, "set ids", of(op::set_ids));
  // After set ids: a change of credentials clears the parent-death signal.
  setup(c, "parent death signal", of(op::death_signal));
}

// The image's root: an overlay of its layers under the run's upper, made by the sandbox's own
// root (after set ids) so that it belongs to the sandbox's user namespace — mounted with
// userxattr, as a rootless run must — and attached on the new root's mount point; the fd of
// the mount point then names the overlay, where "chdir new root" goes. nosuid and nodev: a
// setuid binary or a device node of the image grants nothing.
void add_image_root(compiled& c, const image_layers& l) {
  auto config = [&](std::string name, unsigned cmd, const char* key, const char* value) {
    step s = of(op::fs_config);
    s.fd = l.context;
    s.flags = cmd;
    s.key = key;
    s.value = value;
    setup(c, std::move(name), s);
  };
  step open = of(op::fs_open);
  open.fstype = "overlay";
  open.fd = l.context;
  setup(c, "overlay: fsopen", open);
  for (size_t i = 0; i < l.lowers.size(); ++i)
    config(fmt::format("overlay: layer {}", i + 1), FSCONFIG_SET_STRING, "lowerdir+",
           c.keep(fmt::format("/proc/self/fd/{}", l.lowers[i])));
  config("overlay: upper", FSCONFIG_SET_STRING, "upperdir",
         c.keep(fmt::format("/proc/self/fd/{}", l.upper)));
  config("overlay: work", FSCONFIG_SET_STRING, "workdir",
         c.keep(fmt::format("/proc/self/fd/{}", l.work)));
  config("overlay: userxattr", FSCONFIG_SET_FLAG, "userxattr", nullptr);
  config("overlay: create", FSCONFIG_CMD_CREATE, nullptr, nullptr);
  step attach = of(op::fs_attach);
  attach.fd = l.context;
  attach.target_fd = source_fd_base;  // the new root's mount point
  attach.flags = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
  setup(c, "overlay: mount as the new root", attach);
}

// Builds the new root from inside it, then makes it the root: the source fds go, pivot_root
// detaches the host's tree, and the root tmpfs itself becomes read-only.
void add_build_and_enter_root(compiled& c, const new_root& r, const launch_plan& plan) {
  step s = of(op::change_dir);
  s.target = c.keep(fmt::format("/proc/self/fd/{}", source_fd_base));
  setup(c, "chdir new root", s);
  for (const step& m : r.mounts) c.ctx.setup.push_back(m);
  s = of(op::close_range);
  s.fd = source_fd_base;
  s.last_fd = r.next_fd;
  setup(c, "close source fds", s);
  setup(c, "pivot_root", of(op::pivot_root));
  if (plan.image) return;  // an image's root stays writable: the run may install into it
  s = of(op::set_attr);
  s.target = "/";
  s.flags = MOUNT_ATTR_RDONLY;
  setup(c, "read-only /", s);
}

// The run's own host name and network: lo up in its own namespace, and for `allow` the
// listening sockets pid 1 passes to the helper (one per relayed address, and the proxy).
void add_host_name_and_network(compiled& c, const launch_plan& plan) {
  step s = of(op::set_hostname);
  s.value = c.keep(plan.hostname);
  setup(c, "sethostname", s);
  if (plan.network.mode != network_mode::host) setup(c, "loopback up", of(op::loopback_up));
  for (size_t i = 0; i < c.allow.listeners.size(); ++i) {
    const auto& l = c.allow.listeners[i];
    s = of(op::listen_pass);
    s.value = c.keep(l.ip);
    s.port = l.port;
    s.ipv6 = l.ipv6;
    s.index = static_cast<uint8_t>(i);
    setup(c, fmt::format("listen {}:{}", l.ip, l.port), s);
  }
}

// rlimits, inherited by the program: no core dumps, a sane fd limit, the disk quota as the
// largest file, and the CPU limit as a second fence.
void add_rlimits(compiled& c, const launch_plan& plan, const host_view& host) {
  auto rlimit = [&](const char* name, int res, uint64_t soft, uint64_t hard) {
    step r = of(op::rlimit);
    r.resource = res;
    r.soft = soft;
    r.hard = hard;
    setup(c, name, r);
  };
  rlimit("rlimit core", RLIMIT_CORE, 0, 0);
  const uint64_t nofile_hard = std::min<uint64_t>(host.nofile_hard, 65536);
  rlimit("rlimit nofile", RLIMIT_NOFILE, std::min<uint64_t>(nofile_hard, 4096), nofile_hard);
  if (plan.limits.disk_bytes)
    rlimit("rlimit fsize", RLIMIT_FSIZE, plan.limits.disk_bytes, plan.limits.disk_bytes);
  if (plan.limits.cpu_ms) {
    // A second fence behind the cgroup's CPU accounting: per process, SIGXCPU then SIGKILL.
    const uint64_t sec = (plan.limits.cpu_ms + 999) / 1000;
    rlimit("rlimit cpu", RLIMIT_CPU, sec + 1, sec + 2);
  }
}

// --- The program's process. ---

// Its own session and stdio, the working directory, then every privilege dropped; Landlock
// and seccomp last before execve.
void add_program_steps(compiled& c, const launch_plan& plan) {
  auto program = [&](std::string name, op kind, const char* target = nullptr) {
    step s = of(kind);
    s.target = target;
    emit(c, c.ctx.program, std::move(name), s);
  };
  if (plan.serve) {
    c.ctx.cwd = c.keep(plan.cwd);  // an exec's directory unless it names one
    // A session's exec (pid 1 serves them, child.h): the same fences, with what each exec
    // brings — its stdio (or a terminal pid 1 made), its directory, argv and environment.
    program("unblock signals", op::unblock_signals);
    program("new session", op::new_session);
    program("stdio", op::stdio);
    program("controlling terminal", op::controlling_tty);
    program("chdir", op::change_dir);
    program("oom score", op::oom_score);
    program("close fds", op::close_fds);
    program("no_new_privs", op::no_new_privs);
    program("drop capabilities", op::drop_caps);
    program("landlock", op::landlock);
    program("seccomp", op::seccomp);
    program("execve", op::exec);
    return;
  }
  // A new session detaches the program from any terminal of the caller. With the caller's
  // terminal passed through (sandbox shell) it stays in the caller's foreground group, so that
  // Ctrl-C reaches it; TIOCSTI/TIOCLINUX are denied by seccomp either way.
  if (!plan.inherit_stdio || plan.terminal) program("new session", op::new_session);
  // With a terminal: a pseudo-terminal of the sandbox's devpts is the new session's
  // controlling terminal and the program's stdio (/dev/pts is mounted by now: pid 1's root).
  if (plan.terminal) program("terminal /dev/pts/ptmx", op::terminal);
  program("stdio", op::stdio);
  program("chdir " + plan.cwd, op::change_dir, c.keep(plan.cwd));
  program("oom score", op::oom_score);
  program("close fds", op::close_fds);
  program("no_new_privs", op::no_new_privs);
  program("drop capabilities", op::drop_caps);
  program("landlock", op::landlock);
  program("seccomp", op::seccomp);
  const std::string& name = plan.argv.front();
  if (name.find('/') != std::string::npos) {
    program("execve", op::exec);
    return;
  }
  // A bare name: found on the program's own PATH inside the sandbox, as execvp would (but on
  // the plan's environment, not the helper's).
  auto path = plan.env.find("PATH");
  std::string dirs = path == plan.env.end() ? "" : path->second;
  for (size_t start = 0; start <= dirs.size();) {
    size_t colon = dirs.find(':', start);
    if (colon == std::string::npos) colon = dirs.size();
    std::string dir = dirs.substr(start, colon - start);
    if (dir.empty()) dir = ".";  // an empty PATH entry is the working directory
    if (!dirs.empty()) c.exec_paths.push_back(dir + "/" + name);
    start = colon + 1;
  }
  for (auto& p : c.exec_paths) c.exec_candidates.push_back(p.c_str());
  c.exec_candidates.push_back(nullptr);
  c.ctx.exec_candidates = c.exec_candidates.data();
  program(dirs.empty() ? fmt::format("execve {} (no PATH to find it on)", name)
                       : fmt::format("execve {} (searched PATH={})", name, dirs),
          op::exec);
}

// Landlock, negotiated now and applied in the program's process; the seccomp filter, compiled
// at build time. Candidates without Landlock are those whose own sandbox must mount: they also
// keep the one capability a nested user namespace needs to map its root to ours.
void add_policies(compiled& c, const launch_plan& plan, const host_view& host) {
  c.ctx.keep_setfcap = !plan.landlock;
  c.ctx.cap_last = host.cap_last;
  if (!plan.landlock) {
    c.landlock_reason = "disabled for this candidate (its own sandbox needs mount)";
  } else if (host.landlock_abi == 0) {
    c.landlock_reason = "the kernel does not offer Landlock";
  } else {
    // An image's root is the run's own, writable (installing into it is allowed); the host's
    // allow-listed root is read-only.
    std::vector<landlock::path_rule> rules = {
        {"/", plan.image ? landlock::access::read_write : landlock::access::read_only},
        {plan.workspace_target, landlock::access::read_write},
        {sandbox_home, landlock::access::read_write},
        {"/tmp", landlock::access::read_write},
        {"/dev/shm", landlock::access::read_write},
        {"/dev/pts", landlock::access::device},
        {"/dev/ptmx", landlock::access::device},
    };
    for (const char* d : {"/dev/null", "/dev/zero", "/dev/full", "/dev/tty"})
      rules.push_back({d, landlock::access::device});
    for (const auto& m : plan.mounts)
      if (m.writable) rules.push_back({m.target.string(), landlock::access::read_write});
    c.ll = landlock::make_ruleset(host.landlock_abi, rules);
    c.ctx.landlock = &c.ll;
  }
  c.ctx.seccomp = &seccomp::builtin();
}

// argv and exactly the plan's environment as C arrays; with the proxy, the variables that
// point programs at it.
void add_argv_and_env(compiled& c, const launch_plan& plan) {
  c.argv_s = plan.argv;
  for (auto& a : c.argv_s) c.argv.push_back(a.data());
  c.argv.push_back(nullptr);
  std::map<std::string, std::string> env = plan.env;
  if (c.allow.proxy_port) {
    const std::string url = fmt::format("http://127.0.0.1:{}", c.allow.proxy_port);
    for (const char* k :
         {"HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy"})
      env[k] = url;
    // Relayed loopback addresses are reached directly, not through the proxy.
    std::string direct;
    for (const auto& l : c.allow.listeners)
      if (!l.proxy) direct += (direct.empty() ? "" : ",") + l.ip;
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
}

host_view::path_entry look_at(const std::string& path) {
  using kind = host_view::path_entry::kind;
  host_view::path_entry e;
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return e;
  if (S_ISLNK(st.st_mode)) {
    std::error_code ec;
    auto target = fs::read_symlink(path, ec);
    if (!ec) e = {kind::symlink, target.string()};  // an unreadable link is skipped
    return e;
  }
  e.type = S_ISDIR(st.st_mode) ? kind::directory : kind::file;
  return e;
}

}  // namespace

host_view::path_entry host_view::at(const std::string& path) const {
  auto it = paths.find(path);
  return it == paths.end() ? path_entry{} : it->second;
}

host_view look_at_host(network_mode network) {
  host_view h = look_at_host_layout();
  look_at_host_network(h, network);
  return h;
}

void look_at_host_network(host_view& h, network_mode network) {
  if (network == network_mode::host) h.resolv_conf = read_file("/etc/resolv.conf").value_or("");
}

host_view look_at_host_layout() {
  host_view h;
  for (std::string_view p : system_paths) h.paths[std::string(p)] = look_at(std::string(p));
  for (const char* p : etc_binds) h.paths[p] = look_at(p);
  for (const char* d : devices)
    if (::access(fmt::format("/dev/{}", d).c_str(), F_OK) == 0) h.devices.insert(d);
  rlimit nofile{};
  ::getrlimit(RLIMIT_NOFILE, &nofile);
  h.nofile_hard = nofile.rlim_max;
  h.landlock_abi = landlock::kernel_abi();
  if (auto last = read_file("/proc/sys/kernel/cap_last_cap")) h.cap_last = std::atoi(last->c_str());
  return h;
}

status compile(const launch_plan& plan, const host_view& host, compiled& c) {
  if (plan.network.mode == network_mode::host && !plan.network.unsafe_host_network)
    return make_error(error_kind::invalid_argument,
                      "network host requires network.unsafe_host_network");
  if (plan.network.mode == network_mode::allow)
    c.allow = EB_TRY(net::plan_allow(plan.network.allow));

  // The new root, in mount order.
  new_root root(c, plan.root_dir, plan.image.has_value());
  std::optional<image_layers> layers;
  if (plan.image)
    layers = add_image_layers(root, *plan.image);
  else
    add_system_paths(root, host);
  add_etc(root, plan, host);
  add_tmp(root, plan);  // before the binds, on purpose (see add_tmp)
  add_session_binds(root, plan);
  add_dev(root, plan, host);
  add_proc_and_mnt(root);

  // Pid 1, in the order it runs.
  add_private_mount_tree(c, plan);
  add_sources_then_ids(c, root);
  if (layers) add_image_root(c, *layers);
  add_build_and_enter_root(c, root, plan);
  add_host_name_and_network(c, plan);
  add_rlimits(c, plan, host);

  // The program's process.
  add_program_steps(c, plan);
  add_policies(c, plan, host);
  add_argv_and_env(c, plan);
  return {};
}

}  // namespace evalbox::sandbox::helper
