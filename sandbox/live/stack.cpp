// Layer stacks of a session (stack.h).
#include "sandbox/live/stack.h"

#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/log.h"
#include "sandbox/mount/mount.h"
#include "sandbox/workspace/layers.h"

namespace evalbox::sandbox {
inline namespace live {
namespace fs = std::filesystem;

namespace {

// A directory the sandbox's root owns (an upper or a work directory).
status make_owned_dir(const fs::path& dir, uid_t uid, gid_t gid) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return sys_error(errno, dir.string());
  if (::geteuid() == 0 && ::chown(dir.c_str(), uid, gid) != 0)
    return sys_error(errno, dir.string());
  return {};
}

}  // namespace

result<fs::path> stack_layers(prepared_session& session, const layer_stack& stack,
                              std::string_view name, launch_options& o) {
  const fs::path dir = EB_TRY(session.scratch_dir(name));
  for (const char* tree : {"workspace", "home", "root"}) {
    EB_TRY(make_owned_dir(dir / tree, session.sandbox_uid(), session.sandbox_gid()));
    EB_TRY(make_owned_dir(dir / tree / "upper", session.sandbox_uid(), session.sandbox_gid()));
    EB_TRY(make_owned_dir(dir / tree / "work", session.sandbox_uid(), session.sandbox_gid()));
  }
  auto overlay = [&](const std::vector<fs::path>& lowers, const char* tree) {
    launch_overlay ov;
    for (const auto& l : lowers) ov.lowers.push_back(l.string());
    ov.upper = (dir / tree / "upper").string();
    ov.work = (dir / tree / "work").string();
    return ov;
  };
  o.workspace_overlay = overlay(stack.workspace, "workspace");
  o.home_overlay = overlay(stack.home, "home");
  if (session.image()) {
    o.root_layers = stack.root;
    o.root_upper = dir / "root" / "upper";
    o.root_work = dir / "root" / "work";
  }
  return dir;
}

result<layers_view> layers_view::make(const std::vector<fs::path>& layers, const fs::path& at) {
  if (layers.empty()) return make_error(error_kind::invalid_argument, "a view of no layers");
  layers_view v;
  v.at_ = at;
  if (::geteuid() == 0) {
    if (layers.size() == 1) {
      EB_TRY(mount::bind(layers.front(), at, /*read_only=*/true));
    } else {
      std::string data = "lowerdir=";
      for (size_t i = 0; i < layers.size(); ++i) data += (i ? ":" : "") + layers[i].string();
      data += ",userxattr";
      if (::mount("overlay", at.c_str(), "overlay", MS_RDONLY | MS_NOSUID | MS_NODEV,
                  data.c_str()) != 0)
        return sys_error(errno, fmt::format("mount(overlay, {}, {})", at.string(), data));
    }
    v.mounted_ = true;
    return v;
  }
  EB_TRY(workspace::copy_layers(layers, at, workspace::copy_mode::copy, ::getuid(), ::getgid()));
  return v;
}

layers_view::layers_view(layers_view&& other) noexcept
    : at_(std::move(other.at_)), mounted_(std::exchange(other.mounted_, false)) {
  other.at_.clear();
}

layers_view::~layers_view() {
  if (at_.empty()) return;
  if (mounted_) {
    if (auto u = mount::unmount(at_); !u) log::warn("{}", u.error().message);
    return;
  }
  (void)remove_tree(at_);
  (void)::mkdir(at_.c_str(), 0700);  // the caller's empty directory, as it was given
}

}  // namespace live
}  // namespace evalbox::sandbox
