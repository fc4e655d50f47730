// Stacked layers read without a mount (see layers.h).
#include "sandbox/workspace/layers.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <optional>
#include <set>
#include <string>

#include <fmt/format.h>

#include "base/fs.h"
#include "base/unique_fd.h"

namespace evalbox::sandbox::workspace {

namespace fs = std::filesystem;

bool is_whiteout_at(int dirfd, const char* name) {
  struct stat st {};
  if (::fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return false;
  if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0)) return true;
  if (!S_ISREG(st.st_mode) || st.st_size != 0) return false;
  // The xattr form (Linux 6.7+): an empty file carrying user.overlay.whiteout.
  unique_fd fd(::openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  return fd && ::fgetxattr(fd.get(), "user.overlay.whiteout", nullptr, 0) >= 0;
}

bool is_opaque_dir(int fd) {
  for (const char* attr : {"trusted.overlay.opaque", "user.overlay.opaque"}) {
    char v[2] = {};
    // "x" (user.overlay.opaque) marks a directory holding xattr whiteouts, not an opaque one.
    if (::fgetxattr(fd, attr, v, sizeof v) == 1 && v[0] == 'y') return true;
  }
  return false;
}

result<std::vector<fs::path>> subtree_layers(const std::vector<fs::path>& layers,
                                             const fs::path& dir) {
  std::vector<fs::path> parts;
  for (const auto& p : dir.relative_path()) parts.push_back(p);
  std::vector<fs::path> out;
  for (const auto& layer : layers) {
    unique_fd cur(::open(layer.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!cur) return sys_error(errno, "open layer {}", layer.string());
    // Whether this layer hides the same path in every layer below it.
    bool hides_below = is_opaque_dir(cur.get());
    bool present = true;
    fs::path walked = "/";
    for (const auto& part : parts) {
      walked /= part;
      struct stat st {};
      if (::fstatat(cur.get(), part.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno != ENOENT) return sys_error(errno, "stat {}", (layer / walked).string());
        present = false;
        break;
      }
      if (S_ISLNK(st.st_mode))
        return make_error(error_kind::invalid_argument,
                          "{} is a symlink in the image: the working directory must be a real "
                          "directory (name the directory it points to)",
                          walked.string());
      if (!S_ISDIR(st.st_mode)) {
        // A whiteout or a file: the name ends here, in this layer and all below.
        present = false;
        hides_below = true;
        break;
      }
      unique_fd next(
          ::openat(cur.get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!next) return sys_error(errno, "open {}", (layer / walked).string());
      cur = std::move(next);
      hides_below = hides_below || is_opaque_dir(cur.get());
    }
    if (present) out.push_back(layer / dir.relative_path());
    if (hides_below) break;
  }
  return out;
}

namespace {

// The layers' directories that make up the merged directory `dirs[i]/name` (top-most first),
// given the layers' directories `dirs` that make up its parent. Empty: the merged view has no
// such directory.
std::vector<fs::path> merged_children(const std::vector<fs::path>& dirs, const std::string& name) {
  std::vector<fs::path> out;
  for (const auto& d : dirs) {
    unique_fd fd(::open(d.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd) break;
    struct stat st {};
    if (::fstatat(fd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      if (!S_ISDIR(st.st_mode)) break;  // a file, a link or a whiteout hides the layers below
      out.push_back(d / name);
      unique_fd sub(
          ::openat(fd.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (sub && is_opaque_dir(sub.get())) break;
    }
    if (is_opaque_dir(fd.get())) break;
  }
  return out;
}

}  // namespace

result<merged_kind> merged_lookup(const std::vector<fs::path>& layers, const fs::path& path) {
  fs::path want = path.lexically_normal();
  for (int links = 0; links <= 40; ++links) {
    std::vector<fs::path> dirs = layers;  // the merged "/"
    fs::path walked = "/";
    std::vector<std::string> parts;
    for (const auto& p : want.relative_path()) parts.push_back(p.string());
    bool restarted = false;
    for (size_t i = 0; i < parts.size() && !restarted; ++i) {
      const std::string& name = parts[i];
      if (name.empty() || name == ".") continue;
      // The top-most layer that has the name decides what it is.
      std::optional<std::pair<fs::path, struct stat>> top;
      for (const auto& d : dirs) {
        unique_fd fd(::open(d.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (!fd) return sys_error(errno, "open {}", d.string());
        struct stat st {};
        if (::fstatat(fd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
          if (is_whiteout_at(fd.get(), name.c_str())) return merged_kind::missing;
          top = std::make_pair(d / name, st);
          break;
        }
        if (is_opaque_dir(fd.get())) break;
      }
      if (!top) return merged_kind::missing;
      const struct stat& st = top->second;
      if (S_ISLNK(st.st_mode)) {
        std::error_code ec;
        fs::path target = fs::read_symlink(top->first, ec);
        if (ec) return sys_error(ec.value(), "readlink {}", top->first.string());
        fs::path next = target.is_absolute() ? target : walked / target;
        for (size_t j = i + 1; j < parts.size(); ++j) next /= parts[j];
        want = next.lexically_normal();
        restarted = true;
        continue;
      }
      const bool last = i + 1 == parts.size();
      if (S_ISDIR(st.st_mode)) {
        dirs = merged_children(dirs, name);
        walked /= name;
        if (last) return merged_kind::directory;
        continue;
      }
      if (!last) return merged_kind::missing;  // a file where a directory was wanted
      return S_ISREG(st.st_mode) ? merged_kind::file : merged_kind::other;
    }
    if (!restarted) return merged_kind::directory;  // "/" itself
  }
  return make_error(error_kind::invalid_argument, "{}: too many levels of symlinks in the image",
                    path.string());
}

namespace {

// The merged directory made of `dirs` (top-most first, each open) into `dst`.
status copy_stack(const std::vector<int>& dirs, int dst, const fs::path& shown, copy_mode mode,
                  uid_t uid, gid_t gid) {
  // Each name once, from the top-most layer that has it; no layer below an opaque one counts.
  std::vector<std::pair<std::string, size_t>> names;
  std::set<std::string> seen;
  for (size_t i = 0; i < dirs.size(); ++i) {
    auto d = EB_TRY(read_dir_at(dirs[i], shown));
    while (dirent* e = ::readdir(d.get())) {
      std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      if (seen.insert(name).second) names.emplace_back(std::move(name), i);
    }
    if (is_opaque_dir(dirs[i])) break;
  }
  for (const auto& [name, top] : names) {
    const fs::path here = shown / name;
    if (is_whiteout_at(dirs[top], name.c_str())) continue;
    struct stat st {};
    if (::fstatat(dirs[top], name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
      return sys_error(errno, "stat {}", here.string());
    if (!S_ISDIR(st.st_mode)) {
      EB_TRY(copy_entry(dirs[top], name.c_str(), dst, here, mode, uid, gid));
      continue;
    }
    // A directory: merged with the same directory of the layers below, down to the first
    // layer where the name is something else (a file or a whiteout hides the rest).
    std::vector<unique_fd> subs;
    for (size_t j = top; j < dirs.size(); ++j) {
      struct stat sj {};
      if (::fstatat(dirs[j], name.c_str(), &sj, AT_SYMLINK_NOFOLLOW) != 0) {
        if (is_opaque_dir(dirs[j])) break;
        continue;
      }
      if (!S_ISDIR(sj.st_mode)) break;
      unique_fd fd(
          ::openat(dirs[j], name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!fd) return sys_error(errno, "open {}", here.string());
      subs.push_back(std::move(fd));
      if (is_opaque_dir(dirs[j])) break;
    }
    if (::mkdirat(dst, name.c_str(), 0700) != 0) return sys_error(errno, "mkdir {}", here.string());
    unique_fd t(::openat(dst, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!t) return sys_error(errno, "open {}", here.string());
    std::vector<int> sub_fds;
    for (const auto& s : subs) sub_fds.push_back(s.get());
    EB_TRY(copy_stack(sub_fds, t.get(), here, mode, uid, gid));
    EB_TRY(finish_dir(t.get(), st, here, uid, gid));
  }
  return {};
}

}  // namespace

status copy_layers(const std::vector<fs::path>& layers, const fs::path& to, copy_mode mode,
                   uid_t uid, gid_t gid) {
  std::vector<unique_fd> fds;
  std::vector<int> raw;
  for (const auto& l : layers) {
    unique_fd fd(::open(l.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd) return sys_error(errno, "open layer {}", l.string());
    raw.push_back(fd.get());
    fds.push_back(std::move(fd));
  }
  unique_fd t(::open(to.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!t) return sys_error(errno, "open {}", to.string());
  EB_TRY(copy_stack(raw, t.get(), layers.empty() ? fs::path() : layers.front(), mode, uid, gid));
  if (!raw.empty()) {
    struct stat st {};
    if (::fstat(raw.front(), &st) == 0) EB_TRY(finish_dir(t.get(), st, to, uid, gid));
  }
  return {};
}

}  // namespace evalbox::sandbox::workspace
