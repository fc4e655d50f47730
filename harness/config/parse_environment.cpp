// What a run gets around it, as fixtures and suites write it: resource limits, the network
// policy, an environment image, a workspace from git; and the suite keys of Harbor tasks
// (images, harbor).
#include <algorithm>
#include <filesystem>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "base/fs.h"
#include "harness/config/parse_parts.h"
#include "harness/config/validate.h"

namespace evalbox::harness {
inline namespace config {
namespace parsing {

namespace fs = std::filesystem;

namespace {

// How to write an image reference, for a fixture's or suite's environment.image and a suite's
// images alike.
constexpr std::string_view image_reference_hint =
    "write docker://NAME[:TAG] (a registry image, pulled), oci:DIR[:TAG], oci-archive:FILE[:TAG], "
    "docker-archive:FILE[:NAME:TAG] or rootfs:DIR (paths relative to this file)";

}  // namespace

// limits: {wall, cpu, memory, pids, disk, output}
limits_spec parse_limits(reader& r, const YAML::Node& n, std::string_view what) {
  static constexpr std::string_view known[] = {"wall", "cpu", "memory", "pids", "disk", "output"};
  limits_spec out;
  auto f = r.mapping(n, what, known, {});
  if (!f) return out;
  for (const auto& [key, value] : f->entries) {
    std::string name = fmt::format("{}.{}", what, key);
    if (key == "pids") out.pids = r.positive_integer(value, name);
    if (key == "wall") out.wall_ms = r.duration_ms(value, name);
    if (key == "cpu") out.cpu_ms = r.duration_ms(value, name);
    if (key == "memory") out.memory_bytes = r.size_bytes(value, name);
    if (key == "disk") out.disk_bytes = r.size_bytes(value, name);
    if (key == "output") out.output_bytes = r.size_bytes(value, name);
  }
  return out;
}

// network: none | {allow: [host:port, ...]}
network_spec parse_network(reader& r, const YAML::Node& n, std::string_view what) {
  network_spec out;
  if (n.IsScalar()) {
    if (n.Scalar() != "none")
      r.fail(n, fmt::format("{} '{}' is not a network policy", what, n.Scalar()),
             "write `none`, or `{allow: [host:port, ...]}` to reach only those hosts");
    return out;
  }
  static constexpr std::string_view known[] = {"allow"};
  auto f = r.mapping(n, what, known, known);
  if (!f || !f->has("allow")) return out;
  out.mode = network_spec::mode_kind::allow;
  YAML::Node list = f->get("allow");
  auto hosts = r.string_list(list, fmt::format("{}.allow", what));
  if (!hosts) return out;
  for (size_t i = 0; i < hosts->size(); ++i) {
    if (std::string why = host_port_problem((*hosts)[i]); !why.empty())
      r.fail(list[i], fmt::format("{}.allow entry '{}' {}", what, (*hosts)[i], why),
             "write host:port, e.g. api.openai.com:443");
  }
  out.allow = std::move(*hosts);
  return out;
}

// environment: {image: REF, workdir: /dir}
std::optional<environment_spec> parse_environment(reader& r, const YAML::Node& n) {
  static constexpr std::string_view known[] = {"image", "workdir"};
  static constexpr std::string_view required[] = {"image"};
  auto f = r.mapping(n, "environment", known, required);
  if (!f) return std::nullopt;
  environment_spec e;
  e.where = r.at(n);
  const size_t before = r.error_count();
  if (f->has("image")) {
    YAML::Node image = f->get("image");
    e.image_where = r.at(image);
    if (auto s = r.string(image, "environment.image")) {
      if (std::string why = image_reference_problem(*s); !why.empty())
        r.fail(image, fmt::format("environment.image {}", why), std::string(image_reference_hint));
      else
        e.image = *s;
    }
  }
  if (f->has("workdir")) {
    YAML::Node w = f->get("workdir");
    e.workdir_where = r.at(w);
    if (auto s = r.string(w, "environment.workdir")) {
      fs::path p(*s);
      if (!p.is_absolute() || p.lexically_normal() != p || p == "/" ||
          !is_safe_relative(p.relative_path()))
        r.fail(
            w,
            fmt::format("environment.workdir '{}' must be an absolute directory other than /", *s),
            "a directory inside the image, e.g. /app");
      else
        e.workdir = *s;
    }
  }
  if (r.error_count() != before) return std::nullopt;
  return e;
}

// workspace: {git: URL-or-PATH, commit: SHA}. The source is untrusted text handed to git:
// harness/fixture/git_source.cpp refuses what git would read as an option or a transport
// helper; here only the form is checked.
std::optional<git_workspace_spec> parse_git_workspace(reader& r, const YAML::Node& n) {
  static constexpr std::string_view known[] = {"git", "commit"};
  auto f = r.mapping(n, "workspace", known, known);
  if (!f) return std::nullopt;
  git_workspace_spec g;
  g.where = r.at(n);
  bool ok = f->has("git") && f->has("commit");
  if (f->has("git")) {
    g.source_where = r.at(f->get("git"));
    if (auto s = r.string(f->get("git"), "workspace.git"))
      g.source = *s;
    else
      ok = false;
  }
  if (f->has("commit")) {
    YAML::Node c = f->get("commit");
    g.commit_where = r.at(c);
    if (auto s = r.string(c, "workspace.commit")) {
      g.commit = *s;
      bool hex =
          s->size() >= 7 && s->size() <= 64 && std::all_of(s->begin(), s->end(), [](char ch) {
            return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f');
          });
      if (!hex) {
        r.fail(c, fmt::format("workspace.commit '{}' is not a commit id", *s),
               "give the commit's hexadecimal id (lowercase, 7 to 64 digits; the full 40 is "
               "best), not a branch or tag name, so that every run starts from the same tree");
        ok = false;
      }
    } else {
      ok = false;
    }
  }
  if (!ok) return std::nullopt;
  return g;
}

// Harbor tasks' suite keys (docs/harbor.md). images: {REF: SOURCE}: the image evalbox reads for
// a registry reference a task.toml names, its path relative to the suite file.
void parse_images(reader& r, const YAML::Node& n, const fs::path& base_dir, suite_spec& spec) {
  auto m = r.mapping(n, "images", {}, {}, true);
  if (!m) return;
  for (const auto& [ref, v] : m->entries) {
    auto source = r.string(v, fmt::format("images.{}", ref));
    if (!source) continue;
    if (std::string why = image_reference_problem(*source); !why.empty())
      r.fail(v, fmt::format("images.{} {}", ref, why), std::string(image_reference_hint));
    else
      spec.images[ref] = resolve_image_reference(*source, base_dir);
  }
}

// harbor: {threshold: X}: the reward a Harbor task's run must reach (default 1.0).
void parse_harbor(reader& r, const YAML::Node& n, suite_spec& spec) {
  static constexpr std::string_view known[] = {"threshold"};
  auto m = r.mapping(n, "harbor", known, {});
  if (!m || !m->has("threshold")) return;
  if (auto t = r.number(m->get("threshold"), "harbor.threshold")) spec.harbor_threshold = *t;
}

}  // namespace parsing
}  // namespace config
}  // namespace evalbox::harness
