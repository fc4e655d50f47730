// Resolving Harbor tasks' images (see harbor_images.h). The programs started here (podman,
// buildah) run outside any sandbox, as the user who runs evalbox: they are the user's own tools
// for the user's own images, as `docker build` is for Harbor.
#include "harness/cli/harbor_images.h"

#include <map>
#include <system_error>

#include <fmt/format.h>

#include "harness/cli/commands.h"
#include "sandbox/base/digest.h"
#include "sandbox/base/fs.h"
#include "sandbox/launch/host_program.h"
#include "sandbox/preparer/preparer.h"

namespace evalbox::cli {

namespace {

namespace fs = std::filesystem;

// Runs `argv` (argv[0] a path) as the user's own tool: evalbox's environment, stdin from
// /dev/null, in evalbox's process group (Ctrl-C at the terminal stops it too), stdout captured
// (its last 64 KiB) or appended to `log`, and stderr appended to `log`.
result<sandbox::host_program_result> run_tool(const std::vector<std::string>& argv,
                                              const fs::path& log, bool capture) {
  sandbox::host_program p;
  p.argv = argv;
  p.inherit_env = true;
  p.own_process_group = false;
  p.stdout_to = capture ? sandbox::host_output::capture : sandbox::host_output::log;
  p.stderr_to = sandbox::host_output::log;
  p.log = log;
  return sandbox::run_host_program(p);
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

std::string command_line(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    std::string shown =
        fs::path(a).is_absolute() && &a == &argv.front() ? fs::path(a).filename().string() : a;
    out += (out.empty() ? "" : " ") + shown;
  }
  return out;
}

class resolver {
 public:
  resolver(const harness::image_map& images, fs::path state_root,
           const std::function<void(const std::string&)>& say)
      : images_(images), dir_(std::move(state_root) / "harbor"), say_(say) {
    podman_ = sandbox::find_host_program("podman");
    buildah_ = sandbox::find_host_program("buildah");
  }

  void resolve(harness::fixture_spec& f, std::vector<harness::config_error>& errors) {
    auto& env = *f.environment;
    if (!env.image_ref.empty()) return;
    const std::string& ref = env.registry_ref;
    if (!ref.empty()) {
      if (auto source = harness::lookup_image(images_, ref)) {
        env.image_ref = *source;
        env.image = *source;
        return;
      }
      if (auto saved = from_podman_store(f, errors)) {
        env.image_ref = saved->first;
        env.image = saved->second;
        return;
      }
    }
    if (!env.build_context.empty()) {
      if (auto built = build(f, errors)) {
        env.image_ref = built->first;
        env.image = built->second;
      }
      return;
    }
    if (!errors_before_.count(f.id)) errors.push_back(unresolved(f));
  }

 private:
  // `podman image exists REF`, then one save per image id.
  // (the reference the store is asked for, what records show: podman:REF@ID)
  using resolved = std::pair<std::string, std::string>;

  std::optional<resolved> from_podman_store(const harness::fixture_spec& f,
                                            std::vector<harness::config_error>& errors) {
    const std::string& ref = f.environment->registry_ref;
    if (podman_.empty()) return std::nullopt;
    if (auto it = saved_.find(ref); it != saved_.end()) return it->second;
    if (!make_dirs(dir_ / "podman", 0700)) return std::nullopt;
    const fs::path log = dir_ / "podman" / "podman.log";
    auto exists = run_tool({podman_.string(), "image", "exists", ref}, log, false);
    if (!exists || exists->exit_code != 0) return std::nullopt;
    auto id =
        run_tool({podman_.string(), "image", "inspect", "--format", "{{.Id}}", ref}, log, true);
    std::string hex = id ? trim(id->output) : "";
    if (hex.starts_with("sha256:")) hex = hex.substr(7);
    if (!id || id->exit_code != 0 || hex.size() != 64 ||
        hex.find_first_not_of("0123456789abcdef") != std::string::npos) {
      fail(f, errors, fmt::format("podman image inspect {} failed (see {})", ref, log.string()));
      return std::nullopt;
    }
    const fs::path archive = dir_ / "podman" / (hex + ".tar");
    std::error_code ec;
    if (!fs::exists(archive, ec)) {
      say_(fmt::format("image {}: saving it from the podman store (once)", ref));
      if (!save(podman_, ref, archive, log)) {
        fail(f, errors, fmt::format("podman image save {} failed (see {})", ref, log.string()));
        return std::nullopt;
      }
    }
    resolved r{"oci-archive:" + archive.string(), fmt::format("podman:{}@sha256:{}", ref, hex)};
    saved_[ref] = r;
    return r;
  }

