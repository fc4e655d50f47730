// Freezing an overlay upper into a read-only layer (layers.h).
//
// The walk holds an fd for each directory on the way down, source and copy alike, and reaches
// every entry relative to them: nothing is looked up by path below the two roots, no symlink is
// followed (fstatat and readlinkat see links, every open has O_NOFOLLOW), and every name
// created is a readdir name (no '/') in a directory this walk made. The upper may change under
// the walk: each entry is stat'ed, then opened, then judged again by what the open fd is.
#include "sandbox/live/layers.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <string_view>
#include <utility>

#include "base/fs.h"
#include "base/unique_fd.h"

namespace evalbox::sandbox {
inline namespace live {
namespace {

namespace fs = std::filesystem;

constexpr int dir_flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;

// The opaque marks overlayfs reads: from the upper of a userxattr overlay (ours) or of one
// mounted by real root in the initial namespace, and the one the layer's readers use.
constexpr std::string_view user_opaque = "user.overlay.opaque";
constexpr std::string_view trusted_opaque = "trusted.overlay.opaque";

// One freeze in progress: its roots (for messages), whether owners are kept, what was done.
struct freezer {
  std::string from, to;
  bool keep_owner = false;  // only root may give a file to someone else
  frozen_layer out;
  std::vector<char> buffer;  // for the read/write fallback, made when first needed

  [[nodiscard]] std::string src(const std::string& rel) const {
    return rel.empty() ? from : from + "/" + rel;
  }
  [[nodiscard]] std::string dst(const std::string& rel) const {
    return rel.empty() ? to : to + "/" + rel;
  }
};

std::string join(const std::string& rel, const std::string& name) {
  return rel.empty() ? name : rel + "/" + name;
}

// The names of the xattrs on `fd`; none where the filesystem has no xattrs.
result<std::vector<std::string>> list_xattrs(int fd, const std::string& shown) {
  std::string names;
  for (;;) {
    const ssize_t size = ::flistxattr(fd, nullptr, 0);
    if (size < 0 && errno == ENOTSUP) return std::vector<std::string>{};
    if (size < 0) return sys_error(errno, "flistxattr({})", shown);
    names.resize(static_cast<size_t>(size));
    const ssize_t got = ::flistxattr(fd, names.data(), names.size());
    if (got < 0 && errno == ERANGE) continue;  // one was added in between
    if (got < 0) return sys_error(errno, "flistxattr({})", shown);
    names.resize(static_cast<size_t>(got));
    break;
  }
  std::vector<std::string> out;
  for (size_t at = 0; at < names.size();) {
    const size_t end = names.find('\0', at);
    const size_t stop = end == std::string::npos ? names.size() : end;
    if (stop > at) out.emplace_back(names, at, stop - at);
    at = stop + 1;
  }
  return out;
}

// The value of xattr `name` on `fd`; none when it went away since it was listed.
result<std::optional<std::string>> get_xattr(int fd, const std::string& name,
                                             const std::string& shown) {
  for (;;) {
    const ssize_t size = ::fgetxattr(fd, name.c_str(), nullptr, 0);
    if (size < 0 && errno == ENODATA) return std::nullopt;
    if (size < 0) return sys_error(errno, "fgetxattr({}, {})", shown, name);
    std::string value(static_cast<size_t>(size), '\0');
    const ssize_t got = ::fgetxattr(fd, name.c_str(), value.data(), value.size());
    if (got < 0 && errno == ERANGE) continue;  // it grew in between
    if (got < 0 && errno == ENODATA) return std::nullopt;
    if (got < 0) return sys_error(errno, "fgetxattr({}, {})", shown, name);
    value.resize(static_cast<size_t>(got));
    return value;
  }
}

status set_xattr(int fd, std::string_view name, const std::string& value,
                 const std::string& shown) {
  if (::fsetxattr(fd, std::string(name).c_str(), value.data(), value.size(), 0) != 0)
    return sys_error(errno, "fsetxattr({}, {})", shown, name);
  return {};
}

// The xattrs overlayfs and programs read from the layer. user.* is the namespace of userxattr
// overlays and of programs, copied as is; trusted.overlay.opaque becomes user.overlay.opaque,
// the mark the layer's readers look for. "y" is the only value overlayfs writes ("x" marks
// trusted xattr whiteouts, which are not carried over, so it would mark nothing). Not copied:
// trusted.* (root's overlay bookkeeping: origins and redirects of its own layers), security.*
// (labels and file capabilities are the host's to give, not a snapshot's) and system.* (ACLs:
// the mode bits are kept).
status copy_xattrs(int src, int dst, const std::string& src_shown, const std::string& dst_shown) {
  const auto names = EB_TRY(list_xattrs(src, src_shown));
  bool user_marked = false;
  for (const auto& name : names) user_marked = user_marked || name == user_opaque;
  for (const auto& name : names) {
    const bool translated = !user_marked && name == trusted_opaque;
    if (!name.starts_with("user.") && !translated) continue;
    const auto value = EB_TRY(get_xattr(src, name, src_shown));
    if (!value) continue;
    if (translated) {
      if (*value == "y") EB_TRY(set_xattr(dst, user_opaque, *value, dst_shown));
      continue;
    }
    EB_TRY(set_xattr(dst, name, *value, dst_shown));
  }
  return {};
}

// Owner (when kept), mode and times of the source open at `src` onto `dst`, in that order:
// chown may clear mode bits, and both change the ctime only.
status copy_metadata(const freezer& f, int src, int dst, mode_t mode_mask,
                     const std::string& src_shown, const std::string& dst_shown) {
  struct stat st {};
  if (::fstat(src, &st) != 0) return sys_error(errno, "fstat({})", src_shown);
  if (f.keep_owner && ::fchown(dst, st.st_uid, st.st_gid) != 0)
    return sys_error(errno, "fchown({}, {}, {})", dst_shown, st.st_uid, st.st_gid);
  if (::fchmod(dst, st.st_mode & mode_mask) != 0)
    return sys_error(errno, "fchmod({}, {:o})", dst_shown, st.st_mode & mode_mask);
  const struct timespec times[2] = {st.st_atim, st.st_mtim};
  if (::futimens(dst, times) != 0) return sys_error(errno, "futimens({})", dst_shown);
  return {};
}

// The same for an entry that cannot be opened (a symlink, a whiteout), by name in `dst_dir`.
status copy_metadata_at(const freezer& f, const struct stat& st, int dst_dir,
                        const std::string& name, const std::string& dst_shown) {
  if (f.keep_owner &&
      ::fchownat(dst_dir, name.c_str(), st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW) != 0)
    return sys_error(errno, "fchownat({}, {}, {})", dst_shown, st.st_uid, st.st_gid);
  const struct timespec times[2] = {st.st_atim, st.st_mtim};
  if (::utimensat(dst_dir, name.c_str(), times, AT_SYMLINK_NOFOLLOW) != 0)
    return sys_error(errno, "utimensat({})", dst_shown);
  return {};
}

// Copies from the file offsets of `in` to its end: copy_file_range (which may share extents
// on the same filesystem), else read and write where the kernel will not (EXDEV between
// filesystems of different types, or a filesystem without it).
status copy_contents(freezer& f, int in, int out, const std::string& src_shown,
                     const std::string& dst_shown) {
  for (;;) {
    const ssize_t n = ::copy_file_range(in, nullptr, out, nullptr, size_t{1} << 30, 0);
    if (n == 0) return {};
    if (n > 0) {
      f.out.bytes += static_cast<uint64_t>(n);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP) break;
    return sys_error(errno, "copy_file_range({}, {})", src_shown, dst_shown);
  }
  if (f.buffer.empty()) f.buffer.resize(size_t{128} << 10);
  for (;;) {
    const ssize_t n = ::read(in, f.buffer.data(), f.buffer.size());
    if (n == 0) return {};
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sys_error(errno, "read({})", src_shown);
    for (ssize_t done = 0; done < n;) {
      const ssize_t w = ::write(out, f.buffer.data() + done, static_cast<size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return sys_error(errno, "write({})", dst_shown);
      done += w;
    }
    f.out.bytes += static_cast<uint64_t>(n);
  }
}

status copy_entry(freezer& f, int src_dir, int dst_dir, const std::string& name,
                  const std::string& rel, int depth);

// Fills the new directory `out` from the source directory `in` (at `rel`): its xattrs first
// (an opaque mark before anything else), then its entries, then its owner, mode and times, so
// that a read-only directory is filled before it becomes one and keeps its mtime.
status fill_dir(freezer& f, unique_fd in, int out, const std::string& rel, int depth) {
  const std::string src_shown = f.src(rel), dst_shown = f.dst(rel);
  EB_TRY(copy_xattrs(in.get(), out, src_shown, dst_shown));
  DIR* raw = ::fdopendir(in.get());
  if (!raw) return sys_error(errno, "fdopendir({})", src_shown);
  const int src = in.release();  // the stream owns it now; one fd per level, not two
  const unique_dir dir(raw);
  for (;;) {
    errno = 0;
    const dirent* ent = ::readdir(dir.get());
    if (!ent && errno != 0) return sys_error(errno, "readdir({})", src_shown);
    if (!ent) break;
    const std::string name = ent->d_name;
    if (name == "." || name == "..") continue;
    EB_TRY(copy_entry(f, src, out, name, join(rel, name), depth));
  }
  return copy_metadata(f, src, out, 07777, src_shown, dst_shown);
}

status copy_dir(freezer& f, unique_fd in, int dst_dir, const std::string& name,
                const std::string& rel, int depth) {
  // A tree deeper than this was made to exhaust the walk (or its fds): the snapshot fails.
  if (depth > max_layer_depth)
    return make_error(error_kind::invalid_argument, "{}: deeper than {} directories", f.src(rel),
                      max_layer_depth);
  const std::string dst_shown = f.dst(rel);
  // 0700 while it is filled: ours to write even when the source is read-only.
  if (::mkdirat(dst_dir, name.c_str(), 0700) != 0)
    return sys_error(errno, "mkdirat({})", dst_shown);
  ++f.out.entries;
  unique_fd out(::openat(dst_dir, name.c_str(), dir_flags));
  if (!out) return sys_error(errno, "openat({})", dst_shown);
  return fill_dir(f, std::move(in), out.get(), rel, depth);
}

status copy_file(freezer& f, unique_fd in, int dst_dir, const std::string& name,
                 const std::string& rel) {
  const std::string src_shown = f.src(rel), dst_shown = f.dst(rel);
  unique_fd out(
      ::openat(dst_dir, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!out) return sys_error(errno, "openat({})", dst_shown);
  ++f.out.entries;
  EB_TRY(copy_contents(f, in.get(), out.get(), src_shown, dst_shown));
  EB_TRY(copy_xattrs(in.get(), out.get(), src_shown, dst_shown));
  // setuid and setgid are dropped: a layer must not hand a program privileges (an owner
  // kept by root, with its setuid bit, would be root's own file in the next sandbox).
  return copy_metadata(f, in.get(), out.get(), 07777 & ~(S_ISUID | S_ISGID), src_shown, dst_shown);
}

status copy_symlink(freezer& f, const struct stat& st, int src_dir, int dst_dir,
                    const std::string& name, const std::string& rel) {
  std::string target(static_cast<size_t>(st.st_size) + 1, '\0');
  for (;;) {
    const ssize_t n = ::readlinkat(src_dir, name.c_str(), target.data(), target.size());
    if (n < 0 && errno == ENOENT) return {};  // removed since it was listed
    if (n < 0) return sys_error(errno, "readlinkat({})", f.src(rel));
    if (static_cast<size_t>(n) < target.size()) {
      target.resize(static_cast<size_t>(n));
      break;
    }
    target.resize(target.size() * 2);  // it was replaced by a longer one: read it whole
  }
  const std::string dst_shown = f.dst(rel);
  if (::symlinkat(target.c_str(), dst_dir, name.c_str()) != 0)
    return sys_error(errno, "symlinkat({})", dst_shown);
  ++f.out.entries;
  return copy_metadata_at(f, st, dst_dir, name, dst_shown);
}

// A whiteout stays a 0/0 character device, which Linux 5.8 and later let anyone create. The
// other form overlayfs reads, an empty file with an overlay.whiteout xattr, came with 6.7:
// a kernel that refuses the device cannot read that form either, so EPERM is an error.
status copy_whiteout(freezer& f, const struct stat& st, int dst_dir, const std::string& name,
                     const std::string& rel) {
  const std::string dst_shown = f.dst(rel);
  const mode_t mode = st.st_mode & 07777;
  if (::mknodat(dst_dir, name.c_str(), S_IFCHR | mode, makedev(0, 0)) != 0) {
    if (errno == EPERM)
      return make_error(error_kind::unsupported,
                        "mknodat({}, whiteout): EPERM (this kernel lets only CAP_MKNOD create "
                        "whiteouts; Linux 5.8 and later let anyone)",
                        dst_shown);
    return sys_error(errno, "mknodat({}, whiteout)", dst_shown);
  }
  ++f.out.entries;
  // mknod applied the umask. The node is ours and no link: fchmodat cannot be led elsewhere.
  if (::fchmodat(dst_dir, name.c_str(), mode, 0) != 0)
    return sys_error(errno, "fchmodat({}, {:o})", dst_shown, mode);
  return copy_metadata_at(f, st, dst_dir, name, dst_shown);
}

// One entry of the source directory `src_dir`, `rel` below the root. Its type is looked at
// twice: by name (links and whiteouts are never opened), then, for what is opened, on the fd —
// an entry replaced in between is copied as what was opened, and a special file opened in a
// race (O_NONBLOCK: a fifo does not wait for a writer) is left out like any other.
status copy_entry(freezer& f, int src_dir, int dst_dir, const std::string& name,
                  const std::string& rel, int depth) {
  struct stat st {};
  if (::fstatat(src_dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return {};  // removed since it was listed
    return sys_error(errno, "fstatat({})", f.src(rel));
  }
  if (S_ISLNK(st.st_mode)) return copy_symlink(f, st, src_dir, dst_dir, name, rel);
  if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0))
    return copy_whiteout(f, st, dst_dir, name, rel);
  if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
    f.out.skipped.push_back(rel);
    return {};
  }
  unique_fd in(
      ::openat(src_dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC));
  if (!in && errno == ENOENT) return {};
  if (!in) return sys_error(errno, "openat({})", f.src(rel));
  if (::fstat(in.get(), &st) != 0) return sys_error(errno, "fstat({})", f.src(rel));
  if (S_ISDIR(st.st_mode)) return copy_dir(f, std::move(in), dst_dir, name, rel, depth + 1);
  if (S_ISREG(st.st_mode)) return copy_file(f, std::move(in), dst_dir, name, rel);
  f.out.skipped.push_back(rel);
  return {};
}

// Gives every directory of the partial copy back to its owner (u+rwx) so that it can be
// removed: without root, a directory the copy made read-only cannot be emptied. Best effort;
// the removal reports what is left.
void make_removable(int dir, int depth) {
  if (depth > max_layer_depth + 1) return;
  auto stream = read_dir_at(dir, "");
  if (!stream) return;
  while (const dirent* ent = ::readdir(stream->get())) {
    const std::string_view name = ent->d_name;
    if (name == "." || name == "..") continue;
    struct stat st {};
    if (::fstatat(dir, ent->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode))
      continue;
    (void)!::fchmodat(dir, ent->d_name, 0700, 0);
    const unique_fd sub(::openat(dir, ent->d_name, dir_flags));
    if (sub) make_removable(sub.get(), depth + 1);
  }
}

// Removes the partial copy at `to`, the error that stopped it kept first.
error discard(const std::string& to, int out, error why) {
  if (::geteuid() != 0 && out >= 0) {
    (void)!::fchmod(out, 0700);
    make_removable(out, 1);
  }
  if (auto removed = remove_tree(to); !removed)
    why.message +=
        fmt::format(" (and removing the partial copy failed: {})", removed.error().message);
  return why;
}

}  // namespace

result<frozen_layer> freeze_layer(const fs::path& upper, const fs::path& to) {
  const fs::path from = normalize(upper), dest = normalize(to);
  if (is_within(dest, from))
    return make_error(error_kind::invalid_argument, "freeze {} into {}: the copy would be inside",
                      from.string(), dest.string());
  if (dest == dest.root_path())
    return make_error(error_kind::invalid_argument, "freeze into {}: not a new directory",
                      dest.string());

  unique_fd in(::open(from.c_str(), dir_flags));
  if (!in) return sys_error(errno, "open({})", from.string());
  const fs::path parent = dest.parent_path();
  const unique_fd parent_fd(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!parent_fd) return sys_error(errno, "open({})", parent.string());
  const std::string name = dest.filename().string();
  // Made here and only here: an existing `to` is an error and is left as it is.
  if (::mkdirat(parent_fd.get(), name.c_str(), 0700) != 0)
    return sys_error(errno, "mkdirat({})", dest.string());

  freezer f{.from = from.string(), .to = dest.string(), .keep_owner = ::geteuid() == 0};
  const unique_fd out(::openat(parent_fd.get(), name.c_str(), dir_flags));
  if (!out) return std::unexpected(discard(f.to, -1, sys_error(errno, "openat({})", f.to).error()));
  if (auto filled = fill_dir(f, std::move(in), out.get(), "", 0); !filled)
    return std::unexpected(discard(f.to, out.get(), std::move(filled).error()));
  return std::move(f.out);
}

}  // namespace live
}  // namespace evalbox::sandbox
