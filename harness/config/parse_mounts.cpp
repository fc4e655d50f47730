// What a run sees besides its workspace, as fixtures and suites write it: named mounts
// (`mounts:`), content-addressed bundles (`bundles:`) and caches (`caches:`). Only the form is
// checked here; the sources are resolved and checked against the file system when the file is
// loaded (harness/fixture/load.cpp), and bundles verified when they enter the store.
#include <algorithm>
#include <array>
#include <filesystem>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "base/digest.h"
#include "base/fs.h"
#include "harness/config/parse_parts.h"

namespace evalbox::harness {
inline namespace config {
namespace parsing {

namespace fs = std::filesystem;

namespace {

// Where the sandbox puts something of its own: a mount at, below or above one would hide it or
// be hidden by it. System directories are the host's (or the image's), read-only.
constexpr std::array<std::string_view, 17> reserved_targets = {
    "/workspace", "/grader", "/proc", "/dev", "/sys",   "/tmp",   "/home/agent", "/evalbox", "/etc",
    "/usr",       "/bin",    "/sbin", "/lib", "/lib32", "/lib64", "/libx32",     "/tests"};

constexpr std::string_view target_hint =
    "a directory of its own inside the sandbox, e.g. /data, /scratch or /opt/reflib";

// Why `t` is no target, or "".
std::string target_problem(std::string_view t) {
  if (!t.starts_with('/')) return "is not an absolute path";
  const fs::path p(t);
  if (std::any_of(p.begin(), p.end(), [](const fs::path& c) { return c == ".."; }))
    return "has a '..' component";
  if (!is_normal_absolute(t)) return "is not in normal form (no '.', '//' or trailing '/')";
  if (t == "/") return "is the sandbox's root";
  for (std::string_view r : reserved_targets) {
    if (is_within(p, r)) return fmt::format("lies in {}, which the sandbox makes itself", r);
    if (is_within(r, p)) return fmt::format("would hide {}, which the sandbox makes itself", r);
  }
  return {};
}

// Why `s` is no source, or "".
std::string source_problem(std::string_view s) {
  const fs::path p(s);
  if (p.is_absolute()) return "is an absolute path";
  if (std::any_of(p.begin(), p.end(), [](const fs::path& c) { return c == ".."; }))
    return "has a '..' component";
  std::string_view trimmed = s;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.remove_suffix(1);
  if (!is_safe_relative(fs::path(trimmed))) return "is not a plain relative path";
  return {};
}

// source: relative to the file, no "..".
std::optional<std::string> read_source(reader& r, const YAML::Node& n, const std::string& what) {
  auto s = r.string(n, what);
  if (!s) return std::nullopt;
  if (std::string why = source_problem(*s); !why.empty()) {
    r.fail(n, fmt::format("{} '{}' {}", what, *s, why),
           "write a path relative to this file's directory, inside it (e.g. data/corpus)");
    return std::nullopt;
  }
  return s;
}

std::optional<std::string> read_target(reader& r, const YAML::Node& n, const std::string& what) {
  auto s = r.string(n, what);
  if (!s) return std::nullopt;
  if (std::string why = target_problem(*s); !why.empty()) {
    r.fail(n, fmt::format("{} '{}' {}", what, *s, why), std::string(target_hint));
    return std::nullopt;
  }
  return s;
}

std::optional<mount_spec> parse_mount(reader& r, const YAML::Node& n, const std::string& what) {
  static constexpr std::string_view known[] = {"source", "target", "access", "max_bytes"};
  static constexpr std::string_view required[] = {"source", "target", "access"};
  // Counted before the mapping is read: a mount missing a required key is no mount (its empty
  // target would be checked against the others with no place to name).
  const size_t before = r.error_count();
  auto f = r.mapping(n, what, known, required);
  if (!f) return std::nullopt;
  mount_spec m;
  m.where = r.at(n);
  if (f->has("source")) {
    m.source_where = r.at(f->get("source"));
    if (auto s = read_source(r, f->get("source"), what + ".source")) m.source = *s;
  }
  if (f->has("target")) {
    m.target_where = r.at(f->get("target"));
    if (auto t = read_target(r, f->get("target"), what + ".target")) m.target = *t;
  }
  if (f->has("access")) {
    YAML::Node a = f->get("access");
    if (auto s = r.string(a, what + ".access")) {
      if (*s == "read-only")
        m.access = mount_spec::access_kind::read_only;
      else if (*s == "ephemeral-write")
        m.access = mount_spec::access_kind::ephemeral_write;
      else
        r.fail(a, fmt::format("{}.access '{}' is not an access mode", what, *s),
               "write read-only (bound read-only) or ephemeral-write (the run's own copy, gone "
               "after it, capped at max_bytes)");
    }
  }
  if (f->has("max_bytes")) {
    YAML::Node b = f->get("max_bytes");
    m.max_bytes = r.size_bytes(b, what + ".max_bytes");
    if (m.max_bytes && f->has("access") && m.access == mount_spec::access_kind::read_only)
      r.fail(b, fmt::format("{}.max_bytes applies to ephemeral-write mounts only", what),
             "drop it: nothing is written to a read-only mount");
  } else if (f->has("access") && m.access == mount_spec::access_kind::ephemeral_write &&
             r.error_count() == before) {
    r.fail(n, fmt::format("{} is ephemeral-write without max_bytes", what),
           "give the cap of what the run may write there, e.g. max_bytes: 256MiB");
  }
  if (r.error_count() != before) return std::nullopt;
  return m;
}

std::optional<bundle_spec> parse_bundle(reader& r, const YAML::Node& n, const std::string& what) {
  static constexpr std::string_view known[] = {"digest", "source", "target"};
  const size_t before = r.error_count();  // as parse_mount's
  auto f = r.mapping(n, what, known, known);
  if (!f) return std::nullopt;
  bundle_spec b;
  b.where = r.at(n);
  if (f->has("digest")) {
    YAML::Node d = f->get("digest");
    b.digest_where = r.at(d);
    if (auto s = r.string(d, what + ".digest")) {
      if (!s->starts_with("sha256:") || !is_sha256_hex(std::string_view(*s).substr(7)))
        r.fail(d, fmt::format("{}.digest '{}' is not sha256:<64 lowercase hex digits>", what, *s),
               "write what `evalbox bundle digest PATH` prints");
      else
        b.digest = *s;
    }
  }
  if (f->has("source")) {
    b.source_where = r.at(f->get("source"));
    if (auto s = read_source(r, f->get("source"), what + ".source")) b.source = *s;
  }
  if (f->has("target")) {
    b.target_where = r.at(f->get("target"));
    if (auto t = read_target(r, f->get("target"), what + ".target")) b.target = *t;
  }
  if (r.error_count() != before) return std::nullopt;
  return b;
}

// A cache's target: where a mount's may be, or below the managed home (where clients keep
// theirs: ~/.cache/pip, ~/.npm), but not the home itself.
std::optional<std::string> read_cache_target(reader& r, const YAML::Node& n,
                                             const std::string& what) {
  auto s = r.string(n, what);
  if (!s) return std::nullopt;
  std::string why = target_problem(*s);
  if (!why.empty() && is_normal_absolute(*s) && is_within(fs::path(*s), "/home/agent") &&
      *s != "/home/agent" && source_problem(s->substr(1)).empty())
    why.clear();
  if (*s == "/home/agent") why = "is the managed home itself: a cache lies below it";
  if (!why.empty()) {
    r.fail(n, fmt::format("{} '{}' {}", what, *s, why),
           "a directory of its own inside the sandbox, or below the home, e.g. "
           "/home/agent/.cache/pip or /opt/cache");
    return std::nullopt;
  }
  return s;
}

bool valid_cache_name(std::string_view name) {
  return !name.empty() && name.size() <= 64 && name != "." && name != ".." &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '.' || c == '-';
         });
}

std::optional<cache_spec> parse_cache(reader& r, const YAML::Node& key, const YAML::Node& n) {
  static constexpr std::string_view known[] = {"target", "warm", "network", "context", "max_bytes"};
  static constexpr std::string_view required[] = {"target", "warm"};
  cache_spec c;
  if (auto name = r.string(key, "caches key")) c.name = *name;
  const std::string what = fmt::format("caches.{}", c.name);
  const size_t before = r.error_count();
  if (!c.name.empty() && !valid_cache_name(c.name))
    r.fail(key, fmt::format("cache name '{}' is not [A-Za-z0-9_.-]{{1,64}}", c.name),
           "name it by what it holds, e.g. pip or npm");
  auto f = r.mapping(n, what, known, required);
  if (!f) return std::nullopt;
  c.where = r.at(key);
  if (f->has("target")) {
    c.target_where = r.at(f->get("target"));
    if (auto t = read_cache_target(r, f->get("target"), what + ".target")) c.target = *t;
  }
  if (f->has("warm")) {
    YAML::Node w = f->get("warm");
    c.warm_where = r.at(w);
    if (w.IsScalar()) {
      if (auto s = r.string(w, what + ".warm")) c.warm = {*s};
    } else if (auto l = r.string_list(w, what + ".warm")) {
      c.warm = *l;
    }
  }
  if (f->has("network")) c.network = parse_network(r, f->get("network"), what + ".network");
  if (f->has("context")) {
    c.context_where = r.at(f->get("context"));
    if (auto s = read_source(r, f->get("context"), what + ".context")) c.context = *s;
  }
  if (f->has("max_bytes"))
    if (auto b = r.size_bytes(f->get("max_bytes"), what + ".max_bytes")) c.max_bytes = *b;
  if (r.error_count() != before) return std::nullopt;
  return c;
}

// Each target once, none inside another: a mount over a mount hides one of them.
void check_targets(reader& r, const std::vector<mount_spec>& mounts,
                   const std::vector<bundle_spec>& bundles, const std::vector<cache_spec>& caches) {
  std::vector<std::pair<std::string, source_location>> seen;
  auto claim = [&](const std::string& target, const source_location& where) {
    for (const auto& [other, other_where] : seen) {
      if (!is_within(target, other) && !is_within(other, target)) continue;
      r.fail(where,
             fmt::format("target {} {} the target {} of {}", target,
                         target == other ? "repeats" : "overlaps", other, other_where.to_string()),
             "give each mount, bundle and cache a directory of its own, none inside another");
      return;
    }
    seen.emplace_back(target, where);
  };
  for (const auto& m : mounts) claim(m.target, m.target_where);
  for (const auto& b : bundles) claim(b.target, b.target_where);
  for (const auto& c : caches) claim(c.target, c.target_where);
}

}  // namespace

void parse_inputs(reader& r, const fields& f, std::vector<mount_spec>& mounts,
                  std::vector<bundle_spec>& bundles, std::vector<cache_spec>& caches) {
  if (f.has("mounts")) {
    YAML::Node list = f.get("mounts");
    if (!list.IsSequence()) {
      r.fail(list, fmt::format("mounts is {}, not a list", type_name(list)),
             "write mounts: [{source: DIR, target: /PATH, access: read-only}, ...]");
    } else {
      for (size_t i = 0; i < list.size(); ++i)
        if (auto m = parse_mount(r, list[i], fmt::format("mounts[{}]", i)))
          mounts.push_back(std::move(*m));
    }
  }
  if (f.has("bundles")) {
    YAML::Node list = f.get("bundles");
    if (!list.IsSequence()) {
      r.fail(list, fmt::format("bundles is {}, not a list", type_name(list)),
             "write bundles: [{digest: \"sha256:…\", source: PATH, target: /PATH}, ...]");
    } else {
      for (size_t i = 0; i < list.size(); ++i)
        if (auto b = parse_bundle(r, list[i], fmt::format("bundles[{}]", i)))
          bundles.push_back(std::move(*b));
    }
  }
  if (f.has("caches")) {
    YAML::Node map = f.get("caches");
    if (!map.IsMap()) {
      r.fail(map, fmt::format("caches is {}, not a mapping", type_name(map)),
             "write caches: {pip: {target: /home/agent/.cache/pip, warm: [pip download ...]}}");
    } else {
      for (const auto& kv : map)
        if (auto c = parse_cache(r, kv.first, kv.second)) caches.push_back(std::move(*c));
    }
  }
  check_targets(r, mounts, bundles, caches);
}

}  // namespace parsing
}  // namespace config
}  // namespace evalbox::harness
