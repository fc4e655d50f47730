// Host feature probes (see probe.h). Each probe that would change the caller runs in a child.
#include "sandbox/sys/probe.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <linux/filter.h>
#include <linux/magic.h>
#include <linux/seccomp.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

#include "base/fs.h"
#include "base/json.h"
#include "base/unique_fd.h"
#include "sandbox/sys/mountinfo.h"
#include "sandbox/sys/syscalls.h"

namespace evalbox::sys {

namespace fs = std::filesystem;

namespace {

// Runs `fn` in a forked child and reports whether it returned true. The child only makes
// system calls; the caller must be single-threaded or accept that (see probe.h).
template <class Fn>
bool in_child(Fn fn) {
  pid_t pid = ::fork();
  if (pid < 0) return false;
  if (pid == 0) ::_exit(fn() ? 0 : 1);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

bool probe_unshare(int flags) {
  return in_child([flags] { return ::unshare(flags) == 0; });
}

bool fs_listed(std::string_view name) {
  std::ifstream in("/proc/filesystems");
  std::string line;
  while (std::getline(in, line)) {
    auto tab = line.rfind('\t');
    if (tab != std::string::npos && line.substr(tab + 1) == name) return true;
  }
  return false;
}

int probe_landlock() {
  int abi = landlock_create_ruleset(nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return abi < 0 ? 0 : abi;
}

bool probe_seccomp() {
  return in_child([] {
    struct sock_filter allow[] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
    struct sock_fprog prog = {1, allow};
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
    return ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
  });
}

// The host's mount table; empty when it cannot be read (the probe then finds nothing there).
std::vector<mount_entry> host_mounts() {
  auto table = read_mountinfo();
  return table ? std::move(*table) : std::vector<mount_entry>{};
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream ss(s);
  while (std::getline(ss, cur, sep))
    if (!cur.empty()) out.push_back(cur);
  return out;
}

// An idmapped clone of `dir` through a throwaway user namespace: the same operation the
// overlay workspace strategy performs on a fixture's workspace.
bool probe_idmap(const fs::path& dir) {
  int sync[2];
  if (::pipe2(sync, O_CLOEXEC) != 0) return false;
  unique_fd sync_read(sync[0]), sync_write(sync[1]);  // the child waits until the write end closes
  pid_t pid = ::fork();
  if (pid < 0) return false;
  if (pid == 0) {
    sync_write.reset();
    if (::unshare(CLONE_NEWUSER) != 0) ::_exit(1);
    char c;
    (void)!::read(sync_read.get(), &c, 1);
    ::_exit(0);
  }
  sync_read.reset();
  bool ok = false;
  // The child may not have unshared yet: writing its map fails until it has.
  for (int attempt = 0; attempt < 100 && !ok; ++attempt) {
    std::string map_path = fmt::format("/proc/{}/uid_map", pid);
    unique_fd mf(::open(map_path.c_str(), O_WRONLY | O_CLOEXEC));
    if (mf && ::write(mf.get(), "0 65534 1\n", 10) == 10) ok = true;
    if (!ok) ::usleep(1000);
  }
  if (ok) {  // an idmapped mount needs both maps
    unique_fd gf(::open(fmt::format("/proc/{}/gid_map", pid).c_str(), O_WRONLY | O_CLOEXEC));
    ok = gf && ::write(gf.get(), "0 65534 1\n", 10) == 10;
  }
  if (ok) {
    ok = false;
    unique_fd ns(::open(fmt::format("/proc/{}/ns/user", pid).c_str(), O_RDONLY | O_CLOEXEC));
    unique_fd tree(open_tree(AT_FDCWD, dir.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC));
    if (ns && tree) {
      struct mount_attr attr {};
      attr.attr_set = MOUNT_ATTR_IDMAP;
      attr.userns_fd = static_cast<uint64_t>(ns.get());
      ok = mount_setattr(tree.get(), "", AT_EMPTY_PATH, &attr) == 0;
    }
  }
  sync_write.reset();
  int st;
  ::waitpid(pid, &st, 0);
  return ok;
}

// Writes `text` to a /proc file of this process (uid_map, setgroups).
bool write_proc(const char* path, std::string_view text) {
  unique_fd f(::open(path, O_WRONLY | O_CLOEXEC));
  return f && ::write(f.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size());
}

}  // namespace

std::string_view to_string(whiteout_form form) noexcept {
  switch (form) {
    case whiteout_form::char_device:
      return "char_device";
    case whiteout_form::user_xattr:
      return "user_xattr";
    case whiteout_form::copy:
      return "copy";
  }
  return "copy";
}

whiteout_form probe_whiteout_form(const fs::path& dir) {
  const fs::path probe = dir / (".evalbox-whiteout-probe-" + random_suffix());
  bool chardev = ::mknod(probe.c_str(), S_IFCHR | 0600, makedev(0, 0)) == 0;
  ::unlink(probe.c_str());
  if (chardev) return whiteout_form::char_device;
  bool xattr = false;
  {
    unique_fd f(::open(probe.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    xattr = f && ::fsetxattr(f.get(), "user.overlay.whiteout", "", 0, 0) == 0;
  }
  ::unlink(probe.c_str());
  return xattr ? whiteout_form::user_xattr : whiteout_form::copy;
}

bool probe_userns_overlay() {
  const uid_t uid = ::geteuid();
  const gid_t gid = ::getegid();
  return in_child([uid, gid] {
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return false;
    if (!write_proc("/proc/self/setgroups", "deny") ||
        !write_proc("/proc/self/uid_map", fmt::format("0 {} 1", uid)) ||
        !write_proc("/proc/self/gid_map", fmt::format("0 {} 1", gid)))
      return false;
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return false;
    // A tmpfs over /tmp, private to this child's namespace, holds the layers.
    if (::mount("tmpfs", "/tmp", "tmpfs", 0, "size=1m") != 0) return false;
    for (const char* d : {"/tmp/l", "/tmp/u", "/tmp/w", "/tmp/m"})
      if (::mkdir(d, 0700) != 0) return false;
    return ::mount("overlay", "/tmp/m", "overlay", 0,
                   "lowerdir=/tmp/l,upperdir=/tmp/u,workdir=/tmp/w,userxattr") == 0;
  });
}

bool reflink_supported(const fs::path& dir) {
  fs::path a = dir / ".evalbox-reflink-probe-a";
  fs::path b = dir / ".evalbox-reflink-probe-b";
  bool ok = false;
  {
    unique_fd fa(::open(a.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    unique_fd fb(::open(b.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (fa && fb && ::write(fa.get(), "evalbox", 7) == 7)
      ok = ::ioctl(fb.get(), FICLONE, fa.get()) == 0;
  }
  ::unlink(a.c_str());
  ::unlink(b.c_str());
  return ok;
}

std::vector<fs::path> cgroup_v1_mounts(const std::vector<std::string>& controllers) {
  std::vector<fs::path> found(controllers.size());
  // The usual layout first: /sys/fs/cgroup/<controller> is a cgroup v1 mount (or a symlink to
  // one) whose name lists the controller ("memory", "cpu,cpuacct"). A statfs and a readlink
  // each, where one read of the mount table costs ~0.4 ms of kernel time with 100 host mounts
  // (and every live run adds mounts). Anything else is looked up in the mount table.
  bool all = true;
  for (size_t i = 0; i < controllers.size(); ++i) {
    const fs::path dir = fs::path("/sys/fs/cgroup") / controllers[i];
    struct statfs sf {};
    std::error_code ec;
    if (::statfs(dir.c_str(), &sf) == 0 && sf.f_type == CGROUP_SUPER_MAGIC) {
      fs::path real = fs::canonical(dir, ec);
      const auto names = split(real.filename().string(), ',');
      if (!ec && real.parent_path() == "/sys/fs/cgroup" &&
          std::find(names.begin(), names.end(), controllers[i]) != names.end()) {
        found[i] = real;
        continue;
      }
    }
    all = false;
  }
  if (all) return found;
  for (const auto& m : host_mounts()) {
    if (m.fstype != "cgroup") continue;
    for (const auto& opt : split(m.super_options, ',')) {
      for (size_t i = 0; i < controllers.size(); ++i)
        if (found[i].empty() && opt == controllers[i]) found[i] = m.mount_point;
    }
  }
  return found;
}

host_features probe_host(const fs::path& state_dir) {
  host_features h;
  struct utsname u {};
  if (::uname(&u) == 0) h.kernel = u.release;
  h.uid = ::geteuid();
  h.root = h.uid == 0;
  h.user_namespaces = probe_unshare(CLONE_NEWUSER);
  // Mount, pid and net namespaces need CAP_SYS_ADMIN: inside a new user namespace when
  // unprivileged, directly when root. Probe the way the launcher will use them.
  int userns = h.root ? 0 : CLONE_NEWUSER;
  h.mount_namespaces = probe_unshare(userns | CLONE_NEWNS);
  h.pid_namespaces = probe_unshare(userns | CLONE_NEWPID);
  h.net_namespaces = probe_unshare(userns | CLONE_NEWNET);
  h.overlayfs = fs_listed("overlay");
  h.landlock_abi = probe_landlock();
  h.seccomp_filter = probe_seccomp();

  for (const auto& m : host_mounts()) {
    if (m.fstype == "cgroup2" && h.cgroup_v2_root.empty()) {
      h.cgroup_v2 = true;
      h.cgroup_v2_root = m.mount_point;
      auto text = read_file(fs::path(m.mount_point) / "cgroup.controllers");
      if (text && ::access(m.mount_point.c_str(), W_OK) == 0) {
        std::string t = *text;
        std::replace(t.begin(), t.end(), '\n', ' ');
        h.cgroup_v2_controllers = split(t, ' ');
      }
    }
    if (m.fstype == "cgroup" && ::access(m.mount_point.c_str(), W_OK) == 0) {
      for (const auto& opt : split(m.super_options, ','))
        if (opt == "memory" || opt == "pids" || opt == "cpu" || opt == "cpuacct")
          h.cgroup_v1_controllers.push_back(opt);
    }
  }
  std::sort(h.cgroup_v1_controllers.begin(), h.cgroup_v1_controllers.end());
  h.cgroup_v1_controllers.erase(
      std::unique(h.cgroup_v1_controllers.begin(), h.cgroup_v1_controllers.end()),
      h.cgroup_v1_controllers.end());

  h.state_dir = state_dir;
  if (make_dirs(state_dir, 0755)) {
    h.reflink = reflink_supported(state_dir);
    h.idmapped_mounts = h.root && probe_idmap(state_dir);
    h.image_whiteout = probe_whiteout_form(state_dir);
  }
  h.userns_overlay = probe_userns_overlay();
  if (auto t = read_file("/sys/kernel/rcu_expedited");
      t && !t->empty() && (*t)[0] >= '0' && (*t)[0] <= '9')
    h.rcu_expedited = (*t)[0] - '0';
  return h;
}

namespace {
std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : " ") + s;
  return out;
}
bool has(const std::vector<std::string>& v, std::string_view s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}
}  // namespace

bool host_features::self_moves_unlocked() const {
  unsigned major = 0, minor = 0;
  const char* p = kernel.data();
  const char* end = p + kernel.size();
  auto [a, e1] = std::from_chars(p, end, major);
  if (e1 != std::errc() || a == end || *a != '.') return false;
  auto [b, e2] = std::from_chars(a + 1, end, minor);
  if (e2 != std::errc()) return false;
  return major > 5 || (major == 5 && minor >= 17);
}

std::vector<feature> host_features::features() const {
  std::vector<feature> f;
  f.push_back({"root", root, false, root ? "uid 0" : fmt::format("uid {}", uid),
               "not root: workspaces are plain copies without a disk quota, and cgroup limits "
               "need a delegated cgroup v2 subtree"});
  f.push_back({"user_namespaces", user_namespaces, true, "",
               "enable unprivileged user namespaces: sysctl kernel.unprivileged_userns_clone=1 "
               "and user.max_user_namespaces > 0"});
  f.push_back({"mount_namespaces", mount_namespaces, true, "", "kernel needs CONFIG_NAMESPACES"});
  f.push_back({"pid_namespaces", pid_namespaces, true, "", "kernel needs CONFIG_PID_NS"});
  f.push_back({"net_namespaces", net_namespaces, true, "", "kernel needs CONFIG_NET_NS"});
  f.push_back({"overlayfs", overlayfs, false, "",
               "modprobe overlay (without it workspaces are copied: slower for big fixtures)"});
  f.push_back({"idmapped_mounts", idmapped_mounts, false, "",
               "needs root and a kernel >= 5.19 whose state filesystem supports idmapped mounts; "
               "without it overlay falls back to copy"});
  f.push_back({"landlock", landlock_abi > 0, false,
               landlock_abi > 0 ? fmt::format("ABI {}", landlock_abi) : "",
               "boot with lsm=...,landlock (kernel >= 5.13) for a second filesystem fence"});
  f.push_back({"seccomp_filter", seccomp_filter, true, "", "kernel needs CONFIG_SECCOMP_FILTER"});
  bool v2_usable = has(cgroup_v2_controllers, "memory") && has(cgroup_v2_controllers, "pids");
  bool v1_usable = has(cgroup_v1_controllers, "memory") && has(cgroup_v1_controllers, "pids");
  f.push_back({"cgroup_v2", v2_usable, false,
               cgroup_v2 ? fmt::format("{}: controllers [{}]", cgroup_v2_root.string(),
                                       join(cgroup_v2_controllers))
                         : "not mounted",
               "delegate memory, pids and cpu to evalbox's cgroup (systemd: Delegate=yes)"});
  f.push_back({"cgroup_v1", v1_usable, false, fmt::format("[{}]", join(cgroup_v1_controllers)),
               "mount cgroup v1 memory and pids controllers, or delegate cgroup v2"});
  // Without root a run goes ahead without a cgroup (rlimits only; its record says what was not
  // enforced), so only root needs one: as root the launch refuses to run without it.
  f.push_back({"cgroup_limits", v1_usable || v2_usable, root,
               v2_usable ? "cgroup v2" : (v1_usable ? "cgroup v1" : "none"),
               root ? "memory and pids limits need cgroup v2 controllers or cgroup v1"
                    : "without root, memory and pids limits are not enforced (rlimits only) "
                      "unless a cgroup v2 subtree with memory and pids is delegated to you"});
  // Only where cgroup v1 is what the launches use: on v2 pid 1 is cloned into its cgroup. On
  // v1 pid 1 moves itself in, which takes no threadgroup lock from kernel 5.17 on; before, the
  // lock's writer side waits for an RCU grace period after idle time.
  if (v1_usable && !v2_usable) {
    const bool unlocked = self_moves_unlocked();
    f.push_back(
        {"cgroup_v1_moves", unlocked || rcu_expedited == 1, false,
         fmt::format("kernel {}{}", kernel,
                     unlocked            ? ": a task moves itself without the threadgroup lock"
                     : rcu_expedited < 0 ? ", rcu_expedited unreadable"
                                         : fmt::format(", rcu_expedited {}", rcu_expedited)),
         "before kernel 5.17 a task that moves itself into a cgroup v1 takes the "
         "threadgroup lock: a launch after idle time waits ~8 ms (an RCU grace period) "
         "to move its pid 1 into its cgroups: a newer kernel, a delegated cgroup v2, or "
         "echo 1 > /sys/kernel/rcu_expedited (host-wide: every grace period then "
         "interrupts all CPUs)"});
  }
  f.push_back({"reflink", reflink, false, state_dir.string(),
               "the state directory's filesystem has no reflink (btrfs/xfs do): the reflink "
               "strategy is unavailable, overlay or copy is used"});
  f.push_back({"image_whiteouts", image_whiteout != whiteout_form::copy, false,
               std::string(to_string(image_whiteout)),
               "the state directory's filesystem takes neither a 0/0 character device nor user "
               "xattrs: image layers with deletions must be flattened (see docs/environments.md)"});
  f.push_back({"rootless_overlay", userns_overlay, false, "",
               "overlayfs inside a user namespace needs Linux >= 5.11 (userxattr) and "
               "unprivileged user namespaces: without it a rootless run cannot use an image"});
  return f;
}

bool host_features::sandbox_ready() const {
  for (const auto& f : features())
    if (f.required && !f.available) return false;
  return true;
}

json host_features::to_json() const {
  json j;
  j["schema"] = "evalbox.host.v1";
  j["kernel"] = kernel;
  j["root"] = root;
  j["uid"] = uid;
  j["landlock_abi"] = landlock_abi;
  j["cgroup_v2_root"] = cgroup_v2_root.string();
  j["cgroup_v2_controllers"] = cgroup_v2_controllers;
  j["cgroup_v1_controllers"] = cgroup_v1_controllers;
  j["state_dir"] = state_dir.string();
  j["image_whiteout"] = std::string(to_string(image_whiteout));
  j["rcu_expedited"] = rcu_expedited;
  json feats = json::object();
  for (const auto& f : features()) {
    feats[f.name] = {{"available", f.available}, {"required", f.required}, {"detail", f.detail}};
    if (!f.available) feats[f.name]["hint"] = f.hint;
  }
  j["features"] = feats;
  j["sandbox_ready"] = sandbox_ready();
  return j;
}

}  // namespace evalbox::sys