  // `podman build` (or `buildah bud`) of environment/, then a save; both once per digest.
  std::optional<resolved> build(const harness::fixture_spec& f,
                                std::vector<harness::config_error>& errors) {
    const fs::path& context = f.environment->build_context;
    auto digest = tree_digest(context);
    if (!digest) {
      fail(f, errors, fmt::format("{}: {}", context.string(), digest.error().message));
      return std::nullopt;
    }
    std::string hex = *digest;
    if (hex.starts_with("sha256:")) hex = hex.substr(7);
    if (auto it = built_.find(hex); it != built_.end()) return it->second;
    const fs::path archive = dir_ / "build" / (hex + ".tar");
    const resolved source{"oci-archive:" + archive.string(),
                          fmt::format("build:environment/Dockerfile@sha256:{}", hex)};
    std::error_code ec;
    if (fs::exists(archive, ec)) return built_[hex] = source;
    if (podman_.empty() && buildah_.empty()) {
      fail(f, errors,
           fmt::format("{}/Dockerfile must be built, and neither podman nor buildah is installed",
                       context.string()),
           fmt::format("install podman, or build and save it yourself: `podman build -t {0} "
                       "{1} && podman save -o {0}.tar {0}`, then pass --image {2}=docker-archive:"
                       "{0}.tar",
                       "localhost/" + f.id, context.string(),
                       f.environment->registry_ref.empty() ? "REF" : f.environment->registry_ref));
      return std::nullopt;
    }
    if (!make_dirs(dir_ / "build", 0700)) {
      fail(f, errors, fmt::format("cannot create {}", (dir_ / "build").string()));
      return std::nullopt;
    }
    const fs::path log = dir_ / "build" / (hex + ".log");
    (void)remove_tree(log);
    const std::string tag = fmt::format("localhost/evalbox-harbor-{}:latest", hex.substr(0, 16));
    const fs::path& tool = podman_.empty() ? buildah_ : podman_;
    std::vector<std::string> argv =
        podman_.empty()
            ? std::vector<std::string>{tool.string(), "bud", "-t", tag, context.string()}
            : std::vector<std::string>{tool.string(), "build", "-t", tag, context.string()};
    say_(fmt::format("fixture {}: building {}/Dockerfile with `{}` (once; log: {})", f.id,
                     context.string(), command_line(argv), log.string()));
    auto built = run_tool(argv, log, false);
    if (!built || built->exit_code != 0) {
      fail(f, errors,
           fmt::format(
               "`{}` failed: {}", command_line(argv),
               built ? fmt::format("exit {}; its output is in {}", built->exit_code, log.string())
                     : built.error().message),
           "fix the Dockerfile, or build and save the image yourself and pass --image");
      return std::nullopt;
    }
    if (!save(tool, tag, archive, log)) {
      fail(f, errors, fmt::format("saving the image {} failed (see {})", tag, log.string()));
      return std::nullopt;
    }
    return built_[hex] = source;
  }

  // An oci-archive of `ref` at `archive`, written beside it and renamed into place (a reader
  // never sees half an archive; an interrupted save leaves only a temporary file).
  bool save(const fs::path& tool, const std::string& ref, const fs::path& archive,
            const fs::path& log) {
    const fs::path tmp = archive.parent_path() /
                         fmt::format(".tmp-{}-{}", archive.filename().string(), random_suffix());
    const bool podman = tool.filename() == "podman";
    std::vector<std::string> argv =
        podman
            ? std::vector<std::string>{tool.string(), "image", "save",       "--format",
                                       "oci-archive", "-o",    tmp.string(), ref}
            : std::vector<std::string>{tool.string(), "push", ref, "oci-archive:" + tmp.string()};
    auto r = run_tool(argv, log, false);
    std::error_code ec;
    if (!r || r->exit_code != 0) {
      fs::remove(tmp, ec);
      return false;
    }
    fs::rename(tmp, archive, ec);
    if (ec) fs::remove(tmp, ec);
    return !ec;
  }

  harness::config_error unresolved(const harness::fixture_spec& f) const {
    const auto& env = *f.environment;
    const std::string& ref = env.registry_ref;
    std::string hint = fmt::format(
        "evalbox reads images from files, never from a registry: map it in the suite "
        "(images: {{\"{0}\": docker-archive:FILE}}) or pass --image {0}=docker-archive:FILE, "
        "after `podman pull {0} && podman save -o FILE {0}`",
        ref);
    if (podman_.empty())
      hint += "; with podman installed, an image in its local store is found by name";
    return {env.image_where,
            fmt::format("environment.docker_image {} is not an image evalbox has", ref), hint};
  }

  void fail(const harness::fixture_spec& f, std::vector<harness::config_error>& errors,
            std::string what, std::string hint = {}) {
    errors_before_[f.id] = true;
    errors.push_back({f.environment->image_where, std::move(what), std::move(hint)});
  }

  const harness::image_map& images_;
  const fs::path dir_;
  const std::function<void(const std::string&)>& say_;
  fs::path podman_, buildah_;
  std::map<std::string, resolved> saved_;  // registry ref -> source
  std::map<std::string, resolved> built_;  // context digest -> source
  std::map<std::string, bool> errors_before_;
};

}  // namespace

std::vector<harness::config_error> resolve_harbor_images(
    std::vector<harness::fixture_spec>& fixtures, const harness::image_map& images,
    const fs::path& state_root, const std::function<void(const std::string&)>& say) {
  std::vector<harness::config_error> errors;
  resolver r(images, state_root, say);
  for (auto& f : fixtures)
    if (f.harbor && f.environment) r.resolve(f, errors);
  return errors;
}

result<harness::image_map> image_options(const harness::suite_spec& suite,
                                         const std::vector<std::string>& options) {
  harness::image_map out = suite.images;
  std::error_code ec;
  const fs::path cwd = fs::current_path(ec);
  for (const auto& o : options) {
    auto [ref, source] = EB_TRY(harness::parse_image_option(o, cwd));
    out[ref] = source;
  }
  return out;
}

int resolve_suite_images(harness::suite_spec& suite, const std::vector<std::string>& options) {
  auto images = image_options(suite, options);
  if (!images) {
    fmt::print(stderr, "{}\n", images.error().message);
    return exit_usage;
  }
  auto errors = resolve_harbor_images(
      suite.fixtures, *images, sandbox::default_preparer_options().state_root,
      [](const std::string& line) { fmt::print(stderr, "evalbox: {}\n", line); });
  if (errors.empty()) return exit_ok;
  fmt::print(stderr, "{}\n", harness::join_messages(errors));
  return exit_usage;
}

}  // namespace evalbox::cli
