// prepared_session: accessors, snapshots and teardown of a prepared run (see preparer.h).
#include <fmt/format.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "base/fs.h"
#include "base/log.h"
#include "sandbox/prepare/preparer.h"
#include "sandbox/prepare/session_state.h"

namespace evalbox::sandbox {
inline namespace prepare {

namespace fs = std::filesystem;

status prepared_session::state::teardown() {
  if (closed) return {};
  // Leases first: the lease files themselves stay (they are the next run's credentials).
  for (auto& l : leases) l.release();
  run_state::reclaim_counts counts;
  if (!run_dir.empty()) {
    // What build() mounted: first the run directory itself (as root: one detach takes every
    // mount below it along), then, for a run without it, each mount innermost first; a partly
    // built run may hold fewer.
    std::vector<fs::path> mounted{run_dir};
    if (workspace) {
      auto points = workspace->mount_points();
      mounted.insert(mounted.end(), points.begin(), points.end());
    }
    for (size_t i = 0; i < mount_trees.size(); ++i) {
      auto points = mount_trees[i].mount_points();
      mounted.insert(mounted.end(), points.begin(), points.end());
    }
    for (const auto& d : quota_dirs) mounted.push_back(d);
    for (const char* point : {"workspace", "lower", "disk"}) mounted.push_back(run_dir / point);
    EB_TRY_CTX(run_state::remove_own_run(run_dir, request.run_id, mounted,
                                         options.launch.cgroup_v2_root, counts),
               fmt::format("tear down run {}", request.run_id));
  }
  // The layers last: the run's root no longer exists anywhere.
  image_use.release();
  lock.release();
  closed = true;
  return {};
}

prepared_session::prepared_session(std::unique_ptr<state> s) : state_(std::move(s)) {}
prepared_session::prepared_session(prepared_session&&) noexcept = default;
prepared_session& prepared_session::operator=(prepared_session&& other) noexcept {
  if (this != &other) {
    if (state_) (void)close();
    state_ = std::move(other.state_);
  }
  return *this;
}

prepared_session::~prepared_session() {
  if (!state_) return;
  if (auto s = close(); !s) log::error("{}", s.error().message);
}

const session_request& prepared_session::request() const noexcept { return state_->request; }
const preparer_options& prepared_session::options() const noexcept { return state_->options; }
const fs::path& prepared_session::run_dir() const noexcept { return state_->run_dir; }
const fs::path& prepared_session::workspace_dir() const noexcept { return state_->workspace_dir; }
const fs::path& prepared_session::home_dir() const noexcept { return state_->home_dir; }
const fs::path& prepared_session::workspace_target() const noexcept {
  return state_->request.workspace.target;
}
const session_image* prepared_session::image() const noexcept {
  return state_->image ? &*state_->image : nullptr;
}
fs::path prepared_session::launch_dir() const { return state_->launch_dir; }
workspace_strategy prepared_session::strategy() const noexcept {
  return state_->workspace ? state_->workspace->strategy() : workspace_strategy::copy;
}
bool prepared_session::disk_quota_enforced() const noexcept { return state_->quota_enforced; }
uid_t prepared_session::sandbox_uid() const noexcept { return state_->options.sandbox_uid; }
gid_t prepared_session::sandbox_gid() const noexcept { return state_->options.sandbox_gid; }
const std::vector<bind_mount>& prepared_session::mounts() const noexcept { return state_->mounts; }
std::optional<fs::path> prepared_session::lease_path(std::string_view handle) const {
  for (const auto& l : state_->leases)
    if (l.handle() == handle && l.held()) return l.path();
  return std::nullopt;
}
const std::vector<fs::path>& prepared_session::quota_dirs() const noexcept {
  return state_->quota_dirs;
}
const std::string& prepared_session::binding_digest() const noexcept {
  return state_->binding_digest;
}
const json& prepared_session::filesystem_identity() const noexcept {
  return state_->filesystem_identity;
}

result<fs::path> prepared_session::scratch_dir(std::string_view name) {
  if (!state_ || state_->closed)
    return make_error(error_kind::invalid_argument, "scratch: the session is closed");
  if (name.empty() || name.size() > 64 ||
      name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") != std::string_view::npos)
    return make_error(error_kind::invalid_argument, "scratch directory name '{}'", name);
  const fs::path parent = state_->run_dir / "disk" / "scratch";
  if (::mkdir(parent.c_str(), 0700) != 0 && errno != EEXIST)
    return sys_error(errno, "mkdir {}", parent.string());
  const fs::path dir = parent / name;
  EB_TRY(remove_tree(dir));
  if (::mkdir(dir.c_str(), 0755) != 0) return sys_error(errno, "mkdir {}", dir.string());
  // The sandbox's root writes here; without root evalbox's own user is that root already.
  if (::chown(dir.c_str(), state_->options.sandbox_uid, state_->options.sandbox_gid) != 0 &&
      ::geteuid() == 0)
    return sys_error(errno, "chown {}", dir.string());
  return dir;
}

result<workspace_snapshot> prepared_session::snapshot_workspace() {
  if (!state_ || state_->closed || !state_->workspace)
    return make_error(error_kind::invalid_argument, "snapshot: the session is closed");
  auto [view, index] =
      EB_TRY_CTX(state_->workspace->snapshot(), fmt::format("run {}", state_->request.run_id));
  return workspace_snapshot{view, index};
}

result<std::vector<std::string>> prepared_session::changed_paths(
    const workspace_snapshot& since) const {
  if (!state_ || state_->closed || !state_->workspace)
    return make_error(error_kind::invalid_argument, "changed_paths: the session is closed");
  return state_->workspace->changed_paths(since.index);
}

status prepared_session::close() {
  if (!state_) return {};
  return state_->teardown();
}

}  // namespace prepare
}  // namespace evalbox::sandbox
