// Managed home layout (see home.h). Every step uses *at() calls on directory fds opened with
// O_NOFOLLOW, so nothing in the layout can be redirected through a symlink.
#include "sandbox/home/home.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/unique_fd.h"

namespace evalbox::sandbox::home {

namespace fs = std::filesystem;

namespace {

struct owner {
  uid_t uid;
  gid_t gid;
};

status chown_fd(int fd, owner o, const fs::path& shown) {
  if (::fchown(fd, o.uid, o.gid) != 0 && ::geteuid() == 0)
    return sys_error(errno, "chown {}", shown.string());
  return {};
}

// Opens (creating 0700 when missing) each directory of `rel` below `root`.
result<unique_fd> open_dirs(int root, const fs::path& rel, owner o, const fs::path& shown) {
  unique_fd cur(::fcntl(root, F_DUPFD_CLOEXEC, 0));
  if (!cur) return sys_error(errno, "dup");
  fs::path at = shown;
  for (const auto& part : rel) {
    at /= part;
    if (::mkdirat(cur.get(), part.c_str(), 0700) == 0) {
      unique_fd next(
          ::openat(cur.get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!next) return sys_error(errno, "open {}", at.string());
      EB_TRY(chown_fd(next.get(), o, at));
      cur = std::move(next);
    } else if (errno == EEXIST) {
      unique_fd next(
          ::openat(cur.get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!next) return sys_error(errno, "open {} (not a directory?)", at.string());
      cur = std::move(next);
    } else {
      return sys_error(errno, "mkdir {}", at.string());
    }
  }
  return cur;
}

status write_at(int dir, const fs::path& name, std::string_view content, mode_t mode, owner o,
                const fs::path& shown) {
  unique_fd fd(
      ::openat(dir, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) return sys_error(errno, "create {}", shown.string());
  while (!content.empty()) {
    ssize_t n = ::write(fd.get(), content.data(), content.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sys_error(errno, "write {}", shown.string());
    content.remove_prefix(static_cast<size_t>(n));
  }
  EB_TRY(chown_fd(fd.get(), o, shown));
  if (::fchmod(fd.get(), mode & 0777) != 0) return sys_error(errno, "chmod {}", shown.string());
  return {};
}

}  // namespace

status lay_out(const fs::path& dir, const home_layout& layout,
               const std::vector<secret_mount>& secrets, uid_t uid, gid_t gid) {
  owner o{uid, gid};
  if (::mkdir(dir.c_str(), 0700) != 0) return sys_error(errno, "mkdir {}", dir.string());
  unique_fd root(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!root) return sys_error(errno, "open {}", dir.string());
  EB_TRY(chown_fd(root.get(), o, dir));
  for (const auto& d : layout.directories) {
    if (!is_safe_relative(d))
      return make_error(error_kind::invalid_argument, "home directory {} is not a safe path",
                        d.string());
    EB_TRY(open_dirs(root.get(), d, o, dir));
  }
  for (const auto& f : layout.files) {
    if (!is_safe_relative(f.path))
      return make_error(error_kind::invalid_argument, "home file {} is not a safe path",
                        f.path.string());
    auto parent = EB_TRY(open_dirs(root.get(), f.path.parent_path(), o, dir));
    EB_TRY(write_at(parent.get(), f.path.filename(), f.content, f.mode, o, dir / f.path));
  }
  for (const auto& s : secrets) {
    if (s.host_only) continue;  // never inside
    if (!is_safe_relative(s.target))
      return make_error(error_kind::invalid_argument, "credential target {} is not a safe path",
                        s.target.string());
    auto parent = EB_TRY(open_dirs(root.get(), s.target.parent_path(), o, dir));
    EB_TRY(write_at(parent.get(), s.target.filename(), "", 0600, o, dir / s.target));
  }
  return {};
}

}  // namespace evalbox::sandbox::home
