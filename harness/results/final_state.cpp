// A run's final state kept by content (see final_state.h).
#include "harness/results/final_state.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>

#include "base/digest.h"
#include "base/fs.h"
#include "base/json.h"
#include "base/json_get.h"
#include "base/unique_fd.h"
#include "base/units.h"
#include "sandbox/sys/beneath.h"

namespace evalbox::harness {
inline namespace results {

namespace fs = std::filesystem;

namespace {

constexpr uint64_t no_links = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;

std::string_view to_string(state_entry::kind k) {
  switch (k) {
    case state_entry::kind::file:
      return "file";
    case state_entry::kind::directory:
      return "directory";
    case state_entry::kind::symlink:
      return "symlink";
    case state_entry::kind::deleted:
      return "deleted";
  }
  return "file";
}

fs::path object_path(const fs::path& results_root, std::string_view digest) {
  return results_root / objects_dir / "sha256" / std::string(digest.substr(0, 2)) /
         std::string(digest.substr(2));
}

// An entry of a tree looked at without following any link: the parent directory is reached
// beneath the root with no symlink on the way (one in the way: the entry is not there), the
// entry itself is lstat'ed.
struct looked {
  bool present = false;
  struct stat st {};
  unique_fd parent;  // O_PATH
  std::string name;
};

result<looked> look(int root_fd, const std::string& rel) {
  looked out;
  const size_t slash = rel.rfind('/');
  const std::string parent = slash == std::string::npos ? "." : rel.substr(0, slash);
  out.name = slash == std::string::npos ? rel : rel.substr(slash + 1);
  out.parent.reset(
      sys::open_beneath(root_fd, parent.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC, no_links));
  if (!out.parent) {
    if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP || errno == EXDEV) return out;
    return sys_error(errno, "open {}", parent);
  }
  if (::fstatat(out.parent.get(), out.name.c_str(), &out.st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return out;
    return sys_error(errno, "stat {}", rel);
  }
  out.present = true;
  return out;
}

std::string link_text(int parent, const std::string& name) {
  char buf[4096];
  const ssize_t n = ::readlinkat(parent, name.c_str(), buf, sizeof buf);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// Reads `in` to its end, hashing it, and writes what it reads to `out` unless that is -1.
// Returns the SHA-256 (hex) and the byte count.
result<std::pair<std::string, uint64_t>> copy_hashing(int in, int out, const std::string& from,
                                                      const std::string& to) {
  sha256 h;
  std::vector<char> buf(1 << 16);
  uint64_t total = 0;
  for (;;) {
    const ssize_t n = ::read(in, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sys_error(errno, "read {}", from);
    if (n == 0) break;
    h.update(std::span(reinterpret_cast<const std::byte*>(buf.data()), static_cast<size_t>(n)));
    total += static_cast<uint64_t>(n);
    for (ssize_t off = 0; out >= 0 && off < n;) {
      const ssize_t w = ::write(out, buf.data() + off, static_cast<size_t>(n - off));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return sys_error(errno, "write {}", to);
      off += w;
    }
  }
  return std::make_pair(h.hex_digest(), total);
}

// The bytes of the regular file open at `fd` stored as an object under `results_root`, unless
// one of their digest is there by the time it is written. Returns the digest and the bytes
// newly stored.
result<std::pair<std::string, uint64_t>> store_object(int fd, const fs::path& results_root,
                                                      const std::string& shown) {
  const fs::path dir = results_root / objects_dir / "tmp";
  EB_TRY(make_dirs(dir));
  const fs::path tmp_path = dir / ("obj-" + random_suffix());
  unique_fd tmp(::open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444));
  if (!tmp) return sys_error(errno, "create {}", tmp_path.string());
  auto copied = copy_hashing(fd, tmp.get(), shown, tmp_path.string());
  tmp.reset();
  if (!copied) {
    ::unlink(tmp_path.c_str());
    return std::unexpected(std::move(copied).error());
  }
  const fs::path dest = object_path(results_root, copied->first);
  struct stat st {};
  if (::lstat(dest.c_str(), &st) == 0) {
    ::unlink(tmp_path.c_str());
    return std::make_pair(std::move(copied->first), uint64_t{0});
  }
  if (auto m = make_dirs(dest.parent_path()); !m || ::rename(tmp_path.c_str(), dest.c_str()) != 0) {
    const int e = m ? errno : m.error().sys_errno;
    ::unlink(tmp_path.c_str());
    return sys_error(e, "store {}", dest.string());
  }
  return copied;
}

struct walk_state {
  std::vector<state_entry> entries;
  std::vector<std::string> skipped;
  uint64_t bytes = 0;
  bool too_many = false;
};

bool is_whiteout(const struct stat& st) {
  return S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0);
}

bool opaque_at(int dir_fd) {
  char v[4] = {};
  for (const char* name : {"user.overlay.opaque", "trusted.overlay.opaque"})
    if (::fgetxattr(dir_fd, name, v, sizeof v) > 0 && v[0] == 'y') return true;
  return false;
}

// A present entry of a tree as a state entry (files not yet hashed: size only); false for a
// special file, which is listed as skipped.
bool entry_of(const looked& l, const std::string& rel, state_entry& e) {
  e.path = rel;
  e.mode = l.st.st_mode & 01777;
  if (S_ISREG(l.st.st_mode)) {
    e.type = state_entry::kind::file;
    e.size = static_cast<uint64_t>(l.st.st_size);
  } else if (S_ISDIR(l.st.st_mode)) {
    e.type = state_entry::kind::directory;
  } else if (S_ISLNK(l.st.st_mode)) {
    e.type = state_entry::kind::symlink;
    e.target = link_text(l.parent.get(), l.name);
  } else if (is_whiteout(l.st)) {
    e.type = state_entry::kind::deleted;
    e.mode = 0;
  } else {
    return false;
  }
  return true;
}

// Whether the file at `a` has the same bytes as the one at `b` (both regular, equal sizes).
bool same_bytes(const looked& a, const looked& b) {
  unique_fd fa(::openat(a.parent.get(), a.name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  unique_fd fb(::openat(b.parent.get(), b.name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fa || !fb) return false;
  std::vector<char> x(1 << 16), y(1 << 16);
  for (;;) {
    const ssize_t n = ::read(fa.get(), x.data(), x.size());
    if (n < 0) return false;
    if (n == 0) return ::read(fb.get(), y.data(), 1) == 0;
    for (ssize_t got = 0; got < n;) {
      const ssize_t m = ::read(fb.get(), y.data() + got, static_cast<size_t>(n - got));
      if (m <= 0) return false;
      got += m;
    }
    if (std::memcmp(x.data(), y.data(), static_cast<size_t>(n)) != 0) return false;
  }
}

// Compare mode: the candidates that differ between the base and the final tree.
status compare_trees(const state_source& s, walk_state& w) {
  unique_fd final_fd(::open(s.final_root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!final_fd) return sys_error(errno, "open {}", s.final_root.string());
  unique_fd base_fd(::open(s.base_root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!base_fd) return sys_error(errno, "open {}", s.base_root.string());
  std::set<std::string> paths(s.candidates.begin(), s.candidates.end());
  for (const auto& rel : paths) {
    if (rel.empty() || !is_safe_relative(rel)) continue;
    auto f = EB_TRY(look(final_fd.get(), rel));
    auto b = EB_TRY(look(base_fd.get(), rel));
    state_entry e;
    if (!f.present) {
      // Below a directory the final tree no longer has: that one's entry says it.
      if (!b.present || !f.parent) continue;
      e.path = rel;
      e.type = state_entry::kind::deleted;
    } else {
      if (!entry_of(f, rel, e) || e.type == state_entry::kind::deleted) {
        w.skipped.push_back(rel);
        continue;
      }
      if (b.present && (b.st.st_mode & S_IFMT) == (f.st.st_mode & S_IFMT) &&
          (b.st.st_mode & 01777) == e.mode) {
        if (e.type == state_entry::kind::directory) continue;
        if (e.type == state_entry::kind::symlink && link_text(b.parent.get(), b.name) == e.target)
          continue;
        if (e.type == state_entry::kind::file && b.st.st_size == f.st.st_size && same_bytes(f, b))
          continue;
      }
    }
    if (w.entries.size() >= max_final_state_entries) {
      w.too_many = true;
      return {};
    }
    w.bytes += e.size;
    w.entries.push_back(std::move(e));
  }
  return {};
}

// Layer mode: every entry of the layer, depth first.
status walk_layer(int dir_fd, const std::string& prefix, walk_state& w, int depth) {
  if (depth > 1024) return make_error(error_kind::invalid_argument, "{}: too deep", prefix);
  auto d = EB_TRY(read_dir_at(dir_fd, prefix.empty() ? "." : prefix));
  std::vector<std::string> names;
  while (const dirent* ent = ::readdir(d.get())) {
    if (std::strcmp(ent->d_name, ".") == 0 || std::strcmp(ent->d_name, "..") == 0) continue;
    names.emplace_back(ent->d_name);
  }
  std::sort(names.begin(), names.end());
  for (const auto& name : names) {
    const std::string rel = prefix.empty() ? name : prefix + "/" + name;
    looked l;
    l.name = name;
    l.parent.reset(::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0));
    if (::fstatat(dir_fd, name.c_str(), &l.st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone
    state_entry e;
    if (!entry_of(l, rel, e)) {
      w.skipped.push_back(rel);
      continue;
    }
    unique_fd sub;
    if (e.type == state_entry::kind::directory) {
      sub.reset(::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!sub) return sys_error(errno, "open {}", rel);
      e.opaque = opaque_at(sub.get());
    }
    if (w.entries.size() >= max_final_state_entries) {
      w.too_many = true;
      return {};
    }
    w.bytes += e.size;
    w.entries.push_back(std::move(e));
    if (sub) EB_TRY(walk_layer(sub.get(), rel, w, depth + 1));
    if (w.too_many) return {};
  }
  return {};
}

json entry_json(const state_entry& e) {
  json j = {{"path", e.path}, {"type", to_string(e.type)}};
  switch (e.type) {
    case state_entry::kind::file:
      j["mode"] = e.mode;
      j["size"] = e.size;
      j["digest"] = e.digest;
      break;
    case state_entry::kind::directory:
      j["mode"] = e.mode;
      if (e.opaque) j["opaque"] = true;
      break;
    case state_entry::kind::symlink:
      j["target"] = e.target;
      break;
    case state_entry::kind::deleted:
      break;
  }
  return j;
}

// Opens the file of entry `rel` beneath `root` for reading, following no link.
result<unique_fd> open_file_beneath(const fs::path& root, const std::string& rel) {
  unique_fd root_fd(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd) return sys_error(errno, "open {}", root.string());
  unique_fd fd(sys::open_beneath(root_fd.get(), rel.c_str(),
                                 O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, no_links));
  if (!fd) return sys_error(errno, "open {}", rel);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
    return make_error(error_kind::io, "{} is no longer a regular file", rel);
  return fd;
}

}  // namespace

result<json> keep_final_state(const fs::path& results_root, std::string_view run_id,
                              const std::vector<state_source>& sources, uint64_t max_bytes) {
  std::vector<state_tree> trees;
  std::vector<std::string> skipped;
  uint64_t bytes = 0;
  size_t entries = 0;
  for (const auto& s : sources) {
    walk_state w;
    if (s.base_root.empty()) {
      unique_fd fd(::open(s.final_root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!fd) return sys_error(errno, "open {}", s.final_root.string());
      EB_TRY(walk_layer(fd.get(), "", w, 0));
    } else {
      EB_TRY(compare_trees(s, w));
    }
    bytes += w.bytes;
    entries += w.entries.size();
    for (auto& p : w.skipped)
      if (skipped.size() < 100) skipped.push_back(fmt::format("{}: {}", s.name, p));
    if (w.too_many || entries > max_final_state_entries)
      return json{{"path", nullptr},
                  {"reason",
                   fmt::format("more than {} changed entries: none kept", max_final_state_entries)},
                  {"max_bytes", max_bytes}};
    if (bytes > max_bytes)
      return json{{"path", nullptr},
                  {"reason", fmt::format("its files take more than {} (--final-state-size): "
                                         "none kept",
                                         format_bytes(max_bytes))},
                  {"bytes", bytes},
                  {"max_bytes", max_bytes}};
    trees.push_back({s.name, s.target, std::move(w.entries)});
  }
  uint64_t stored = 0;
  json jtrees = json::array();
  for (size_t t = 0; t < trees.size(); ++t) {
    json list = json::array();
    for (auto& e : trees[t].entries) {
      if (e.type == state_entry::kind::file) {
        // Hashed first: a file whose object is there already (another run's, another trial's)
        // is read once and never written.
        auto fd = EB_TRY(open_file_beneath(sources[t].final_root, e.path));
        std::string digest = EB_TRY(copy_hashing(fd.get(), -1, e.path, {})).first;
        struct stat st {};
        if (::lstat(object_path(results_root, digest).c_str(), &st) != 0) {
          if (::lseek(fd.get(), 0, SEEK_SET) != 0) return sys_error(errno, "seek {}", e.path);
          auto [again, added] = EB_TRY(store_object(fd.get(), results_root, e.path));
          if (again != digest)
            return make_error(error_kind::io, "{} changed while it was kept", e.path);
          stored += added;
        }
        e.digest = std::move(digest);
      }
      list.push_back(entry_json(e));
    }
    jtrees.push_back(
        {{"name", trees[t].name}, {"target", trees[t].target}, {"entries", std::move(list)}});
  }
  const json manifest = {{"schema", final_state_schema},
                         {"run_id", std::string(run_id)},
                         {"trees", std::move(jtrees)},
                         {"skipped", skipped}};
  const std::string text = manifest.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  const fs::path file = results_root / "runs" / std::string(run_id) / final_state_file;
  EB_TRY(write_file_atomic(file, text));
  return json{{"path", fmt::format("runs/{}/{}", run_id, final_state_file)},
              {"digest", sha256_hex(text)},
              {"entries", entries},
              {"bytes", bytes},
              {"stored_bytes", stored},
              {"max_bytes", max_bytes},
              {"skipped", skipped}};
}

result<std::vector<state_tree>> read_final_state(const fs::path& results_root,
                                                 std::string_view run_id) {
  const fs::path file = results_root / "runs" / std::string(run_id) / final_state_file;
  struct stat st {};
  if (::lstat(file.c_str(), &st) != 0)
    return make_error(error_kind::not_found, "{}: the run kept no final state", file.string());
  auto text = EB_TRY(read_file(file, 256u << 20));
  auto j = EB_TRY(parse_json(text, file.string()));
  auto bad = [&](std::string what) {
    return make_error(error_kind::invalid_argument, "{}: {} (a damaged or edited file)",
                      file.string(), what);
  };
  if (!j.is_object() || json_find<std::string>(j, "schema") != final_state_schema)
    return bad(fmt::format("schema is not {}", final_state_schema));
  auto trees = j.find("trees");
  if (trees == j.end() || !trees->is_array()) return bad("`trees` must be a list");
  std::vector<state_tree> out;
  size_t total = 0;
  for (const auto& t : *trees) {
    if (!t.is_object()) return bad("a tree must be an object");
    state_tree tree;
    tree.name = json_find<std::string>(t, "name").value_or("");
    tree.target = json_find<std::string>(t, "target").value_or("");
    if (tree.name != "workspace" && tree.name != "setup" && tree.name != "root")
      return bad(fmt::format("a tree named '{}'", tree.name));
    if (!is_normal_absolute(tree.target)) return bad(fmt::format("target '{}'", tree.target));
    auto entries = t.find("entries");
    if (entries == t.end() || !entries->is_array()) return bad("`entries` must be a list");
    std::set<std::string> seen;
    for (const auto& e : *entries) {
      if (!e.is_object()) return bad("an entry must be an object");
      if (++total > max_final_state_entries) return bad("too many entries");
      state_entry s;
      s.path = json_find<std::string>(e, "path").value_or("");
      if (s.path.empty() || s.path.size() > 4096 || s.path.find('\0') != std::string::npos ||
          s.path.back() == '/' || !is_safe_relative(s.path) ||
          fs::path(s.path).lexically_normal().generic_string() != s.path)
        return bad(fmt::format("the path '{}'", s.path));
      if (!seen.insert(s.path).second) return bad(fmt::format("{} twice", s.path));
      const std::string type = json_find<std::string>(e, "type").value_or("");
      const json mode = e.contains("mode") ? e.at("mode") : json(uint64_t{0});
      if (!mode.is_number_unsigned() || mode.get<uint64_t>() > 01777)
        return bad(fmt::format("{}: mode", s.path));
      s.mode = mode.get<uint32_t>();
      if (type == "file") {
        s.type = state_entry::kind::file;
        s.digest = json_find<std::string>(e, "digest").value_or("");
        if (!is_sha256_hex(s.digest)) return bad(fmt::format("{}: digest", s.path));
        const json size = e.contains("size") ? e.at("size") : json(uint64_t{0});
        if (!size.is_number_unsigned()) return bad(fmt::format("{}: size", s.path));
        s.size = size.get<uint64_t>();
      } else if (type == "directory") {
        s.type = state_entry::kind::directory;
        const json& opaque = json_member(e, "opaque");
        if (!opaque.is_null() && !opaque.is_boolean())
          return bad(fmt::format("{}: opaque", s.path));
        s.opaque = opaque.is_boolean() && opaque.get<bool>();
      } else if (type == "symlink") {
        s.type = state_entry::kind::symlink;
        s.target = json_find<std::string>(e, "target").value_or("");
        if (s.target.empty() || s.target.size() >= 4096 || s.target.find('\0') != std::string::npos)
          return bad(fmt::format("{}: link target", s.path));
      } else if (type == "deleted") {
        s.type = state_entry::kind::deleted;
      } else {
        return bad(fmt::format("{}: type '{}'", s.path, type));
      }
      tree.entries.push_back(std::move(s));
    }
    std::sort(tree.entries.begin(), tree.entries.end(),
              [](const state_entry& a, const state_entry& b) { return a.path < b.path; });
    out.push_back(std::move(tree));
  }
  return out;
}

namespace {

// Writes a layer: directories opened without following links, so that no entry of the
// manifest (a symlink listed before a path below it) leads a write out of the layer.
class layer_writer {
 public:
  layer_writer(const fs::path& results_root, const fs::path& base, uid_t uid, gid_t gid)
      : results_root_(results_root), uid_(uid), gid_(gid) {
    base_fd_.reset(::open(base.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  }

  status open_root(const fs::path& to) {
    if (::mkdir(to.c_str(), 0755) != 0) return sys_error(errno, "mkdir {}", to.string());
    root_.reset(::open(to.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!root_) return sys_error(errno, "open {}", to.string());
    if (base_fd_) {
      struct stat st {};
      if (::fstat(base_fd_.get(), &st) == 0) (void)::fchmod(root_.get(), st.st_mode & 07777);
    }
    return ::fchown(root_.get(), uid_, gid_) == 0 ? status{}
                                                  : sys_error(errno, "chown {}", to.string());
  }

  status write(const state_entry& e) {
    const size_t slash = e.path.rfind('/');
    const std::string parent = slash == std::string::npos ? "" : e.path.substr(0, slash);
    const std::string name = slash == std::string::npos ? e.path : e.path.substr(slash + 1);
    unique_fd dir = EB_TRY(open_dir(parent));
    const char* n = name.c_str();
    switch (e.type) {
      case state_entry::kind::directory: {
        if (::mkdirat(dir.get(), n, 0700) != 0 && errno != EEXIST)
          return sys_error(errno, "mkdir {}", e.path);
        unique_fd d(::openat(dir.get(), n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (!d) return sys_error(errno, "open {}", e.path);
        if (::fchown(d.get(), uid_, gid_) != 0 || ::fchmod(d.get(), e.mode) != 0)
          return sys_error(errno, "set the owner and mode of {}", e.path);
        if (e.opaque && ::fsetxattr(d.get(), "user.overlay.opaque", "y", 1, 0) != 0)
          return sys_error(errno, "mark {} opaque", e.path);
        return {};
      }
      case state_entry::kind::symlink:
        if (::symlinkat(e.target.c_str(), dir.get(), n) != 0)
          return sys_error(errno, "symlink {}", e.path);
        if (::fchownat(dir.get(), n, uid_, gid_, AT_SYMLINK_NOFOLLOW) != 0)
          return sys_error(errno, "chown {}", e.path);
        return {};
      case state_entry::kind::deleted:
        if (::mknodat(dir.get(), n, S_IFCHR | 0000, makedev(0, 0)) != 0)
          return sys_error(errno, "whiteout {}", e.path);
        if (::fchownat(dir.get(), n, uid_, gid_, AT_SYMLINK_NOFOLLOW) != 0)
          return sys_error(errno, "chown {}", e.path);
        return {};
      case state_entry::kind::file:
        return write_file_entry(dir.get(), e);
    }
    return {};
  }

 private:
  // The directory `rel` of the layer, made (with its base's mode, or 0755) where missing.
  result<unique_fd> open_dir(const std::string& rel) {
    unique_fd cur(::fcntl(root_.get(), F_DUPFD_CLOEXEC, 0));
    if (rel.empty()) return cur;
    std::string so_far;
    for (const auto& part : fs::path(rel)) {
      const std::string p = part.string();
      so_far = so_far.empty() ? p : so_far + "/" + p;
      unique_fd next(
          ::openat(cur.get(), p.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!next && errno == ENOENT) {
        mode_t mode = 0755;
        if (base_fd_) {
          auto b = look(base_fd_.get(), so_far);
          if (b && b->present && S_ISDIR(b->st.st_mode)) mode = b->st.st_mode & 01777;
        }
        if (::mkdirat(cur.get(), p.c_str(), 0700) != 0) return sys_error(errno, "mkdir {}", so_far);
        next.reset(::openat(cur.get(), p.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (next && (::fchown(next.get(), uid_, gid_) != 0 || ::fchmod(next.get(), mode) != 0))
          return sys_error(errno, "set the owner and mode of {}", so_far);
      }
      if (!next)
        return make_error(error_kind::invalid_argument,
                          "{}: not a directory of the state (a link or a file is there)", so_far);
      cur = std::move(next);
    }
    return cur;
  }

  status write_file_entry(int dir, const state_entry& e) {
    const fs::path obj = object_path(results_root_, e.digest);
    unique_fd in(::open(obj.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (!in)
      return make_error(error_kind::invalid_argument, "{}: its object {} is missing", e.path,
                        obj.string());
    unique_fd out(::openat(dir, fs::path(e.path).filename().c_str(),
                           O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!out) return sys_error(errno, "create {}", e.path);
    const auto copied = EB_TRY(copy_hashing(in.get(), out.get(), obj.string(), e.path));
    if (copied.first != e.digest)
      return make_error(error_kind::invalid_argument,
                        "{}: its object {} does not hold the bytes of its digest (damaged)", e.path,
                        obj.string());
    if (::fchown(out.get(), uid_, gid_) != 0 || ::fchmod(out.get(), e.mode) != 0)
      return sys_error(errno, "set the owner and mode of {}", e.path);
    return {};
  }

  fs::path results_root_;
  uid_t uid_;
  gid_t gid_;
  unique_fd base_fd_, root_;
};

}  // namespace

status write_state_layer(const fs::path& results_root, const state_tree& tree, const fs::path& base,
                         const fs::path& to, uid_t uid, gid_t gid) {
  layer_writer w(results_root, base, uid, gid);
  EB_TRY(w.open_root(to));
  for (const auto& e : tree.entries) EB_TRY_CTX(w.write(e), fmt::format("state {}", tree.name));
  return {};
}

object_totals count_objects(const fs::path& results_root) {
  object_totals t;
  std::error_code ec;
  const fs::path dir = results_root / objects_dir / "sha256";
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      ++t.objects;
      t.bytes += static_cast<uint64_t>(st.st_size);
    }
  }
  return t;
}

}  // namespace results
}  // namespace evalbox::harness
