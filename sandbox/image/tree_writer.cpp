// Writing a layer's entries beneath its directory (see tree_writer.h).
#include "sandbox/image/tree_writer.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <functional>

#include "sandbox/sys/beneath.h"

namespace evalbox::sandbox::image {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view whiteout_prefix = ".wh.";
constexpr std::string_view opaque_marker = ".wh..wh..opq";
constexpr std::string_view meta_prefix = ".wh..wh.";  // AUFS bookkeeping (.wh..wh.plnk, ...)

// Resolution rules for every path evalbox opens inside a layer: stay beneath the layer's root,
// follow no symlink (not even one the layer itself made), no magic links, no mount crossing.
constexpr uint64_t beneath_flags =
    RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;

std::string join(const std::vector<std::string>& parts, size_t count) {
  std::string out;
  for (size_t i = 0; i < count; ++i) {
    if (i) out += '/';
    out += parts[i];
  }
  return out;
}

// A path of the tree, opened by the rules above.
int open_beneath(int dirfd, const char* path, uint64_t flags) {
  return sys::open_beneath(dirfd, path, flags | O_CLOEXEC, beneath_flags);
}

std::unexpected<error> refused(std::string_view entry, std::string_view why) {
  return make_error(error_kind::invalid_argument, "entry \"{}\": {}", entry, why);
}

bool keep_xattr(std::string_view name) {
  return name.starts_with("user.") && !name.starts_with("user.overlay.");
}

struct timespec times_of(const struct timespec& mtime) {
  return mtime;
}

// overlayfs's own whiteout form, which a layer may carry as is.
bool is_whiteout_device(const tree_entry& e) {
  return e.type == entry_type::char_device && e.dev_major == 0 && e.dev_minor == 0;
}

}  // namespace

result<std::vector<std::string>> split_entry_path(std::string_view path,
                                                  const layer_limits& limits) {
  if (path.find('\0') != std::string_view::npos) return refused(path, "NUL in path");
  if (path.size() > limits.max_path_bytes)
    return refused(path.substr(0, 200),
                   fmt::format("path longer than {} bytes", limits.max_path_bytes));
  if (path.starts_with('/'))
    return refused(path, "absolute path refused (layer entries are relative to the image root)");
  std::vector<std::string> parts;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t slash = path.find('/', pos);
    std::string_view comp =
        path.substr(pos, slash == std::string_view::npos ? path.npos : slash - pos);
    if (comp == "..") return refused(path, "\"..\" component refused");
    if (!comp.empty() && comp != ".") {
      if (comp.size() > 255) return refused(path.substr(0, 200), "a name longer than 255 bytes");
      parts.emplace_back(comp);
      if (parts.size() > limits.max_depth)
        return refused(path.substr(0, 200), fmt::format("deeper than {}", limits.max_depth));
    }
    if (slash == std::string_view::npos) break;
    pos = slash + 1;
  }
  return parts;
}

result<tree_writer> tree_writer::open(const fs::path& root, writer_options options) {
  tree_writer w;
  w.options_ = options;
  w.root_path_ = root;
  w.root_.reset(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!w.root_) return sys_error(errno, "open layer directory {}", root.string());
  EB_TRY(w.owned(w.root_.get(), nullptr, "."));
  return w;
}

status tree_writer::owned(int fd, const char* name, std::string_view entry) {
  if (!options_.chown) return {};
  int rc = name ? ::fchownat(fd, name, options_.owner_uid, options_.owner_gid, AT_SYMLINK_NOFOLLOW)
                : ::fchown(fd, options_.owner_uid, options_.owner_gid);
  if (rc != 0)
    return sys_error(errno, "entry \"{}\": chown to {}:{}", entry, options_.owner_uid,
                     options_.owner_gid);
  return {};
}

