// Idmapped binds: a cached user namespace per idmap, open_tree + mount_setattr + move_mount.
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <tuple>

#include <fmt/format.h>

#include "base/unique_fd.h"
#include "sandbox/mount/mount.h"
#include "sandbox/sys/process.h"
#include "sandbox/sys/syscalls.h"

namespace evalbox::sandbox::mount {

namespace fs = std::filesystem;

namespace {

status write_map(pid_t pid, const char* which, std::string_view line) {
  std::string path = fmt::format("/proc/{}/{}", pid, which);
  unique_fd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) return sys_error(errno, "open {}", path);
  if (::write(fd.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size()))
    return sys_error(errno, "write {} ({})", path, line);
  return {};
}

// The child that makes an idmap's user namespace: it shares the caller's memory (CLONE_VM:
// no copy of the caller's page tables, and no copy-on-write fault in the caller afterwards for
// every page it writes) and runs on this stack of its own. One child at a time uses it: every
// caller holds the cache's mutex (cached_userns). It makes only the system calls below, with
// every signal blocked from before its birth (no handler of the caller's runs on this stack).
// A failed call writes errno, which it shares with the calling thread; that thread is then
// blocked in read() on `ready` and looks at errno only after a call of its own fails.
alignas(64) char userns_child_stack[16 << 10];

struct userns_child_fds {
  int ready_w;   // child -> parent: unshared ('k') or not ('e')
  int done_r;    // parent -> child: maps written, exit
  int close[2];  // the parent's ends, whose copies in the child would hold the pipes open
};

int userns_child(void* arg) noexcept {
  const auto* fds = static_cast<const userns_child_fds*>(arg);
  for (int fd : fds->close) (void)::close(fd);
  char c = ::unshare(CLONE_NEWUSER) == 0 ? 'k' : 'e';
  (void)!::write(fds->ready_w, &c, 1);
  (void)!::read(fds->done_r, &c, 1);
  ::_exit(0);
}

// A user namespace whose maps are "from to 1" for uid and gid: the idmap of the mount. Created
// by a child that only unshares and waits on a pipe (the caller may be multi-threaded), then
// released once its /proc/PID/ns/user is open.
result<unique_fd> make_idmap_userns(uid_t from_uid, gid_t from_gid, uid_t to_uid, gid_t to_gid) {
  int ready[2];  // child -> parent: unshared
  int done[2];   // parent -> child: maps written, exit
  if (::pipe2(ready, O_CLOEXEC) != 0) return sys_error(errno, "pipe2");
  unique_fd ready_r(ready[0]), ready_w(ready[1]);
  if (::pipe2(done, O_CLOEXEC) != 0) return sys_error(errno, "pipe2");
  unique_fd done_r(done[0]), done_w(done[1]);
  static userns_child_fds fds;  // read by the child while the caller waits for its byte
  fds = {ready_w.get(), done_r.get(), {ready_r.get(), done_w.get()}};
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  const pid_t pid = ::clone(userns_child, userns_child_stack + sizeof userns_child_stack,
                            CLONE_VM | SIGCHLD, &fds);
  const int clone_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0) return sys_error(clone_errno, "clone (idmap user namespace)");
  // Killed and reaped on every way out: once its namespace is open, it has done its part.
  sys::owned_process child(pid, unique_fd());
  ready_w.reset();
  done_r.reset();
  char c = 0;
  if (::read(ready_r.get(), &c, 1) != 1 || c != 'k')
    return make_error(error_kind::unsupported,
                      "idmapped mount: cannot create a user namespace (unshare CLONE_NEWUSER)");
  status st = write_map(pid, "uid_map", fmt::format("{} {} 1\n", from_uid, to_uid));
  if (st) st = write_map(pid, "gid_map", fmt::format("{} {} 1\n", from_gid, to_gid));
  if (!st) return std::unexpected(std::move(st).error());
  unique_fd ns(::open(fmt::format("/proc/{}/ns/user", pid).c_str(), O_RDONLY | O_CLOEXEC));
  if (!ns) return sys_error(errno, "open /proc/{}/ns/user", pid);
  return ns;
}

struct userns_cache {
  std::mutex mu;
  std::map<std::tuple<uid_t, gid_t, uid_t, gid_t>, unique_fd> fds;
};

userns_cache& cache() {
  static userns_cache* c = new userns_cache;  // lives as long as the process (fds too)
  return *c;
}

result<int> cached_userns(uid_t from_uid, gid_t from_gid, uid_t to_uid, gid_t to_gid) {
  auto& c = cache();
  std::lock_guard lock(c.mu);
  auto key = std::make_tuple(from_uid, from_gid, to_uid, to_gid);
  auto it = c.fds.find(key);
  if (it != c.fds.end()) return it->second.get();
  auto fd = EB_TRY(make_idmap_userns(from_uid, from_gid, to_uid, to_gid));
  int raw = fd.get();
  c.fds.emplace(key, std::move(fd));
  return raw;
}

}  // namespace

status bind_idmapped(const fs::path& source, const fs::path& target, uid_t from_uid, gid_t from_gid,
                     uid_t to_uid, gid_t to_gid) {
  int ns = EB_TRY_CTX(cached_userns(from_uid, from_gid, to_uid, to_gid),
                      fmt::format("idmap {}:{} -> {}:{}", from_uid, from_gid, to_uid, to_gid));
  unique_fd tree(sys::open_tree(AT_FDCWD, source.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC));
  if (!tree) return sys_error(errno, "open_tree({}, OPEN_TREE_CLONE)", source.string());
  struct mount_attr attr {};
  attr.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY;  // the source is never written
  attr.userns_fd = static_cast<uint64_t>(ns);
  if (sys::mount_setattr(tree.get(), "", AT_EMPTY_PATH, &attr) != 0) {
    int err = errno;
    auto e = sys_error(err, "mount_setattr({}, MOUNT_ATTR_IDMAP)", source.string());
    if (err == EINVAL || err == EPERM) e.error().kind = error_kind::unsupported;
    return e;
  }
  if (sys::move_mount(tree.get(), "", AT_FDCWD, target.c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0)
    return sys_error(errno, "move_mount({} -> {})", source.string(), target.string());
  return {};
}

}  // namespace evalbox::sandbox::mount
