// Files inside a live sandbox (files.h).
#include "sandbox/live/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/unique_fd.h"
#include "sandbox/sys/beneath.h"

namespace evalbox::sandbox::live_files {
namespace {

constexpr uint64_t in_root = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;

// The calling thread's filesystem ids are the sandbox user's while it lives (setfsuid is per
// thread): permission checks are that user's, without the capabilities that would bypass them,
// and what is created is that user's. Without root they are evalbox's own ids already.
class as_sandbox_user {
 public:
  explicit as_sandbox_user(const place& at) : root_(::geteuid() == 0) {
    if (!root_) return;
    old_gid_ = ::setfsgid(at.gid);
    old_uid_ = ::setfsuid(at.uid);
  }
  ~as_sandbox_user() {
    if (!root_) return;
    ::setfsuid(static_cast<uid_t>(old_uid_));
    ::setfsgid(static_cast<gid_t>(old_gid_));
  }
  as_sandbox_user(const as_sandbox_user&) = delete;
  as_sandbox_user& operator=(const as_sandbox_user&) = delete;

 private:
  bool root_;
  int old_uid_ = 0, old_gid_ = 0;
};

// The path as resolved from the root: absolute as given, else below the workspace.
result<std::string> inside(const place& at, const std::string& path) {
  if (path.empty()) return make_error(error_kind::invalid_argument, "an empty path");
  if (path.find('\0') != std::string::npos)
    return make_error(error_kind::invalid_argument, "a NUL byte in the path");
  if (path.size() > 4095) return make_error(error_kind::invalid_argument, "the path is too long");
  return path.front() == '/' ? path : at.workspace + "/" + path;
}

std::unexpected<error> path_error(int err, const std::string& path) {
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return make_error(error_kind::not_found, "{}: no such file or directory", path);
    case EACCES:
    case EPERM:
    case EROFS:
      return make_error(error_kind::permission, "{}: {} (the sandbox may not)", path,
                        std::strerror(err));
    case EISDIR:
      return make_error(error_kind::invalid_argument, "{}: is a directory", path);
    case ELOOP:
      return make_error(error_kind::invalid_argument, "{}: too many symbolic links", path);
    case EXDEV:
      return make_error(error_kind::permission, "{}: reaches outside the sandbox", path);
    default:
      return sys_error(err, path);
  }
}

// Makes every missing directory of `p`'s parents, each resolved inside the root.
status make_parents(const place& at, const std::string& p) {
  for (size_t slash = p.find('/', 1); slash != std::string::npos; slash = p.find('/', slash + 1)) {
    const std::string dir = p.substr(0, slash);
    unique_fd d(
        sys::open_beneath(at.root_fd, dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC, in_root));
    if (d) continue;
    if (errno != ENOENT) return path_error(errno, dir);
    const size_t cut = dir.rfind('/');
    const std::string parent = cut == 0 ? "/" : dir.substr(0, cut);
    unique_fd pd(
        sys::open_beneath(at.root_fd, parent.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC, in_root));
    if (!pd) return path_error(errno, parent);
    if (::mkdirat(pd.get(), dir.c_str() + cut + 1, 0755) != 0 && errno != EEXIST)
      return path_error(errno, dir);
  }
  return {};
}

file_entry::kind kind_of(mode_t m) {
  if (S_ISREG(m)) return file_entry::kind::file;
  if (S_ISDIR(m)) return file_entry::kind::dir;
  if (S_ISLNK(m)) return file_entry::kind::symlink;
  return file_entry::kind::other;
}

file_entry entry_of(std::string name, const struct stat& st) {
  return {std::move(name), kind_of(st.st_mode), static_cast<uint64_t>(st.st_size),
          static_cast<uint32_t>(st.st_mode & 07777), static_cast<int64_t>(st.st_mtime)};
}

}  // namespace

