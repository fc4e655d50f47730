// Request validation (see validate.h). Rules run in the order of the request's fields; the
// first violation is reported. Nothing here writes to disk.
#include "sandbox/spec/validate.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "base/digest.h"
#include "base/fs.h"
#include "base/units.h"
#include "sandbox/spec/system_paths.h"

namespace evalbox::sandbox {
inline namespace spec {

namespace fs = std::filesystem;

namespace {

std::unexpected<error> invalid(std::string message) {
  return make_error(error_kind::invalid_argument, std::move(message));
}

// Lexical and resolved forms of a path: a symlink that points into a protected root is
// caught by the resolved form, a path that does not exist (yet) by the lexical one.
std::vector<fs::path> forms(const fs::path& p) {
  std::vector<fs::path> out{normalize(p)};
  std::error_code ec;
  fs::path canon = fs::weakly_canonical(p, ec);
  if (!ec && canon != out.front()) out.push_back(canon);
  return out;
}

// A protected root with its forms, resolved once per validation: every path checked is
// compared with every root, and resolving a root again each time (a readlink and a stat per
// component) was most of a prepare's system calls.
struct guarded_root {
  fs::path path;
  std::vector<fs::path> forms;
};
using guarded_roots = std::vector<guarded_root>;

guarded_roots guard(const std::vector<fs::path>& roots) {
  guarded_roots out;
  out.reserve(roots.size());
  for (const auto& root : roots) out.push_back({root, forms(root)});
  return out;
}

// The protected root that `p` lies inside (`inside`) or, when `contains` is set, that lies
// inside `p`, which would expose it through a mount of p; null when none.
struct protected_hit {
  const guarded_root* root = nullptr;
  bool inside = false;
};

protected_hit hit_protected(const fs::path& p, const guarded_roots& roots, bool contains) {
  const std::vector<fs::path> pforms = forms(p);
  auto any = [&](const guarded_root& root, bool inside) {
    for (const auto& pf : pforms)
      for (const auto& rf : root.forms)
        if (inside ? is_within(pf, rf) : is_within(rf, pf)) return true;
    return false;
  };
  for (const auto& root : roots) {
    if (any(root, true)) return {&root, true};
    if (contains && any(root, false)) return {&root, false};
  }
  return {};
}

status check_not_protected(std::string_view what, const fs::path& p, const guarded_roots& roots,
                           bool contains) {
  if (const protected_hit hit = hit_protected(p, roots, contains); hit.root) {
    return make_error(
        error_kind::permission,
        "{} {} {} protected root {}: protected roots (the project, results, grader files, "
        "run state, credential sources) must never be visible to or run by the sandbox; "
        "move it out of {} or drop it from the request",
        what, p.string(), hit.inside ? "lies inside" : "would expose the", hit.root->path.string(),
        hit.root->path.string());
  }
  return {};
}

status check_limits(const resource_limits& l) {
  using b = limit_bounds;
  auto range = [](std::string_view name, uint64_t v, uint64_t lo, uint64_t hi,
                  auto fmt_fn) -> status {
    if (v < lo || v > hi)
      return invalid(fmt::format(
          "limit {} = {} is outside the accepted range {}..{}: zero is no limit and larger "
          "values are unit mistakes; set a value in that range",
          name, fmt_fn(v), fmt_fn(lo), fmt_fn(hi)));
    return {};
  };
  auto bytes = [](uint64_t v) { return format_bytes(v); };
  auto ms = [](uint64_t v) { return format_duration_ms(v); };
  auto count = [](uint64_t v) { return std::to_string(v); };
  EB_TRY(range("cpu", l.cpu_ms, b::cpu_ms_min, b::cpu_ms_max, ms));
  EB_TRY(range("memory", l.memory_bytes, b::memory_min, b::memory_max, bytes));
  EB_TRY(range("pids", l.pids, b::pids_min, b::pids_max, count));
  EB_TRY(range("wall", l.wall_ms, b::wall_ms_min, b::wall_ms_max, ms));
  EB_TRY(range("disk", l.disk_bytes, b::disk_min, b::disk_max, bytes));
  EB_TRY(range("output", l.output_bytes, b::output_min, b::output_max, bytes));
  return {};
}

status check_network(const network_policy& n) {
  if (n.mode == network_mode::host && !n.unsafe_host_network)
    return invalid(
        "network mode host shares the host's network with the agent; it needs the explicit "
        "unsafe_host_network opt-in, or use none/allow");
  if (n.mode == network_mode::allow && n.allow.empty())
    return invalid(
        "network mode allow with an empty allow list reaches nothing: list "
        "host:port entries or use none");
  for (const auto& a : n.allow)
    if (!valid_allow_entry(a))
      return invalid(fmt::format(
          "network allow entry '{}' is malformed: write host:port (or [v6]:port) with a "
          "port in 1..65535",
          a));
  return {};
}

status check_argv0(const session_request& r, const guarded_roots& roots) {
  if (r.argv.empty()) return invalid("argv is empty: give the agent's command, argv[0] first");
  for (const auto& a : r.argv)
    if (a.find('\0') != std::string::npos)
      return invalid("argv contains a NUL byte, which no program can receive");
  const std::string& name = r.argv[0];
  if (name.empty()) return invalid("argv[0] is empty: give the program to run");
  // A bare name is looked up on the sandbox's own PATH when the program starts (the image's,
  // or the host's system directories): nothing of the host's PATH is consulted.
  if (name.find('/') == std::string::npos) {
    if (name == "." || name == "..")
      return invalid(fmt::format("argv[0] '{}' is not a program name", name));
    return {};
  }
  fs::path exe = name;
  if (!exe.is_absolute())
    return invalid(fmt::format(
        "argv[0] '{}' is a relative path: give the full path of the program, or a bare name "
        "to look up on the sandbox's PATH",
        exe.string()));
  // Below a system directory with an image root: the image's program, not the host's.
  if (r.image && below_system_path(normalize(exe))) return {};
  // A program seen through a host bind (a host client's loader in an image): the host file.
  for (const auto& b : r.host_binds)
    if (is_within(exe, b.target))
      exe = normalize(exe) == normalize(b.target)
                ? b.source
                : b.source / normalize(exe).lexically_relative(normalize(b.target));
  EB_TRY(check_not_protected("argv[0]", exe, roots, false));
  struct stat st {};
  if (::stat(exe.c_str(), &st) != 0)
    return make_error(error_kind::not_found,
                      "argv[0] {} does not exist (or cannot be reached): install the agent or "
                      "fix its path",
                      exe.string());
  if (!S_ISREG(st.st_mode) || (st.st_mode & 0111) == 0 || ::access(exe.c_str(), X_OK) != 0)
    return invalid(fmt::format(
        "argv[0] {} is not an executable file: point it at the program itself and make it "
        "executable (chmod +x)",
        exe.string()));
  // The directories that will be bound read-only for it must not expose a protected root.
  for (const auto& f : forms(exe)) {
    fs::path dir = f.parent_path();
    if (!below_system_path(dir))
      EB_TRY(check_not_protected("argv[0]'s directory", dir, roots, true));
  }
  return {};
}

// An absolute, normalized path inside the sandbox other than / and outside what the sandbox
// builds itself (/proc, /dev, /tmp, /home/agent).
status check_sandbox_path(std::string_view what, const fs::path& t) {
  if (!t.is_absolute() || t.lexically_normal() != t || normalize(t) == "/" ||
      !is_safe_relative(t.relative_path()))
    return invalid(fmt::format(
        "{} '{}' must be an absolute, normalized path inside the sandbox other than / (e.g. "
        "/app)",
        what, t.string()));
  for (const char* reserved : {"/proc", "/dev", "/sys", "/tmp", sandbox_home})
    if (is_within(t, reserved) || is_within(reserved, t))
      return invalid(
          fmt::format("{} {} {} {}, which the sandbox builds itself; choose another path", what,
                      t.string(), is_within(t, reserved) ? "lies in" : "holds", reserved));
  return {};
}

status check_image(const session_request& r) {
  if (!r.image) {
    if (!r.workspace.image_dir.empty())
      return invalid(fmt::format(
          "workspace image_dir {} needs an image root: without an image there is no image "
          "directory to start from",
          r.workspace.image_dir.string()));
    if (normalize(r.workspace.target) != fs::path(sandbox_workspace))
      return invalid(
          fmt::format("workspace target {}: without an image root the workspace is at {}",
                      r.workspace.target.string(), sandbox_workspace));
    return {};
  }
  const std::string& id = r.image->id;
  if (!id.starts_with("sha256:") || !is_sha256_hex(id.substr(7)))
    return invalid(fmt::format(
        "image id '{}' is not sha256:<64 hex>: name the image by the id the store gave it", id));
  EB_TRY(check_sandbox_path("workspace target", r.workspace.target));
  if (!r.workspace.image_dir.empty()) {
    if (!r.workspace.source.empty())
      return invalid(fmt::format(
          "the workspace has both a host source ({}) and an image directory ({}): give one",
          r.workspace.source.string(), r.workspace.image_dir.string()));
    EB_TRY(check_sandbox_path("workspace image_dir", r.workspace.image_dir));
  }
  return {};
}

// Rejects a symlink in any existing component of `rel` below `base` (the launcher would
// follow it out of the tree).
status check_no_symlink(const fs::path& base, const fs::path& rel, std::string_view what) {
  fs::path cur = base;
  for (const auto& part : rel) {
    cur /= part;
    struct stat st {};
    if (::lstat(cur.c_str(), &st) != 0) return {};
    if (S_ISLNK(st.st_mode))
      return invalid(fmt::format(
          "{} passes through the symlink {}: a mount target must not follow a link out of "
          "its tree; use a path without links",
          what, cur.string()));
  }
  return {};
}

status check_workspace(const session_request& r, guarded_roots roots, const fs::path& state_root) {
  const fs::path& src = r.workspace.source;
  if (!r.workspace.image_dir.empty()) return {};  // from the image (check_image)
  if (src.empty() || !src.is_absolute())
    return invalid(
        fmt::format("workspace source '{}' is not an absolute path: give the "
                    "fixture workspace directory's host path",
                    src.string()));
  // A tree of <state>/workspace-sources (request.h) is inside the state root but exposes
  // nothing of it: the state root itself does not count for it (every other root still does).
  // Resolved too: a link there must not lead elsewhere in the state root.
  if (!state_root.empty()) {
    std::error_code ec1, ec2;
    const fs::path shared = fs::canonical(workspace_sources_dir(state_root), ec1);
    const fs::path real = fs::canonical(src, ec2);
    if (!ec1 && !ec2 && is_within(src, workspace_sources_dir(state_root)) &&
        is_within(real, shared) && real != shared)
      std::erase_if(
          roots, [&](const guarded_root& g) { return normalize(g.path) == normalize(state_root); });
  }
  EB_TRY(check_not_protected("workspace source", src, roots, true));
  struct stat st {};
  if (::stat(src.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return make_error(error_kind::not_found,
                      "workspace source {} is not an existing directory: create it or fix the "
                      "path",
                      src.string());
  fs::path git = src / ".git";
  if (::lstat(git.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
    return invalid(fmt::format(
        "workspace {}/.git is {} instead of a real directory: a gitfile or link points at a "
        "repository outside the workspace, which the sandbox cannot see and must not write; "
        "make the fixture hold its own .git directory (git clone --no-separate-git-dir)",
        src.string(), S_ISLNK(st.st_mode) ? "a symlink" : "a file"));
  if (!r.workspace.digest.empty() && !is_sha256_hex(r.workspace.digest))
    return invalid(
        fmt::format("workspace digest '{}' is not 64 lowercase hex characters "
                    "(a SHA-256): fix or omit it",
                    r.workspace.digest));
  return {};
}

status check_secret(const secret_mount& s, const guarded_roots& roots) {
  if (!valid_handle(s.handle))
    return invalid(
        fmt::format("credential handle '{}' must match [A-Za-z0-9_.-]{{1,64}}: it "
                    "names the lease file",
                    s.handle));
  if (!s.source.is_absolute())
    return invalid(fmt::format("credential {} source '{}' is not an absolute path", s.handle,
                               s.source.string()));
  // The source is always a protected root itself; only the request's and the state's count.
  guarded_roots others;
  for (const auto& root : roots)
    if (normalize(root.path) != normalize(s.source)) others.push_back(root);
  EB_TRY(
      check_not_protected(fmt::format("credential {} source", s.handle), s.source, others, false));
  struct stat st {};
  if (::lstat(s.source.c_str(), &st) != 0)
    return make_error(error_kind::not_found,
                      "credential {} source {} does not exist: log in with the agent first "
                      "or fix the path",
                      s.handle, s.source.string());
  if (S_ISLNK(st.st_mode))
    return invalid(
        fmt::format("credential {} source {} is a symlink: a lease is copied from "
                    "a regular file only (a link could be swapped for another "
                    "file); give the link's target",
                    s.handle, s.source.string()));
  if (!S_ISREG(st.st_mode))
    return invalid(
        fmt::format("credential {} source {} is not a regular file", s.handle, s.source.string()));
  if (static_cast<uint64_t>(st.st_size) > max_credential_bytes)
    return invalid(
        fmt::format("credential {} source {} is {} (more than 1 MiB): that is not "
                    "a credential file; point at the token file itself",
                    s.handle, s.source.string(), format_bytes(st.st_size)));
  if (st.st_mode & 077)
    return make_error(error_kind::permission,
                      "credential {} source {} has mode {:04o}: group or others may read or "
                      "write it; run chmod 600 {} first",
                      s.handle, s.source.string(), st.st_mode & 07777, s.source.string());
  if (s.max_concurrent < 1 || s.max_concurrent > max_credential_holders)
    return invalid(fmt::format("credential {} max_concurrent {} is outside 1..{}", s.handle,
                               s.max_concurrent, max_credential_holders));
  if (!s.host_only && !is_safe_relative(s.target))
    return invalid(
        fmt::format("credential {} target '{}' must be a relative path inside the "
                    "home without '..' (e.g. .codex/auth.json)",
                    s.handle, s.target.string()));
  return {};
}

// True when `source` is a tree of the cache store (<state>/caches/<key>/tree), resolved too: a
// link there must not lead elsewhere.
bool in_cache_store(const fs::path& source, const fs::path& state_root) {
  if (state_root.empty()) return false;
  const fs::path store = cache_store_dir(state_root);
  const fs::path rel = normalize(source).lexically_relative(normalize(store));
  const std::vector<fs::path> parts(rel.begin(), rel.end());  // <key>/tree exactly
  if (parts.size() != 2 || !is_sha256_hex(parts[0].string()) || parts[1] != "tree") return false;
  const fs::path& key = parts[0];
  std::error_code ec1, ec2;
  const fs::path real_store = fs::canonical(store, ec1);
  const fs::path real = fs::canonical(source, ec2);
  return !ec1 && !ec2 && real == real_store / key / "tree";
}

// True when `source` is the tree the bundle store holds for `sha256`
// (<state>/bundles/<sha256>/tree), resolved too: a link there must not lead elsewhere.
bool in_bundle_store(const fs::path& source, const std::string& sha256,
                     const fs::path& state_root) {
  if (state_root.empty()) return false;
  const fs::path expected = bundle_store_dir(state_root) / sha256 / "tree";
  if (normalize(source) != normalize(expected)) return false;
  std::error_code ec1, ec2;
  const fs::path store = fs::canonical(bundle_store_dir(state_root), ec1);
  const fs::path real = fs::canonical(source, ec2);
  return !ec1 && !ec2 && real == store / sha256 / "tree";
}

status check_bundle(const bundle& b, guarded_roots roots, const workspace_spec& workspace,
                    const fs::path& state_root) {
  if (!is_sha256_hex(b.sha256))
    return invalid(
        fmt::format("bundle {} digest '{}' is not 64 lowercase hex characters (a "
                    "SHA-256 tree digest)",
                    b.source.string(), b.sha256));
  if (!b.source.is_absolute())
    return invalid(fmt::format("bundle source '{}' is not an absolute path", b.source.string()));
  // A tree of the bundle store exposes nothing else of the state root, and was verified when
  // it entered the store: the state root does not count for it and it is not digested again.
  const bool stored = in_bundle_store(b.source, b.sha256, state_root);
  if (stored)
    std::erase_if(
        roots, [&](const guarded_root& g) { return normalize(g.path) == normalize(state_root); });
  EB_TRY(check_not_protected("bundle source", b.source, roots, true));
  fs::path t = b.target;
  if (!t.is_absolute() || t.lexically_normal() != t || normalize(t) == "/" ||
      !is_safe_relative(t.relative_path()))
    return invalid(
        fmt::format("bundle target '{}' must be an absolute, normalized path inside "
                    "the sandbox other than / (e.g. /evalbox/bin)",
                    t.string()));
  for (const char* reserved : {"/proc", "/dev", "/sys", "/tmp"})
    if (is_within(t, reserved))
      return invalid(
          fmt::format("bundle target {} lies in {}, which the sandbox builds "
                      "itself; choose another path",
                      t.string(), reserved));
  const fs::path ws = normalize(workspace.target);
  if (is_within(t, ws) && normalize(t) != ws && !workspace.source.empty())
    EB_TRY(check_no_symlink(workspace.source, t.lexically_relative(ws),
                            fmt::format("bundle target {}", t.string())));
  if (stored) return {};
  auto digest = tree_digest(b.source);
  if (!digest)
    return make_error(error_kind::not_found, "bundle source {} cannot be read: {}",
                      b.source.string(), digest.error().message);
  if (*digest != b.sha256)
    return invalid(
        fmt::format("bundle {} does not match its digest: expected {}, found {}; "
                    "the content changed since it was named, rebuild the bundle",
                    b.source.string(), b.sha256, *digest));
  return {};
}

// A named mount (request.h): its source outside every protected root (and exposing none), an
// ephemeral-write source a directory, its cap within the disk bounds, its target a path of
// the sandbox's own. Targets are claimed in check_targets.
status check_mount(const named_mount& m, guarded_roots roots, const fs::path& state_root) {
  if (!m.source.is_absolute())
    return invalid(fmt::format("mount source '{}' is not an absolute path", m.source.string()));
  // A tree of the cache store exposes nothing else of the state root.
  if (in_cache_store(m.source, state_root))
    std::erase_if(
        roots, [&](const guarded_root& g) { return normalize(g.path) == normalize(state_root); });
  EB_TRY(check_not_protected("mount source", m.source, roots, true));
  // Below the managed home (a cache of a client's: ~/.cache/pip) or a path of its own.
  const bool in_home = is_within(m.target, sandbox_home) && normalize(m.target) != sandbox_home &&
                       m.target.lexically_normal() == m.target &&
                       is_safe_relative(m.target.relative_path());
  if (!in_home) EB_TRY(check_sandbox_path("mount target", m.target));
  if (is_within(m.target, sandbox_workspace) || is_within(sandbox_workspace, m.target))
    return invalid(fmt::format(
        "mount target {} overlaps {}, the run's workspace; choose another path (e.g. /data)",
        m.target.string(), sandbox_workspace));
  struct stat st {};
  if (::stat(m.source.c_str(), &st) != 0)
    return make_error(error_kind::not_found, "mount source {} does not exist", m.source.string());
  if (m.access == mount_access::ephemeral_write) {
    if (!S_ISDIR(st.st_mode))
      return invalid(fmt::format(
          "mount source {} is not a directory: an ephemeral-write mount is a directory's "
          "copy-on-write view",
          m.source.string()));
    if (m.max_bytes < limit_bounds::disk_min || m.max_bytes > limit_bounds::disk_max)
      return invalid(fmt::format("mount {} max_bytes = {} is outside the accepted range {}..{}",
                                 m.target.string(), format_bytes(m.max_bytes),
                                 format_bytes(limit_bounds::disk_min),
                                 format_bytes(limit_bounds::disk_max)));
  }
  if (!m.digest.empty() && !is_sha256_hex(m.digest))
    return invalid(fmt::format("mount {} digest '{}' is not 64 lowercase hex characters",
                               m.source.string(), m.digest));
  return {};
}

status check_targets(const session_request& r) {
  std::map<fs::path, std::string> seen;  // sandbox path -> what claimed it
  auto claim = [&](fs::path target, std::string what) -> status {
    target = normalize(target);
    auto [it, fresh] = seen.emplace(target, what);
    if (!fresh)
      return invalid(
          fmt::format("duplicate target {}: both {} and {} are placed there; give "
                      "each its own path",
                      target.string(), it->second, what));
    return {};
  };
  fs::path home = sandbox_home;
  for (const auto& d : r.home.directories) {
    if (!is_safe_relative(d))
      return invalid(
          fmt::format("home directory '{}' must be a relative path without '..'", d.string()));
    seen.emplace(normalize(home / d), "home directory " + d.string());  // repeats are fine
  }
  for (const auto& f : r.home.files) {
    if (!is_safe_relative(f.path))
      return invalid(
          fmt::format("home file '{}' must be a relative path without '..'", f.path.string()));
    if (f.mode & ~07777u)
      return invalid(fmt::format("home file {} has an invalid mode {:o}", f.path.string(), f.mode));
    EB_TRY(claim(home / f.path, "home file " + f.path.string()));
  }
  std::set<std::string> handles;
  std::set<fs::path> sources;
  for (const auto& s : r.secrets) {
    if (!handles.insert(s.handle).second)
      return invalid(
          fmt::format("credential handle {} appears twice: one lease per handle", s.handle));
    if (!sources.insert(normalize(s.source)).second)
      return invalid(
          fmt::format("credential source {} appears twice: a lease is exclusive, "
                      "so one run cannot hold it twice",
                      s.source.string()));
    if (s.host_only) {
      if (!s.target.empty())
        return invalid(
            fmt::format("credential {} is host-only: it has no target inside", s.handle));
      continue;
    }
    EB_TRY(claim(home / s.target, "credential " + s.handle));
  }
  for (const auto& b : r.bundles) EB_TRY(claim(b.target, "bundle " + b.source.string()));
  for (const auto& b : r.host_binds) EB_TRY(claim(b.target, "host bind " + b.source.string()));
  for (const auto& m : r.mounts) EB_TRY(claim(m.target, "mount " + m.source.string()));
  // A mount nested in another's tree would be hidden by it, or hide part of it. A mount below
  // the home may lie in a home directory, but never over a credential or a home file.
  for (const auto& m : r.mounts)
    for (const auto& [path, what] : seen) {
      if (path == normalize(m.target)) continue;
      const bool file = what.rfind("home file", 0) == 0 || what.rfind("credential", 0) == 0;
      if (file && is_within(path, m.target))
        return invalid(fmt::format("mount target {} would hide {} at {}: choose another path",
                                   m.target.string(), what, path.string()));
      if ((is_within(path, m.target) || is_within(m.target, path)) && what.rfind("home", 0) != 0 &&
          !file)
        return invalid(fmt::format("mount target {} overlaps {} at {}: give each its own tree",
                                   m.target.string(), what, path.string()));
    }
  for (const auto& p : r.readonly_paths) {
    if (!seen.count(normalize(p)))  // the same path twice is harmless
      EB_TRY(claim(p, "read-only path " + p.string()));
  }
  // A file target cannot also be the parent of another target.
  for (const auto& [path, what] : seen) {
    if (what.rfind("home file", 0) != 0 && what.rfind("credential", 0) != 0) continue;
    for (const auto& [other, other_what] : seen)
      if (other != path && is_within(other, path))
        return invalid(fmt::format("{} at {} is a file, but {} is placed below it", what,
                                   path.string(), other_what));
  }
  return {};
}

}  // namespace

bool valid_run_id(std::string_view id) noexcept {
  if (id.empty() || id.size() > 64) return false;
  auto lower_alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!lower_alnum(id[0])) return false;
  return std::all_of(id.begin(), id.end(),
                     [&](char c) { return lower_alnum(c) || c == '_' || c == '.' || c == '-'; });
}

bool valid_handle(std::string_view h) noexcept {
  if (h.empty() || h.size() > 64 || h == "." || h == "..") return false;
  return std::all_of(h.begin(), h.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
  });
}

bool valid_allow_entry(std::string_view e) noexcept {
  auto colon = e.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  std::string_view host = e.substr(0, colon), port = e.substr(colon + 1);
  if (port.empty() || port.size() > 5) return false;
  unsigned value = 0;
  for (char c : port) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  if (value < 1 || value > 65535) return false;
  if (host.front() == '[')
    return host.size() > 2 && host.back() == ']' &&
           std::all_of(host.begin() + 1, host.end() - 1, [](char c) {
             return std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.';
           });
  if (host.size() > 253) return false;
  return std::all_of(host.begin(), host.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
  });
}

std::vector<fs::path> protected_roots(const session_request& r, const fs::path& state_root) {
  std::vector<fs::path> roots = r.protected_roots;
  for (const auto& s : r.secrets) roots.push_back(s.source);
  if (!state_root.empty()) {
    roots.push_back(state_root);
    roots.push_back(state_root / "credential-leases");
  }
  return roots;
}

status validate(const session_request& r, const validation_context& ctx) {
  if (!valid_run_id(r.run_id))
    return invalid(
        fmt::format("run id '{}' must match [a-z0-9][a-z0-9_.-]{{0,63}}: it names "
                    "the run directory and cgroup",
                    r.run_id));
  if (r.authorized_until <= ctx.now)
    return make_error(error_kind::expired,
                      "run {}: its authorization expired; a stale request (e.g. from a "
                      "crashed planner) is not run — plan the run again",
                      r.run_id);
  if (r.backend != "linux")
    return invalid(fmt::format("backend '{}' is unknown: the only backend is linux", r.backend));
  for (const auto& root : r.protected_roots)
    if (!root.is_absolute())
      return invalid(fmt::format("protected root '{}' is not an absolute path", root.string()));
  const guarded_roots roots = guard(protected_roots(r, ctx.state_root));
  EB_TRY(check_argv0(r, roots));
  for (const auto& [k, v] : r.env)
    if (k.empty() || k.find_first_of("=\0", 0, 2) != std::string::npos ||
        v.find('\0') != std::string::npos)
      return invalid(
          fmt::format("environment variable '{}' has an empty name or contains "
                      "'=' or a NUL byte",
                      k));
  EB_TRY(check_image(r));
  EB_TRY(check_workspace(r, roots, ctx.state_root));
  for (const auto& s : r.secrets) EB_TRY(check_secret(s, roots));
  for (const auto& p : r.readonly_paths) {
    if (!p.is_absolute())
      return invalid(fmt::format("read-only path '{}' is not an absolute path", p.string()));
    EB_TRY(check_not_protected("read-only path", p, roots, true));
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0)
      return make_error(error_kind::not_found, "read-only path {} does not exist", p.string());
  }
  for (const auto& b : r.host_binds) {
    if (!b.source.is_absolute())
      return invalid(
          fmt::format("host bind source '{}' is not an absolute path", b.source.string()));
    EB_TRY(check_not_protected("host bind source", b.source, roots, true));
    struct stat st {};
    if (::stat(b.source.c_str(), &st) != 0)
      return make_error(error_kind::not_found, "host bind source {} does not exist",
                        b.source.string());
    if (b.writable)
      return invalid(fmt::format("host bind {} must be read-only", b.target.string()));
    EB_TRY(check_sandbox_path("host bind target", b.target));
  }
  for (const auto& m : r.mounts) EB_TRY(check_mount(m, roots, ctx.state_root));
  EB_TRY(check_targets(r));
  EB_TRY(check_limits(r.limits));
  EB_TRY(check_network(r.network));
  // Last: the only O(size) rule.
  for (const auto& b : r.bundles) EB_TRY(check_bundle(b, roots, r.workspace, ctx.state_root));
  return {};
}

}  // namespace spec
}  // namespace evalbox::sandbox
