// Whole-file I/O, durable writes and mount-aware tree removal.
#include "base/fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <ostream>
#include <streambuf>
#include <vector>

#include "base/unique_fd.h"

namespace evalbox {
inline namespace base {

namespace fs = std::filesystem;

result<std::string> read_fd(int fd, size_t max_bytes, const fs::path& shown) {
  // Read straight into the string, sized from the file's length where it has one (the plan, a
  // record): no staging buffer, whose 64 KiB of fresh stack a new process would fault in page
  // by page, and no copy. Files whose size says nothing (/proc, cgroup files, pipes) grow it.
  struct stat st {};
  size_t want = 4096;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
    want = std::min(static_cast<size_t>(st.st_size), max_bytes) + 1;  // +1: end of file in one
  // Never more than one byte past the limit: that byte is what says it is over.
  const size_t cap = max_bytes == SIZE_MAX ? max_bytes : max_bytes + 1;
  std::string out;
  size_t used = 0;
  for (;;) {
    if (used == out.size()) out.resize(std::min(std::max(want, used + used / 2 + 1), cap));
    const ssize_t n = ::read(fd, out.data() + used, out.size() - used);
    if (n < 0) {
      if (errno == EINTR) continue;
      return sys_error(errno, "read {}", shown.string());
    }
    if (n == 0) break;
    used += static_cast<size_t>(n);
    if (used > max_bytes)
      return make_error(error_kind::invalid_argument, "{} is larger than {} bytes", shown.string(),
                        max_bytes);
  }
  out.resize(used);
  return out;
}

result<std::string> read_file(const fs::path& path, size_t max_bytes) {
  unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return sys_error(errno, "open {}", path.string());
  return read_fd(fd.get(), max_bytes, path);
}

namespace {

status write_all(int fd, std::string_view data, const fs::path& path) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return sys_error(errno, "write {}", path.string());
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return {};
}

status fsync_dir(const fs::path& dir) {
  unique_fd fd(::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return sys_error(errno, "open {}", dir.string());
  if (::fsync(fd.get()) != 0) return sys_error(errno, "fsync {}", dir.string());
  return {};
}

// An ostream buffer over a file descriptor: 64 KiB writes; the first failed write is kept.
class fd_streambuf final : public std::streambuf {
 public:
  explicit fd_streambuf(int fd) : fd_(fd) { setp(buf_.data(), buf_.data() + buf_.size()); }
  [[nodiscard]] int failed_errno() const noexcept { return errno_; }

 protected:
  int_type overflow(int_type c) override {
    if (!flush()) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  int sync() override { return flush() ? 0 : -1; }

 private:
  bool flush() {
    const char* p = pbase();
    size_t n = static_cast<size_t>(pptr() - pbase());
    while (n > 0) {
      ssize_t w = ::write(fd_, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) {
        errno_ = errno;
        return false;
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
    setp(buf_.data(), buf_.data() + buf_.size());
    return true;
  }

  int fd_;
  int errno_ = 0;
  std::array<char, 64 * 1024> buf_;
};

}  // namespace

status write_file_streamed(const fs::path& path, const std::function<status(std::ostream&)>& write,
                           mode_t mode) {
  fs::path tmp = path;
  tmp += ".tmp-" + random_suffix();
  unique_fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
  if (!fd) return sys_error(errno, "create {}", tmp.string());
  auto discard = [&](error e) -> status {
    ::unlink(tmp.c_str());
    return std::unexpected(std::move(e));
  };
  {
    auto buf = std::make_unique<fd_streambuf>(fd.get());
    std::ostream out(buf.get());
    if (auto s = write(out); !s) return discard(std::move(s).error());
    out.flush();
    if (!out) return discard(sys_error(buf->failed_errno(), "write {}", tmp.string()).error());
  }
  if (::fsync(fd.get()) != 0) return discard(sys_error(errno, "fsync {}", tmp.string()).error());
  fd.reset();
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    return discard(sys_error(errno, "rename {} -> {}", tmp.string(), path.string()).error());
  return fsync_dir(path.parent_path());
}

status write_file(const fs::path& path, std::string_view data, mode_t mode) {
  unique_fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode));
  if (!fd) return sys_error(errno, "create {}", path.string());
  return write_all(fd.get(), data, path);
}

std::string random_suffix() {
  uint64_t v = 0;
  if (::getrandom(&v, sizeof v, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof v)) {
    // Early boot (no entropy yet): unique enough for a temporary name with O_EXCL.
    static std::atomic<uint64_t> counter{0};
    v = (static_cast<uint64_t>(::getpid()) << 32) ^ static_cast<uint64_t>(::time(nullptr)) ^
        (++counter << 16);
  }
  return fmt::format("{:016x}", v);
}

namespace {

// `data` into a temporary sibling of `path` (fsynced when `sync`), renamed over `path`; the
// temporary is removed on any failure.
status write_temporary_and_rename(const fs::path& path, std::string_view data, mode_t mode,
                                  bool sync) {
  fs::path tmp = path;
  tmp += ".tmp-" + random_suffix();
  {
    unique_fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
    if (!fd) return sys_error(errno, "create {}", tmp.string());
    if (auto s = write_all(fd.get(), data, tmp); !s) {
      ::unlink(tmp.c_str());
      return s;
    }
    if (sync && ::fsync(fd.get()) != 0) {
      int err = errno;
      ::unlink(tmp.c_str());
      return sys_error(err, "fsync {}", tmp.string());
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return sys_error(err, "rename {} -> {}", tmp.string(), path.string());
  }
  return {};
}

}  // namespace

status write_file_atomic(const fs::path& path, std::string_view data, mode_t mode) {
  EB_TRY(write_temporary_and_rename(path, data, mode, /*sync=*/true));
  return fsync_dir(path.parent_path());
}

status write_file_replace(const fs::path& path, std::string_view data, mode_t mode) {
  return write_temporary_and_rename(path, data, mode, /*sync=*/false);
}

status sync_durable(const fs::path& dir, const std::vector<fs::path>& files) {
  std::vector<unique_fd> fds;
  fds.reserve(files.size());
  for (const auto& f : files) {
    unique_fd fd(::open(f.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return sys_error(errno, "open {}", f.string());
    // Only a hint (the data of all of them in flight before the first sync waits): its
    // failure changes nothing that the fdatasync below does not report.
    (void)::sync_file_range(fd.get(), 0, 0, SYNC_FILE_RANGE_WRITE);
    fds.push_back(std::move(fd));
  }
  for (size_t i = 0; i < fds.size(); ++i) {
    if (::fdatasync(fds[i].get()) != 0) return sys_error(errno, "fsync {}", files[i].string());
  }
  return fsync_dir(dir);
}

status append_durable(const fs::path& path, std::string_view data) {
  unique_fd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!fd) return sys_error(errno, "open {}", path.string());
  // Appenders of one file (shard processes) take turns: what is checked below stays true
  // until this write is done. Released when fd closes.
  while (::flock(fd.get(), LOCK_EX) != 0) {
    if (errno != EINTR) return sys_error(errno, "flock {}", path.string());
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return sys_error(errno, "stat {}", path.string());
  // A torn last line (a crash or a full disk mid-append, or only its newline missing) is no
  // line to any reader of the file: it is cut off, so that it can neither swallow the start of
  // this one nor, completed by a newline, become a line after its readers moved on (a record
  // counted as missing and written again would be there twice).
  off_t size = st.st_size;
  char buf[4096];
  for (off_t end = size; end > 0;) {
    const off_t from = std::max<off_t>(0, end - static_cast<off_t>(sizeof buf));
    const auto want = static_cast<size_t>(end - from);
    if (::pread(fd.get(), buf, want, from) != static_cast<ssize_t>(want))
      return sys_error(errno, "read {}", path.string());
    const void* nl = ::memrchr(buf, '\n', want);
    if (nl) {
      size = from + (static_cast<const char*>(nl) - buf) + 1;
      break;
    }
    end = from;
    if (end == 0) size = 0;
  }
  if (size != st.st_size && ::ftruncate(fd.get(), size) != 0)
    return sys_error(errno, "truncate the torn last line of {}", path.string());
  if (auto w = write_all(fd.get(), data, path); !w) {
    // Never leave a partial line of ours (ENOSPC after some bytes): cut it back off.
    (void)!::ftruncate(fd.get(), size);
    return w;
  }
  // The line is whole: the next appender may go on while this one waits for the disk (an
  // fdatasync flushes every dirty page of the file, the lines before ours included).
  (void)::flock(fd.get(), LOCK_UN);
  if (::fdatasync(fd.get()) != 0) return sys_error(errno, "fsync {}", path.string());
  return {};
}

status make_dirs(const fs::path& path, mode_t mode) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return {};
  if (!path.parent_path().empty() && path.parent_path() != path)
    EB_TRY(make_dirs(path.parent_path(), mode));
  if (::mkdir(path.c_str(), mode) != 0 && errno != EEXIST)
    return sys_error(errno, "mkdir {}", path.string());
  return {};
}

result<unique_dir> read_dir_at(int dirfd, const fs::path& shown) {
  unique_fd dup(::fcntl(dirfd, F_DUPFD_CLOEXEC, 0));
  if (!dup) return sys_error(errno, "dup {}", shown.string());
  unique_dir dir(::fdopendir(dup.get()));
  if (!dir) return sys_error(errno, "opendir {}", shown.string());
  (void)dup.release();  // the stream owns it now
  return dir;
}

namespace {

// The id of the mount that the file open at `fd` is on.
//
// remove_tree tells mount points apart by this rather than with openat2(RESOLVE_NO_XDEV): both
// stop at a bind mount of the same filesystem, but openat2 is a raw syscall(2), which only
// sandbox/sys makes, and base may not include sys (scripts/check-layering); statx has
// a glibc wrapper.
result<uint64_t> mount_id_of(int fd, const fs::path& shown) {
  struct statx sx {};
  if (::statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_MNT_ID, &sx) != 0)
    return sys_error(errno, "statx {}", shown.string());
  if (!(sx.stx_mask & STATX_MNT_ID))
    return make_error(error_kind::unsupported,
                      "statx {}: the kernel reports no mount id (Linux 5.8 and later do), so a "
                      "mount point cannot be told from a directory; nothing was removed",
                      shown.string());
  return sx.stx_mnt_id;
}

// Removes the contents of the directory open at `dirfd`, then nothing else. `dev` and
// `mount_id` are the tree's: a directory on another filesystem, or on another mount of the
// same one (a bind mount), is a mount point, never descended into: busy.
status remove_contents(int dirfd, dev_t dev, uint64_t mount_id, const fs::path& shown) {
  auto dir = EB_TRY(read_dir_at(dirfd, shown));
  while (dirent* ent = ::readdir(dir.get())) {
    std::string_view name = ent->d_name;
    if (name == "." || name == "..") continue;
    const fs::path here = shown / name;
    struct stat st {};
    if (::fstatat(dirfd, ent->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;
      return sys_error(errno, "stat {}", here.string());
    }
    if (!S_ISDIR(st.st_mode)) {
      if (::unlinkat(dirfd, ent->d_name, 0) != 0 && errno != ENOENT)
        return sys_error(errno, "unlink {}", here.string());
      continue;
    }
    auto mount_point = [&] {
      return make_error(error_kind::busy, "remove {}: is a mount point", here.string());
    };
    if (st.st_dev != dev) return mount_point();
    constexpr int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
    unique_fd sub(::openat(dirfd, ent->d_name, flags));
    // A directory of ours that we may not read (made 0000 by a program in the sandbox, or
    // overlayfs's work/work when it was mounted in a user namespace): without root nothing
    // overrides its mode, so it is given back to us first.
    if (!sub && errno == EACCES && st.st_uid == ::geteuid() &&
        ::fchmodat(dirfd, ent->d_name, 0700, 0) == 0)
      sub.reset(::openat(dirfd, ent->d_name, flags));
    if (!sub) return sys_error(errno, "open {}", here.string());
    if (EB_TRY(mount_id_of(sub.get(), here)) != mount_id) return mount_point();
    EB_TRY(remove_contents(sub.get(), dev, mount_id, here));
    if (::unlinkat(dirfd, ent->d_name, AT_REMOVEDIR) != 0 && errno != ENOENT)
      return sys_error(errno, "rmdir {}", here.string());
  }
  return {};
}

}  // namespace

status remove_tree(const fs::path& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return {};
    return sys_error(errno, "stat {}", path.string());
  }
  if (!S_ISDIR(st.st_mode)) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT)
      return sys_error(errno, "unlink {}", path.string());
    return {};
  }
  unique_fd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return sys_error(errno, "open {}", path.string());
  const uint64_t mount_id = EB_TRY(mount_id_of(fd.get(), path));
  EB_TRY(remove_contents(fd.get(), st.st_dev, mount_id, path));
  if (::rmdir(path.c_str()) != 0 && errno != ENOENT)
    return sys_error(errno, "rmdir {}", path.string());
  return {};
}

fs::path normalize(const fs::path& path) {
  fs::path abs = path.is_absolute() ? path : fs::current_path() / path;
  fs::path norm = abs.lexically_normal();
  // Drop a trailing separator so "/a/b/" and "/a/b" compare equal.
  if (norm.has_relative_path() && norm.filename().empty()) norm = norm.parent_path();
  return norm;
}

bool is_within(const fs::path& path, const fs::path& prefix) {
  fs::path p = normalize(path);
  fs::path q = normalize(prefix);
  auto pi = p.begin();
  for (auto qi = q.begin(); qi != q.end(); ++qi, ++pi) {
    if (pi == p.end() || *pi != *qi) return false;
  }
  return true;
}

bool is_normal_absolute(std::string_view path) {
  if (path.empty() || path.front() != '/') return false;
  if (path.size() == 1) return true;
  if (path.back() == '/') return false;
  size_t start = 1;  // each component: path[start, end)
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    const std::string_view part = path.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}

bool is_safe_relative(const fs::path& rel) {
  if (rel.empty() || rel.is_absolute() || rel.has_root_name()) return false;
  for (const auto& part : rel) {
    if (part == ".." || part.empty() || part == ".") return false;
  }
  return true;
}

namespace {

// Walks `rel` component by component from `root_fd` with O_NOFOLLOW; a symlink met on the way
// restarts the walk from the root with its target spliced in (at most 40 times, like the
// kernel). Returns the fd of the parent directory and the final name.
struct walk_state {
  unique_fd dir;
  std::string name;  // final component ("" for the root itself)
};

result<walk_state> walk_beneath(int root_fd, const fs::path& rel, bool follow_final, int& hops) {
  std::vector<std::string> parts;
  for (const auto& p : rel.lexically_normal()) {
    std::string s = p.string();
    if (s.empty() || s == "." || s == "/") continue;
    if (s == "..") {
      if (!parts.empty()) parts.pop_back();
      continue;
    }
    parts.push_back(s);
  }
  unique_fd dir(::fcntl(root_fd, F_DUPFD_CLOEXEC, 0));
  if (!dir) return sys_error(errno, "dup");
  if (parts.empty()) return walk_state{std::move(dir), ""};
  fs::path walked;
  for (size_t i = 0; i < parts.size(); ++i) {
    bool last = i + 1 == parts.size();
    struct stat st {};
    if (::fstatat(dir.get(), parts[i].c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT && last) return walk_state{std::move(dir), parts[i]};
      if (errno == ENOENT || errno == ENOTDIR) return walk_state{unique_fd(), ""};
      return sys_error(errno, "stat {}", (walked / parts[i]).string());
    }
    if (S_ISLNK(st.st_mode) && (!last || follow_final)) {
      if (++hops > 40)
        return make_error(error_kind::invalid_argument, "{}: too many symlinks", rel.string());
      char buf[4096];
      ssize_t n = ::readlinkat(dir.get(), parts[i].c_str(), buf, sizeof buf - 1);
      if (n < 0) return sys_error(errno, "readlink {}", (walked / parts[i]).string());
      fs::path target(std::string(buf, static_cast<size_t>(n)));
      fs::path rest;
      for (size_t j = i + 1; j < parts.size(); ++j) rest /= parts[j];
      fs::path next = target.is_absolute() ? target.relative_path() : walked / target;
      return walk_beneath(root_fd, next / rest, follow_final, hops);
    }
    if (last) return walk_state{std::move(dir), parts[i]};
    if (!S_ISDIR(st.st_mode)) return walk_state{unique_fd(), ""};
    unique_fd sub(
        ::openat(dir.get(), parts[i].c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!sub) return sys_error(errno, "open {}", (walked / parts[i]).string());
    dir = std::move(sub);
    walked /= parts[i];
  }
  return walk_state{unique_fd(), ""};
}

}  // namespace

result<beneath_entry> lookup_beneath(const fs::path& root, const fs::path& rel, bool follow_final,
                                     bool read_content, size_t max_bytes) {
  unique_fd root_fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd) return sys_error(errno, "open {}", root.string());
  int hops = 0;
  auto w = EB_TRY(walk_beneath(root_fd.get(), rel, follow_final, hops));
  beneath_entry e;
  if (!w.dir) return e;
  struct stat st {};
  const char* name = w.name.empty() ? "." : w.name.c_str();
  if (::fstatat(w.dir.get(), name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return e;
    return sys_error(errno, "stat {}", rel.string());
  }
  e.mode = st.st_mode & 07777;
  if (S_ISDIR(st.st_mode)) {
    e.type = beneath_entry::type_kind::directory;
  } else if (S_ISLNK(st.st_mode)) {
    e.type = beneath_entry::type_kind::symlink;
    char buf[4096];
    ssize_t n = ::readlinkat(w.dir.get(), name, buf, sizeof buf);
    if (n >= 0) e.content.assign(buf, static_cast<size_t>(n));
  } else if (S_ISREG(st.st_mode)) {
    e.type = beneath_entry::type_kind::regular;
    e.size = static_cast<uint64_t>(st.st_size);
    if (read_content) {
      if (e.size > max_bytes)  // refused before reading, not after max_bytes of it
        return make_error(error_kind::invalid_argument, "{} is larger than {} bytes", rel.string(),
                          max_bytes);
      unique_fd fd(::openat(w.dir.get(), name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
      if (!fd) return sys_error(errno, "open {}", rel.string());
      e.content = EB_TRY(read_fd(fd.get(), max_bytes, rel));
    }
  } else {
    e.type = beneath_entry::type_kind::other;
  }
  return e;
}

result<std::vector<std::string>> list_beneath(const fs::path& root, const fs::path& rel,
                                              size_t max_entries) {
  auto top = EB_TRY(lookup_beneath(root, rel, false, false));
  std::vector<std::string> out;
  if (top.type == beneath_entry::type_kind::missing) return out;
  if (top.type != beneath_entry::type_kind::directory) {
    out.push_back(rel.lexically_normal().generic_string());
    return out;
  }
  // The directory itself was reached without following symlinks in its last component, and
  // every component before it was resolved inside the root: walk it with nofollow semantics.
  std::vector<fs::path> stack{rel.lexically_normal()};
  while (!stack.empty()) {
    fs::path dir = stack.back();
    stack.pop_back();
    unique_fd root_fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!root_fd) return sys_error(errno, "open {}", root.string());
    int hops = 0;
    auto w = EB_TRY(walk_beneath(root_fd.get(), dir, false, hops));
    if (!w.dir) continue;
    unique_fd dfd(w.name.empty() ? ::fcntl(w.dir.get(), F_DUPFD_CLOEXEC, 0)
                                 : ::openat(w.dir.get(), w.name.c_str(),
                                            O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!dfd) continue;
    auto d = read_dir_at(dfd.get(), dir);
    if (!d) continue;
    while (dirent* ent = ::readdir(d->get())) {
      std::string_view n = ent->d_name;
      if (n == "." || n == "..") continue;
      struct stat st {};
      if (::fstatat(dfd.get(), ent->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      fs::path child = dir / std::string(n);
      if (S_ISDIR(st.st_mode))
        stack.push_back(child);
      else
        out.push_back(child.lexically_normal().generic_string());
      if (out.size() + stack.size() > max_entries)
        return make_error(error_kind::invalid_argument, "{} holds more than {} entries",
                          rel.string(), max_entries);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

temp_dir::temp_dir(std::string_view prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string templ = fmt::format("{}/{}-XXXXXX", base && *base ? base : "/tmp", prefix);
  if (!::mkdtemp(templ.data())) std::abort();
  path_ = templ;
}

temp_dir::~temp_dir() { (void)remove_tree(path_); }

}  // namespace base
}  // namespace evalbox