result<file_content> read(const place& at, const std::string& path, uint64_t max_bytes) {
  const std::string p = EB_TRY(inside(at, path));
  as_sandbox_user ids(at);
  // Looked at before it is opened: opening a device or a FIFO has effects of its own (a
  // terminal, a tape, a writer waiting), and reading one may never end.
  unique_fd where(sys::open_beneath(at.root_fd, p.c_str(), O_PATH | O_CLOEXEC, in_root));
  if (!where) return path_error(errno, path);
  struct stat st {};
  if (::fstat(where.get(), &st) != 0) return sys_error(errno, path);
  if (S_ISDIR(st.st_mode)) return path_error(EISDIR, path);
  if (!S_ISREG(st.st_mode))
    return make_error(error_kind::invalid_argument, "{}: not a regular file", path);
  // The same file, now opened for reading (the sandbox user's permission checked here).
  unique_fd fd(::open(fmt::format("/proc/self/fd/{}", where.get()).c_str(),
                      O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd) return path_error(errno, path);
  file_content out;
  out.size = static_cast<uint64_t>(st.st_size);
  out.mode = static_cast<uint32_t>(st.st_mode & 07777);
  if (out.size > max_bytes) {
    out.too_large = true;
    return out;
  }
  // Read to the end, bounded: the file may grow while it is read.
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sys_error(errno, path);
    if (n == 0) break;
    if (out.data.size() + static_cast<size_t>(n) > max_bytes) {
      out.too_large = true;
      out.data.clear();
      return out;
    }
    out.data.append(buf, static_cast<size_t>(n));
  }
  out.size = out.data.size();
  return out;
}

result<uint64_t> write(const place& at, const std::string& path, std::string_view data,
                       uint32_t mode, bool append, bool parents) {
  const std::string p = EB_TRY(inside(at, path));
  if (p.back() == '/') return path_error(EISDIR, path);
  as_sandbox_user ids(at);
  if (parents) EB_TRY(make_parents(at, p));
  const uint64_t flags =
      O_WRONLY | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | (append ? O_APPEND : O_TRUNC);
  unique_fd fd(sys::open_beneath(at.root_fd, p.c_str(), flags, in_root, mode & 07777));
  if (!fd) return path_error(errno, path);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return sys_error(errno, path);
  if (!S_ISREG(st.st_mode))
    return make_error(error_kind::invalid_argument, "{}: not a regular file", path);
  for (size_t off = 0; off < data.size();) {
    const ssize_t n = ::write(fd.get(), data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return errno == ENOSPC || errno == EFBIG || errno == EDQUOT
                 ? make_error(error_kind::io, "{}: the session's disk is full", path)
                 : sys_error(errno, path);
    off += static_cast<size_t>(n);
  }
  if (::fstat(fd.get(), &st) != 0) return sys_error(errno, path);
  return static_cast<uint64_t>(st.st_size);
}

result<std::vector<file_entry>> list(const place& at, const std::string& path) {
  const std::string p = EB_TRY(inside(at, path));
  as_sandbox_user ids(at);
  unique_fd fd(
      sys::open_beneath(at.root_fd, p.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK, in_root));
  if (!fd) {
    // A symbolic link that resolves nowhere, or a file we may not open: what it is, itself.
    unique_fd self(
        sys::open_beneath(at.root_fd, p.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC, in_root));
    struct stat st {};
    if (!self || ::fstat(self.get(), &st) != 0) return path_error(errno, path);
    const size_t cut = p.rfind('/');
    return std::vector<file_entry>{entry_of(p.substr(cut + 1), st)};
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return sys_error(errno, path);
  if (!S_ISDIR(st.st_mode)) {
    const size_t cut = p.rfind('/');
    return std::vector<file_entry>{entry_of(p.substr(cut + 1), st)};
  }
  DIR* dir = ::fdopendir(fd.get());
  if (!dir) return sys_error(errno, path);
  (void)fd.release();
  std::vector<file_entry> out;
  while (dirent* e = ::readdir(dir)) {
    const std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat est {};
    if (::fstatat(::dirfd(dir), e->d_name, &est, AT_SYMLINK_NOFOLLOW) != 0) continue;
    out.push_back(entry_of(std::string(name), est));
  }
  ::closedir(dir);
  std::sort(out.begin(), out.end(),
            [](const file_entry& a, const file_entry& b) { return a.name < b.name; });
  return out;
}

}  // namespace evalbox::sandbox::live_files