result<unique_fd> tree_writer::open_dir(const std::vector<std::string>& parts, bool create,
                                        std::string_view entry) {
  const std::string rel = parts.empty() ? std::string(".") : join(parts, parts.size());
  unique_fd fd(open_beneath(root_.get(), rel.c_str(), O_RDONLY | O_DIRECTORY));
  if (fd) return fd;
  int err = errno;
  if (err == ELOOP) return refused(entry, fmt::format("goes through a symlink ({})", rel));
  if (err == ENOTDIR)
    return refused(entry, fmt::format("a parent of it is not a directory ({})", rel));
  if (err == EXDEV) return refused(entry, fmt::format("leaves the layer ({})", rel));
  if (err != ENOENT || !create) return sys_error(err, "entry \"{}\": open {}", entry, rel);
  // Create the missing parents one at a time, each checked like the whole path was.
  unique_fd cur(::fcntl(root_.get(), F_DUPFD_CLOEXEC, 3));
  if (!cur) return sys_error(errno, "dup layer root");
  for (size_t i = 0; i < parts.size(); ++i) {
    unique_fd next(open_beneath(cur.get(), parts[i].c_str(), O_RDONLY | O_DIRECTORY));
    if (!next && errno == ENOENT) {
      if (::mkdirat(cur.get(), parts[i].c_str(), 0755) != 0 && errno != EEXIST)
        return sys_error(errno, "entry \"{}\": mkdir {}", entry, join(parts, i + 1));
      EB_TRY(owned(cur.get(), parts[i].c_str(), entry));
      ++entries_;
      next.reset(open_beneath(cur.get(), parts[i].c_str(), O_RDONLY | O_DIRECTORY));
    }
    if (!next) {
      int e = errno;
      if (e == ELOOP)
        return refused(entry, fmt::format("goes through a symlink ({})", join(parts, i + 1)));
      if (e == ENOTDIR)
        return refused(entry,
                       fmt::format("a parent of it is not a directory ({})", join(parts, i + 1)));
      return sys_error(e, "entry \"{}\": open {}", entry, join(parts, i + 1));
    }
    cur = std::move(next);
  }
  return cur;
}

result<borrowed_fd> tree_writer::parent_of(const std::vector<std::string>& parts,
                                           std::string_view entry) {
  std::vector<std::string> parent(parts.begin(), parts.end() - 1);
  std::string key = join(parent, parent.size());
  if (!cached_valid_ || key != cached_parent_) {
    cached_valid_ = false;
    cached_parent_fd_ = EB_TRY(open_dir(parent, true, entry));
    cached_parent_ = std::move(key);
    cached_valid_ = true;
  }
  return cached_parent_fd_.borrow();
}

