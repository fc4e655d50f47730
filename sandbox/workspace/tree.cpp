// Tree copy and comparison (see tree.h).
#include "sandbox/workspace/tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "base/fs.h"
#include "base/unique_fd.h"
#include "sandbox/sys/syscalls.h"

namespace evalbox::sandbox::workspace {

namespace fs = std::filesystem;

namespace {

struct ctx {
  copy_mode mode;
  uid_t uid;
  gid_t gid;
};

status copy_bytes(int in, int out, off_t size, const fs::path& shown) {
  off_t done = 0;
  bool fallback = false;
  while (done < size && !fallback) {
    ssize_t n = ::copy_file_range(in, nullptr, out, nullptr, static_cast<size_t>(size - done), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP) {
        fallback = true;
        break;
      }
      return sys_error(errno, "copy_file_range {}", shown.string());
    }
    if (n == 0) break;  // the source shrank
    done += n;
  }
  if (!fallback) return {};
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(in, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sys_error(errno, "read {}", shown.string());
    if (n == 0) return {};
    for (ssize_t off = 0; off < n;) {
      ssize_t w = ::write(out, buf + off, static_cast<size_t>(n - off));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return sys_error(errno, "write {}", shown.string());
      off += w;
    }
  }
}

// setuid/setgid bits are dropped: no copy is ever executed with them (the mounts are nosuid
// too), and they would only matter to an escape.
constexpr mode_t kept_mode_bits = 01777;

status copy_dir(int src_dir, int dst_dir, const fs::path& shown, const ctx& c) {
  auto d = EB_TRY(read_dir_at(src_dir, shown));
  while (dirent* e = ::readdir(d.get())) {
    std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    fs::path here = shown / name;
    struct stat st {};
    if (::fstatat(src_dir, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
      return sys_error(errno, "stat {}", here.string());
    if (!S_ISDIR(st.st_mode)) {
      EB_TRY(copy_entry(src_dir, e->d_name, dst_dir, here, c.mode, c.uid, c.gid));
      continue;
    }
    if (::mkdirat(dst_dir, e->d_name, 0700) != 0)
      return sys_error(errno, "mkdir {}", here.string());
    unique_fd s(::openat(src_dir, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    unique_fd t(::openat(dst_dir, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!s || !t) return sys_error(errno, "open {}", here.string());
    EB_TRY(copy_dir(s.get(), t.get(), here, c));
    EB_TRY(finish_dir(t.get(), st, here, c.uid, c.gid));
  }
  return {};
}

}  // namespace

status copy_entry(int src_dir, const char* name, int dst_dir, const fs::path& shown, copy_mode mode,
                  uid_t uid, gid_t gid) {
  struct stat st {};
  if (::fstatat(src_dir, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
    return sys_error(errno, "stat {}", shown.string());
  struct timespec times[2] = {st.st_atim, st.st_mtim};
  if (S_ISREG(st.st_mode)) {
    unique_fd s(::openat(src_dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (!s) return sys_error(errno, "open {}", shown.string());
    unique_fd t(
        ::openat(dst_dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!t) return sys_error(errno, "create {}", shown.string());
    if (mode == copy_mode::reflink) {
      if (::ioctl(t.get(), FICLONE, s.get()) != 0)
        return sys_error(errno, "ioctl(FICLONE) {}", shown.string());
    } else {
      EB_TRY(copy_bytes(s.get(), t.get(), st.st_size, shown));
    }
    if (::fchown(t.get(), uid, gid) != 0 && ::geteuid() == 0)
      return sys_error(errno, "chown {}", shown.string());
    if (::fchmod(t.get(), st.st_mode & kept_mode_bits) != 0)
      return sys_error(errno, "chmod {}", shown.string());
    ::futimens(t.get(), times);
  } else if (S_ISLNK(st.st_mode)) {
    std::string target(static_cast<size_t>(st.st_size) + 1, '\0');
    ssize_t n = ::readlinkat(src_dir, name, target.data(), target.size());
    if (n < 0) return sys_error(errno, "readlink {}", shown.string());
    target.resize(static_cast<size_t>(n));
    if (::symlinkat(target.c_str(), dst_dir, name) != 0)
      return sys_error(errno, "symlink {}", shown.string());
    if (::fchownat(dst_dir, name, uid, gid, AT_SYMLINK_NOFOLLOW) != 0 && ::geteuid() == 0)
      return sys_error(errno, "chown {}", shown.string());
    ::utimensat(dst_dir, name, times, AT_SYMLINK_NOFOLLOW);
  }
  // Sockets, fifos and devices are not part of a workspace: skipped.
  return {};
}

status finish_dir(int dir, const struct stat& like, const fs::path& shown, uid_t uid, gid_t gid) {
  struct timespec times[2] = {like.st_atim, like.st_mtim};
  if (::fchown(dir, uid, gid) != 0 && ::geteuid() == 0)
    return sys_error(errno, "chown {}", shown.string());
  if (::fchmod(dir, like.st_mode & kept_mode_bits) != 0)
    return sys_error(errno, "chmod {}", shown.string());
  ::futimens(dir, times);
  return {};
}

status copy_tree(const fs::path& from, const fs::path& to, copy_mode mode, uid_t uid, gid_t gid) {
  unique_fd s(::open(from.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!s) return sys_error(errno, "open {}", from.string());
  unique_fd t(::open(to.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!t) return sys_error(errno, "open {}", to.string());
  EB_TRY(copy_dir(s.get(), t.get(), from, ctx{mode, uid, gid}));
  struct stat st {};
  if (::fstat(s.get(), &st) == 0) {
    if (::fchown(t.get(), uid, gid) != 0 && ::geteuid() == 0)
      return sys_error(errno, "chown {}", to.string());
    ::fchmod(t.get(), st.st_mode & kept_mode_bits);
  }
  return {};
}

bool entry_differs(const fs::path& a, const fs::path& b, const fs::path& rel) {
  fs::path pa = rel.empty() ? a : a / rel, pb = rel.empty() ? b : b / rel;
  struct stat sa {
  }, sb{};
  bool ea = ::lstat(pa.c_str(), &sa) == 0, eb = ::lstat(pb.c_str(), &sb) == 0;
  if (ea != eb) return true;
  if (!ea) return false;
  if ((sa.st_mode & S_IFMT) != (sb.st_mode & S_IFMT)) return true;
  if ((sa.st_mode & 07777) != (sb.st_mode & 07777)) return true;
  if (S_ISLNK(sa.st_mode)) {
    std::error_code e1, e2;
    return fs::read_symlink(pa, e1) != fs::read_symlink(pb, e2);
  }
  if (S_ISREG(sa.st_mode)) {
    if (sa.st_size != sb.st_size) return true;
    auto ca = read_file(pa, 1ull << 40), cb = read_file(pb, 1ull << 40);
    return !ca || !cb || *ca != *cb;
  }
  return false;
}

std::vector<std::string> list_tree(const fs::path& root) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(root, fs::directory_options::none, ec), end;
       !ec && it != end; it.increment(ec))
    out.push_back(it->path().lexically_relative(root).string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace evalbox::sandbox::workspace