status tree_writer::make_room(borrowed_fd parent, const std::string& name, bool new_is_dir,
                              std::string_view entry) {
  struct stat st {};
  if (::fstatat(parent.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return {};
    return sys_error(errno, "entry \"{}\": stat", entry);
  }
  if (S_ISDIR(st.st_mode)) {
    if (new_is_dir) return {};
    // Flattening: a lower layer's directory may be replaced by this layer's file.
    if (options_.flatten) return remove_below(parent, name, entry);
    return refused(entry, "replaces a directory of this layer with a non-directory");
  }
  // A later entry of the same name wins, as in tar: drop the earlier file, link or whiteout.
  if (::unlinkat(parent.get(), name.c_str(), 0) != 0)
    return sys_error(errno, "entry \"{}\": replace earlier entry", entry);
  return {};
}

status tree_writer::remove_below(borrowed_fd parent, const std::string& name,
                                 std::string_view entry) {
  cached_valid_ = false;  // the cached parent may be the directory going away
  struct stat st {};
  if (::fstatat(parent.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return errno == ENOENT ? status{} : sys_error(errno, "entry \"{}\": stat {}", entry, name);
  if (S_ISDIR(st.st_mode)) {
    unique_fd dir(open_beneath(parent.get(), name.c_str(), O_RDONLY | O_DIRECTORY));
    if (!dir) return sys_error(errno, "entry \"{}\": open {}", entry, name);
    std::vector<std::string> children;
    {
      DIR* d = ::fdopendir(::fcntl(dir.get(), F_DUPFD_CLOEXEC, 3));
      if (!d) return sys_error(errno, "entry \"{}\": list {}", entry, name);
      while (struct dirent* de = ::readdir(d)) {
        std::string_view n = de->d_name;
        if (n != "." && n != "..") children.emplace_back(n);
      }
      ::closedir(d);
    }
    for (const auto& c : children) EB_TRY(remove_below(dir.borrow(), c, entry));
    if (::unlinkat(parent.get(), name.c_str(), AT_REMOVEDIR) != 0)
      return sys_error(errno, "entry \"{}\": remove {}", entry, name);
    return {};
  }
  if (::unlinkat(parent.get(), name.c_str(), 0) != 0 && errno != ENOENT)
    return sys_error(errno, "entry \"{}\": remove {}", entry, name);
  return {};
}

status tree_writer::set_xattrs(int fd, const tree_entry& e) {
  size_t total = 0;
  for (const auto& [name, value] : e.xattrs) {
    total += name.size() + value.size();
    if (total > options_.limits.max_xattr_bytes)
      return refused(e.path,
                     fmt::format("xattrs larger than {} bytes", options_.limits.max_xattr_bytes));
    if (!keep_xattr(name)) continue;
    // Best effort: a store filesystem without user xattrs loses them (they are application
    // data, not something the image needs to start).
    if (::fsetxattr(fd, name.c_str(), value.data(), value.size(), 0) != 0 && errno != ENOTSUP &&
        errno != EOPNOTSUPP)
      return sys_error(errno, "entry \"{}\": set xattr {}", e.path, name);
  }
  return {};
}

status tree_writer::write_regular(borrowed_fd parent, const std::string& name, const tree_entry& e,
                                  const content_reader& content) {
  if (e.size < 0) return refused(e.path, "negative size");
  uint64_t size = static_cast<uint64_t>(e.size);
  if (size > options_.limits.max_bytes || bytes_ + size > options_.limits.max_bytes)
    return make_error(error_kind::invalid_argument,
                      "entry \"{}\": the layer expands past its limit of {} bytes (a "
                      "decompression bomb, or raise EVALBOX_IMAGE_MAX_LAYER_BYTES)",
                      e.path, options_.limits.max_bytes);
  bytes_ += size;
  unique_fd fd(::openat(parent.get(), name.c_str(),
                        O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) return sys_error(errno, "entry \"{}\": create", e.path);
  uint64_t end = 0;
  while (true) {
    auto block = EB_TRY(content());
    if (!block) break;
    if (block->offset < 0 || static_cast<uint64_t>(block->offset) + block->size > size)
      return refused(e.path, "content beyond its declared size");
    const char* p = static_cast<const char*>(block->data);
    size_t left = block->size;
    off_t at = block->offset;
    while (left > 0) {
      ssize_t n = ::pwrite(fd.get(), p, left, at);
      if (n < 0) {
        if (errno == EINTR) continue;
        return sys_error(errno, "entry \"{}\": write", e.path);
      }
      p += n;
      left -= static_cast<size_t>(n);
      at += n;
    }
    end = std::max<uint64_t>(end, static_cast<uint64_t>(block->offset) + block->size);
  }
  if (end < size && ::ftruncate(fd.get(), static_cast<off_t>(size)) != 0)
    return sys_error(errno, "entry \"{}\": extend to {} bytes", e.path, size);
  EB_TRY(owned(fd.get(), nullptr, e.path));
  if (::fchmod(fd.get(), e.mode & 07777) != 0)
    return sys_error(errno, "entry \"{}\": chmod", e.path);
  EB_TRY(set_xattrs(fd.get(), e));
  struct timespec ts[2] = {times_of(e.mtime), times_of(e.mtime)};
  if (::futimens(fd.get(), ts) != 0) return sys_error(errno, "entry \"{}\": set mtime", e.path);
  return {};
}

status tree_writer::whiteout(borrowed_fd parent, const std::string& name, std::string_view entry) {
  ++whiteouts_;
  if (options_.flatten) return remove_below(parent, name, entry);
  EB_TRY(make_room(parent, name, false, entry));
  switch (options_.whiteout) {
    case sys::whiteout_form::char_device:
      if (::mknodat(parent.get(), name.c_str(), S_IFCHR | 0000, makedev(0, 0)) != 0)
        return sys_error(errno, "entry \"{}\": mknod whiteout", entry);
      return owned(parent.get(), name.c_str(), entry);
    case sys::whiteout_form::user_xattr: {
      unique_fd fd(::openat(parent.get(), name.c_str(),
                            O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0000));
      if (!fd) return sys_error(errno, "entry \"{}\": create whiteout", entry);
      if (::fsetxattr(fd.get(), "user.overlay.whiteout", "y", 1, 0) != 0)
        return sys_error(errno, "entry \"{}\": set user.overlay.whiteout", entry);
      // overlayfs looks for xattr whiteouts only in directories marked opaque=x (unless
      // they are fully opaque already).
      char value[2] = {};
      ssize_t n = ::fgetxattr(parent.get(), "user.overlay.opaque", value, sizeof value);
      if (!(n == 1 && value[0] == 'y') &&
          ::fsetxattr(parent.get(), "user.overlay.opaque", "x", 1, 0) != 0)
        return sys_error(errno, "entry \"{}\": mark directory for xattr whiteouts", entry);
      return owned(parent.get(), name.c_str(), entry);
    }
    case sys::whiteout_form::copy:
      break;
  }
  return make_error(error_kind::unsupported,
                    "entry \"{}\": this store cannot express an overlay whiteout", entry);
}

status tree_writer::opaque(borrowed_fd dir, std::string_view entry) {
  if (options_.trusted_opaque && ::fsetxattr(dir.get(), "trusted.overlay.opaque", "y", 1, 0) != 0)
    return sys_error(errno, "entry \"{}\": set trusted.overlay.opaque", entry);
  if (::fsetxattr(dir.get(), "user.overlay.opaque", "y", 1, 0) != 0)
    return sys_error(errno, "entry \"{}\": set user.overlay.opaque", entry);
  return {};
}

status tree_writer::add(const tree_entry& e, const content_reader& content) {
  if (++entries_ > options_.limits.max_entries)
    return make_error(error_kind::invalid_argument,
                      "entry \"{}\": the layer has more than {} entries (raise "
                      "EVALBOX_IMAGE_MAX_LAYER_ENTRIES if it is genuine)",
                      e.path, options_.limits.max_entries);
  auto parts = EB_TRY(split_entry_path(e.path, options_.limits));
  for (size_t i = 0; i + 1 < parts.size(); ++i)
    if (parts[i].starts_with(whiteout_prefix))
      return refused(e.path, "a whiteout name used as a directory");

  if (parts.empty()) {  // the layer's root directory itself
    if (e.type != entry_type::directory) return refused(e.path, "the root is not a directory");
    dirs_[""] = {e.mode & 07777, e.mtime};
    return set_xattrs(root_.get(), e);
  }
  const std::string& name = parts.back();

  if (name == opaque_marker) {
    parts.pop_back();
    unique_fd dir = EB_TRY(open_dir(parts, true, e.path));
    if (options_.flatten) {
      // Applied at the layer's end, once every entry of this layer is known.
      opaque_dirs_.insert(join(parts, parts.size()));
      return {};
    }
    return opaque(dir.borrow(), e.path);
  }
  if (name.starts_with(meta_prefix)) return {};  // AUFS bookkeeping: nothing for overlayfs
  if (name.starts_with(whiteout_prefix)) {
    std::string target = name.substr(whiteout_prefix.size());
    if (target.empty() || target == "." || target == "..")
      return refused(e.path, "a whiteout of no name");
    borrowed_fd parent = EB_TRY(parent_of(parts, e.path));
    return whiteout(parent, target, e.path);
  }

  if (skip_device(parts, e)) return {};

  borrowed_fd parent = EB_TRY(parent_of(parts, e.path));
  if (options_.flatten && !is_whiteout_device(e)) written_.insert(join(parts, parts.size()));
  switch (e.type) {
    case entry_type::directory:
      return write_directory(parent, name, parts, e);
    case entry_type::regular:
      EB_TRY(make_room(parent, name, false, e.path));
      return write_regular(parent, name, e, content);
    case entry_type::symlink:
      return write_symlink(parent, name, e);
    case entry_type::hardlink:
      return write_hardlink(parent, name, e);
    case entry_type::fifo:
      return write_fifo(parent, name, e);
    case entry_type::char_device:
    case entry_type::block_device:
      // skip_device() took every device node but this one: a whiteout.
      if (is_whiteout_device(e)) return whiteout(parent, name, e.path);
      return refused(e.path, "device node");
    case entry_type::socket:
      return refused(e.path, "socket refused");
  }
  return refused(e.path, "unknown entry type");
}

// Skips and counts `e` if it is a device node (see tree_writer.h): any character or block
// device but the 0/0 whiteout, or a hard link to one this layer skipped. Returns whether it
// did. Any other entry clears its path's mark (a later entry of the same name replaced it).
bool tree_writer::skip_device(const std::vector<std::string>& parts, const tree_entry& e) {
  bool device = (e.type == entry_type::char_device && !is_whiteout_device(e)) ||
                e.type == entry_type::block_device;
  if (!device && e.type == entry_type::hardlink && !skipped_devices_.empty()) {
    // A target that does not split is refused by write_hardlink, with the reason.
    auto target = split_entry_path(e.link, options_.limits);
    device = target && skipped_devices_.count(join(*target, target->size())) > 0;
  }
  if (!device) {
    if (!skipped_devices_.empty()) skipped_devices_.erase(join(parts, parts.size()));
    return false;
  }
  ++devices_skipped_;
  skipped_devices_.insert(join(parts, parts.size()));
  return true;
}

status tree_writer::write_directory(borrowed_fd parent, const std::string& name,
                                    const std::vector<std::string>& parts, const tree_entry& e) {
  EB_TRY(make_room(parent, name, true, e.path));
  if (::mkdirat(parent.get(), name.c_str(), 0700) == 0) {
    EB_TRY(owned(parent.get(), name.c_str(), e.path));
  } else if (errno != EEXIST) {
    return sys_error(errno, "entry \"{}\": mkdir", e.path);
  }
  unique_fd dir(open_beneath(parent.get(), name.c_str(), O_RDONLY | O_DIRECTORY));
  if (!dir) return sys_error(errno, "entry \"{}\": open directory", e.path);
  EB_TRY(set_xattrs(dir.get(), e));
  // Its final mode and mtime are applied by finish(), after its contents (a 0555 directory).
  dirs_[join(parts, parts.size())] = {e.mode & 07777, e.mtime};
  return {};
}

status tree_writer::write_symlink(borrowed_fd parent, const std::string& name,
                                  const tree_entry& e) {
  if (e.link.empty() || e.link.size() >= 4096 || e.link.find('\0') != std::string::npos)
    return refused(e.path, "symlink with an empty, over-long or NUL-containing target");
  EB_TRY(make_room(parent, name, false, e.path));
  if (::symlinkat(e.link.c_str(), parent.get(), name.c_str()) != 0)
    return sys_error(errno, "entry \"{}\": symlink", e.path);
  EB_TRY(owned(parent.get(), name.c_str(), e.path));
  struct timespec ts[2] = {e.mtime, e.mtime};
  if (::utimensat(parent.get(), name.c_str(), ts, AT_SYMLINK_NOFOLLOW) != 0)
    return sys_error(errno, "entry \"{}\": set mtime", e.path);
  return {};
}

// A hard link may only name a file this layer already wrote, found beneath the layer root.
status tree_writer::write_hardlink(borrowed_fd parent, const std::string& name,
                                   const tree_entry& e) {
  auto target = EB_TRY_CTX(split_entry_path(e.link, options_.limits),
                           fmt::format("hard link \"{}\"", e.path));
  if (target.empty()) return refused(e.path, "hard link to the root directory");
  const auto not_in_layer = [&] {
    return refused(e.path,
                   fmt::format("hard link to \"{}\", which is not an entry of this layer", e.link));
  };
  if (options_.flatten && !written_.count(join(target, target.size()))) return not_in_layer();
  std::vector<std::string> target_parent(target.begin(), target.end() - 1);
  auto tdir = open_dir(target_parent, false, e.path);
  if (!tdir && tdir.error().kind == error_kind::not_found) return not_in_layer();
  if (!tdir) return std::unexpected(std::move(tdir).error());
  struct stat st {};
  if (::fstatat(tdir->get(), target.back().c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return not_in_layer();
  if (S_ISDIR(st.st_mode) || S_ISCHR(st.st_mode))
    return refused(e.path, fmt::format("hard link to \"{}\", a directory or whiteout", e.link));
  struct stat mine {};
  if (::fstatat(parent.get(), name.c_str(), &mine, AT_SYMLINK_NOFOLLOW) == 0 &&
      mine.st_ino == st.st_ino && mine.st_dev == st.st_dev)
    return {};  // already that file
  EB_TRY(make_room(parent, name, false, e.path));
  if (::linkat(tdir->get(), target.back().c_str(), parent.get(), name.c_str(), 0) != 0)
    return sys_error(errno, "entry \"{}\": link to \"{}\"", e.path, e.link);
  return {};
}

status tree_writer::write_fifo(borrowed_fd parent, const std::string& name, const tree_entry& e) {
  EB_TRY(make_room(parent, name, false, e.path));
  if (::mknodat(parent.get(), name.c_str(), S_IFIFO | (e.mode & 0777), 0) != 0)
    return sys_error(errno, "entry \"{}\": mkfifo", e.path);
  EB_TRY(owned(parent.get(), name.c_str(), e.path));
  if (::fchmodat(parent.get(), name.c_str(), e.mode & 07777, 0) != 0)
    return sys_error(errno, "entry \"{}\": chmod", e.path);
  struct timespec ts[2] = {e.mtime, e.mtime};
  if (::utimensat(parent.get(), name.c_str(), ts, AT_SYMLINK_NOFOLLOW) != 0)
    return sys_error(errno, "entry \"{}\": set mtime", e.path);
  return {};
}

status tree_writer::end_layer() {
  skipped_devices_.clear();  // hard links name entries of their own layer only
  if (!options_.flatten) return {};
  cached_valid_ = false;
  // An opaque directory keeps only what this layer put in it: everything else below it came
  // from lower layers and is hidden, so it goes.
  std::function<status(int, const std::string&)> prune = [&](int dirfd,
                                                             const std::string& rel) -> status {
    std::vector<std::string> children;
    {
      DIR* d = ::fdopendir(::fcntl(dirfd, F_DUPFD_CLOEXEC, 3));
      if (!d) return sys_error(errno, "opaque directory \"{}\": list", rel);
      while (struct dirent* de = ::readdir(d)) {
        std::string_view n = de->d_name;
        if (n != "." && n != "..") children.emplace_back(n);
      }
      ::closedir(d);
    }
    for (const auto& c : children) {
      const std::string path = rel.empty() ? c : rel + "/" + c;
      const bool itself = written_.count(path) > 0;
      auto below = written_.lower_bound(path + "/");
      const bool under = below != written_.end() && below->starts_with(path + "/");
      struct stat st {};
      if (::fstatat(dirfd, c.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      if (S_ISDIR(st.st_mode) && (itself || under)) {
        unique_fd sub(open_beneath(dirfd, c.c_str(), O_RDONLY | O_DIRECTORY));
        if (!sub) return sys_error(errno, "opaque directory \"{}\": open", path);
        EB_TRY(prune(sub.get(), path));
      } else if (!itself) {
        EB_TRY(remove_below(borrowed_fd(dirfd), c, path));
      }
    }
    return {};
  };
  for (const auto& rel : opaque_dirs_) {
    unique_fd dir(
        open_beneath(root_.get(), rel.empty() ? "." : rel.c_str(), O_RDONLY | O_DIRECTORY));
    if (!dir) continue;  // removed again by a later whiteout of this layer
    EB_TRY(prune(dir.get(), rel));
  }
  written_.clear();
  opaque_dirs_.clear();
  return {};
}

status tree_writer::finish() {
  cached_parent_fd_.reset();
  cached_valid_ = false;
  std::vector<std::pair<std::string, pending_dir>> order(dirs_.begin(), dirs_.end());
  auto depth = [](const std::string& p) {
    return p.empty() ? 0 : 1 + std::count(p.begin(), p.end(), '/');
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](const auto& a, const auto& b) { return depth(a.first) > depth(b.first); });
  for (const auto& [rel, d] : order) {
    unique_fd fd(
        open_beneath(root_.get(), rel.empty() ? "." : rel.c_str(), O_RDONLY | O_DIRECTORY));
    // Flattening: a later layer removed it, or replaced it with a file.
    if (!fd && options_.flatten && (errno == ENOENT || errno == ENOTDIR)) continue;
    if (!fd) return sys_error(errno, "directory \"{}\": reopen to set its mode", rel);
    if (::fchmod(fd.get(), d.mode) != 0) return sys_error(errno, "directory \"{}\": chmod", rel);
    struct timespec ts[2] = {d.mtime, d.mtime};
    if (::futimens(fd.get(), ts) != 0) return sys_error(errno, "directory \"{}\": set mtime", rel);
  }
  return {};
}

}  // namespace evalbox::sandbox::image
