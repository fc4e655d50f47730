// The preparer: validate, then build a run step by step (see preparer.h for the layout).
// Each step's resources are owned by the session state as soon as they exist, so a failure
// at any step tears down exactly what was made.
#include "sandbox/prepare/preparer.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "base/digest.h"
#include "base/fs.h"
#include "base/json.h"
#include "base/log.h"
#include "base/unique_fd.h"
#include "sandbox/home/home.h"
#include "sandbox/image/reference.h"
#include "sandbox/image/registry.h"
#include "sandbox/mount/mount.h"
#include "sandbox/prepare/session_state.h"
#include "sandbox/spec/system_paths.h"
#include "sandbox/spec/validate.h"
#include "sandbox/workspace/layers.h"
#include "sandbox/workspace/tree.h"

namespace evalbox::sandbox {
inline namespace prepare {

namespace fs = std::filesystem;

struct preparer::impl {
  preparer_options options;
  std::once_flag started;
  status start_status;
  unique_fd runs_lock;  // <state>/runs.lock, shared, as root (see hold_runs_tmpfs)
  std::mutex store_mu;
  std::optional<image::store> store;  // opened on first use: most runs need no image

  // The image store under the state root, owned by the sandbox id.
  result<image::store*> image_store() {
    std::lock_guard lock(store_mu);
    if (!store) {
      image::store_options so;
      so.state_root = options.state_root;
      so.owner_uid = options.sandbox_uid;
      so.owner_gid = options.sandbox_gid;
      so.limits = EB_TRY(
          image::parse_limits(options.image_max_layer_bytes, options.image_max_layer_entries));
      store.emplace(EB_TRY(image::store::open(std::move(so))));
    }
    return &*store;
  }
};

preparer::preparer(preparer_options options) : impl_(std::make_unique<impl>()) {
  impl_->options = std::move(options);
}

const preparer_options& preparer::options() const noexcept { return impl_->options; }

namespace {

// The canonical effective profile: what the run can see and do. Run id and deadline are not
// part of it, so equal requests on equal inputs bind to the same digest.
json effective_profile(const prepared_session::state& s) {
  const auto& r = s.request;
  json home_files = json::array();
  for (const auto& f : r.home.files)
    home_files.push_back(
        {{"path", f.path.string()}, {"mode", f.mode}, {"sha256", sha256_hex(f.content)}});
  json home_dirs = json::array();
  for (const auto& d : r.home.directories) home_dirs.push_back(d.string());
  json leases = json::array();
  for (const auto& l : s.leases) {
    for (const auto& sec : r.secrets)
      if (sec.handle == l.handle()) {
        json lease{{"handle", l.handle()},
                   {"target", sec.target.string()},
                   {"source_sha256", l.source_digest()}};
        // Shared: mounted read-only (an exclusive lease's profile is as it always was).
        if (!l.exclusive()) lease["max_concurrent"] = sec.max_concurrent;
        if (sec.host_only) lease["host_only"] = true;
        leases.push_back(std::move(lease));
      }
  }
  json bundles = json::array();
  for (const auto& b : r.bundles)
    bundles.push_back({{"target", b.target.string()}, {"sha256", b.sha256}});
  json mounts = json::array();
  for (const auto& m : r.mounts)
    mounts.push_back({{"target", m.target.string()},
                      {"access", to_string(m.access)},
                      {"max_bytes", m.max_bytes},
                      {"digest", m.digest.empty() ? json(nullptr) : json(m.digest)}});
  json host_binds = json::array();
  for (const auto& b : r.host_binds)
    host_binds.push_back({{"source", b.source.string()}, {"target", b.target.string()}});
  json readonly = json::array();
  for (const auto& m : s.mounts)
    if (!m.writable &&
        std::none_of(r.bundles.begin(), r.bundles.end(),
                     [&](const bundle& b) { return b.target == m.target; }) &&
        std::none_of(r.host_binds.begin(), r.host_binds.end(),
                     [&](const bind_mount& b) { return b.target == m.target; }) &&
        std::none_of(r.mounts.begin(), r.mounts.end(),
                     [&](const named_mount& n) { return n.target == m.target; }))
      readonly.push_back(m.target.string());
  return json{
      {"schema", "evalbox.profile.v1"},
      {"backend", r.backend},
      {"argv", r.argv},
      {"env", r.env},
      {"workspace",
       {{"digest", r.workspace.digest.empty() ? json(nullptr) : json(r.workspace.digest)},
        {"strategy", workspace::to_string(s.workspace->strategy())}}},
      {"home", {{"adapter", r.home.adapter}, {"directories", home_dirs}, {"files", home_files}}},
      {"leases", leases},
      {"bundles", bundles},
      {"mounts", mounts},
      {"readonly_paths", readonly},
      {"host_binds", host_binds},
      {"limits",
       {{"cpu_ms", r.limits.cpu_ms},
        {"memory_bytes", r.limits.memory_bytes},
        {"pids", r.limits.pids},
        {"wall_ms", r.limits.wall_ms},
        {"disk_bytes", r.limits.disk_bytes},
        {"output_bytes", r.limits.output_bytes}}},
      {"network",
       {{"mode", to_string(r.network.mode)},
        {"allow", r.network.allow},
        {"unsafe_host_network", r.network.unsafe_host_network}}},
      {"landlock", r.landlock},
      {"image", r.image ? json(r.image->id) : json(nullptr)},
      {"workspace_target", r.workspace.target.string()},
  };
}

// Read-only binds at the same path: the request's, argv[0]'s directory and its resolved
// target's directory, except what the launcher always mounts.
std::vector<bind_mount> readonly_binds(const session_request& r) {
  std::vector<fs::path> dirs = r.readonly_paths;
  fs::path exe = r.argv.at(0);
  std::error_code ec;
  // A bare name is found on the sandbox's own PATH; below a system directory, the sandbox has
  // it anyway (the host's, or the image's).
  const bool through_host_bind =
      std::any_of(r.host_binds.begin(), r.host_binds.end(),
                  [&](const bind_mount& b) { return is_within(exe, b.target); });
  if (exe.is_absolute() && !below_system_path(normalize(exe)) && !through_host_bind) {
    dirs.push_back(normalize(exe).parent_path());
    fs::path resolved = fs::canonical(exe, ec);
    if (!ec) dirs.push_back(resolved.parent_path());
  }
  std::vector<bind_mount> out;
  std::set<fs::path> seen;
  for (const auto& d : dirs) {
    fs::path n = normalize(d);
    if (below_system_path(n) || !seen.insert(n).second) continue;
    out.push_back(bind_mount{n, n, false, !fs::is_directory(n, ec)});
  }
  return out;
}

// The image's root: its layers (held since prepare()) under a writable upper on the run's
// disk, so that what the program installs counts against the disk quota and goes with the
// run. The helper stacks them inside the sandbox (docs/sandbox.md, "An image as the root").
// Returns the layers of the image's workspace directory, when the workspace comes from it.
result<std::vector<fs::path>> prepare_image_root(prepared_session::state& s,
                                                 const workspace::disk_info& disk, bool root) {
  const auto& r = s.request;
  const auto& o = s.options;
  session_image img;
  img.id = r.image->id;
  img.reference = r.image->reference;
  img.manifest_digest = r.image->manifest_digest;
  for (const auto& l : s.image_use.image().layers) img.layers.push_back(l.diff_id);
  img.lowers = s.image_use.lower_dirs();
  const fs::path layers_dir = disk.dir / "root";
  if (::mkdir(layers_dir.c_str(), 0700) != 0)
    return sys_error(errno, "mkdir {}", layers_dir.string());
  img.upper = layers_dir / "upper";
  img.work = layers_dir / "work";
  // The upper's root is what / looks like inside: the sandbox's root owns it.
  for (const auto& [dir, mode] : {std::pair{img.upper, 0755}, std::pair{img.work, 0700}}) {
    if (::mkdir(dir.c_str(), static_cast<mode_t>(mode)) != 0 ||
        ::chmod(dir.c_str(), static_cast<mode_t>(mode)) != 0)
      return sys_error(errno, "mkdir {}", dir.string());
    if (::chown(dir.c_str(), o.sandbox_uid, o.sandbox_gid) != 0 && root)
      return sys_error(errno, "chown {}", dir.string());
  }
  std::vector<fs::path> workspace_layers;
  if (!r.workspace.image_dir.empty())
    workspace_layers = EB_TRY_CTX(
        workspace::subtree_layers(img.lowers, r.workspace.image_dir),
        fmt::format("workspace {} of image {}", r.workspace.image_dir.string(), img.reference));
  s.image = std::move(img);
  return workspace_layers;
}

// The workspace on the run's disk. With `auto`, an overlay this filesystem refuses (no
// idmapped mount) falls back to a copy into the same disk.
status materialize_workspace(prepared_session::state& s, workspace_strategy strategy,
                             const workspace::disk_info& disk,
                             const std::vector<fs::path>& workspace_layers) {
  const auto& r = s.request;
  const auto& o = s.options;
  auto ws = workspace::workspace_tree::materialize(r.workspace, strategy, s.run_dir, disk,
                                                   o.sandbox_uid, o.sandbox_gid, workspace_layers);
  if (!ws && r.workspace.strategy == workspace_strategy::auto_select &&
      strategy == workspace_strategy::overlay && ws.error().kind == error_kind::unsupported) {
    log::info("run {}: overlay unavailable ({}); copying the workspace", r.run_id,
              ws.error().message);
    EB_TRY(mount::unmount_all_under(s.run_dir / "lower"));
    for (const char* leftover : {"lower", "workspace", "snapshots", "disk/upper0", "disk/work0"})
      EB_TRY(remove_tree(s.run_dir / leftover));
    ws = workspace::workspace_tree::materialize(r.workspace, workspace_strategy::copy, s.run_dir,
                                                disk, o.sandbox_uid, o.sandbox_gid,
                                                workspace_layers);
  }
  if (!ws) return std::unexpected(std::move(ws).error().with_context("materialize workspace"));
  s.workspace = std::move(*ws);
  s.workspace_dir = s.workspace->dir();
  return {};
}

// The ephemeral-write mounts, each made like the workspace on a disk of its own: as root an
// overlay of the (idmapped) source under an upper on a tmpfs of max_bytes — a copy into that
// tmpfs where the overlay is refused — so that writes past the cap fail with ENOSPC and go
// with the run; without root a copy (the cap then only recorded).
status materialize_mounts(prepared_session::state& s, bool root) {
  const auto& r = s.request;
  const auto& o = s.options;
  if (std::none_of(r.mounts.begin(), r.mounts.end(),
                   [](const named_mount& m) { return m.access == mount_access::ephemeral_write; }))
    return {};
  const fs::path base = s.run_dir / "mounts";
  if (::mkdir(base.c_str(), 0700) != 0) return sys_error(errno, "mkdir {}", base.string());
  bool overlay = false;
  if (root)
    overlay = EB_TRY(workspace::resolve_strategy(workspace_strategy::auto_select, base)) ==
              workspace_strategy::overlay;
  for (const auto& m : r.mounts) {
    if (m.access != mount_access::ephemeral_write) continue;
    const fs::path dir = base / std::to_string(s.mount_trees.size());
    const std::string what = fmt::format("ephemeral-write mount {}", m.target.string());
    if (::mkdir(dir.c_str(), 0700) != 0) return sys_error(errno, "mkdir {}", dir.string());
    auto disk = EB_TRY_CTX(workspace::prepare_disk(dir, m.max_bytes, root), what);
    if (disk.tmpfs) s.quota_dirs.push_back(disk.dir);
    workspace_spec source;
    source.source = m.source;
    result<workspace::workspace_tree> tree =
        make_error(error_kind::unsupported, "overlayfs unavailable");
    if (overlay)
      tree = workspace::workspace_tree::materialize(source, workspace_strategy::overlay, dir, disk,
                                                    o.sandbox_uid, o.sandbox_gid);
    if (!tree && tree.error().kind == error_kind::unsupported) {
      if (overlay) {
        EB_TRY(mount::unmount_all_under(dir / "lower"));
        for (const char* leftover :
             {"lower", "workspace", "snapshots", "disk/upper0", "disk/work0"})
          EB_TRY(remove_tree(dir / leftover));
      }
      tree = workspace::workspace_tree::materialize(source, workspace_strategy::copy, dir, disk,
                                                    o.sandbox_uid, o.sandbox_gid);
    }
    if (!tree) return std::unexpected(std::move(tree).error().with_context(what));
    json id = tree->identity();
    id["target"] = m.target.string();
    id["access"] = to_string(m.access);
    s.mount_identity.push_back(std::move(id));
    s.mount_trees.push_back(std::move(*tree));
  }
  return {};
}

// What the launch binds besides the workspace and home: each credential's lease (acquired
// here; writable when exclusive, read-only when shared: lease.h), bundles, named mounts, the
// request's read-only directories and host binds.
status add_binds(prepared_session::state& s) {
  const auto& r = s.request;
  const auto& o = s.options;
  for (const auto& secret : r.secrets) {
    auto lease = EB_TRY(creds::credential_lease::acquire(run_state::leases_dir(o.state_root),
                                                         secret, o.sandbox_uid, o.sandbox_gid));
    if (!secret.host_only)
      s.mounts.push_back(bind_mount{lease.path(), fs::path(sandbox_home) / secret.target,
                                    lease.exclusive(), true});
    s.leases.push_back(std::move(lease));
  }
  for (const auto& b : r.bundles) {
    std::error_code ec;
    s.mounts.push_back(bind_mount{b.source, b.target, false, !fs::is_directory(b.source, ec)});
  }
  size_t ephemeral = 0;
  for (const auto& m : r.mounts) {
    std::error_code ec;
    if (m.access == mount_access::read_only) {
      s.mounts.push_back(bind_mount{m.source, m.target, false, !fs::is_directory(m.source, ec)});
    } else {
      s.mounts.push_back(bind_mount{s.mount_trees.at(ephemeral++).dir(), m.target, true, false});
    }
  }
  for (auto& m : readonly_binds(r)) s.mounts.push_back(std::move(m));
  for (const auto& b : r.host_binds) {
    std::error_code ec;
    s.mounts.push_back(bind_mount{b.source, b.target, false, !fs::is_directory(b.source, ec)});
  }
  return {};
}

// The binding digest and the filesystem identity (evalbox.filesystem.v1) the record carries.
void record_identity(prepared_session::state& s, const workspace::disk_info& disk) {
  s.binding_digest = sha256_hex(canonical_json(effective_profile(s)));
  json leases = json::array();
  for (size_t i = 0; i < s.leases.size(); ++i) {
    const secret_mount& sec = s.request.secrets[i];
    leases.push_back(
        {{"handle", s.leases[i].handle()},
         {"target",
          sec.host_only ? json(nullptr) : json((fs::path(sandbox_home) / sec.target).string())},
         {"exclusive", s.leases[i].exclusive()}});
    if (sec.host_only) leases.back()["host_only"] = true;
  }
  s.filesystem_identity = json{
      {"schema", "evalbox.filesystem.v1"},
      {"workspace", s.workspace->identity()},
      {"home",
       {{"path", sandbox_home},
        {"quota_bytes", disk.quota_bytes},
        {"enforced", disk.tmpfs},
        {"shares_quota_with", "workspace"}}},
      {"leases", leases},
  };
  if (!s.mount_identity.empty()) s.filesystem_identity["mounts"] = s.mount_identity;
  if (s.image)
    s.filesystem_identity["root"] = {{"image", s.image->id},
                                     {"layers", s.image->layers.size()},
                                     {"upper", "run disk"},
                                     {"quota_bytes", disk.quota_bytes},
                                     {"enforced", disk.tmpfs}};
}

// A session's passes, in order: the run directory, its disk, the image's root, the workspace,
// the home, the binds, the launch directory, the identity.
status build(prepared_session::state& s, const fs::path& runs) {
  const auto& r = s.request;
  const bool root = ::geteuid() == 0;
  auto strategy = EB_TRY(workspace::resolve_strategy(r.workspace.strategy, runs));

  s.lock = EB_TRY(run_state::create_run_dir(runs, r.run_id));
  s.run_dir = s.lock.dir();
  // As root the run directory is a mount of its own (a bind on itself, private like the runs
  // tmpfs below it), so that teardown detaches everything the run mounted in one umount2:
  // each unmount waits for an expedited RCU grace period, which the kernel serializes across
  // every CPU, and the run mounts four or five things (docs/performance.md, "Scaling").
  if (root) EB_TRY_CTX(mount::bind(s.run_dir, s.run_dir, false), "run directory");

  // The disk: the quota holds for the workspace's writes and the home together.
  const bool tmpfs = root && strategy != workspace_strategy::reflink;
  auto disk =
      EB_TRY_CTX(workspace::prepare_disk(s.run_dir, r.limits.disk_bytes, tmpfs), "run disk");
  s.quota_enforced = disk.tmpfs;

  std::vector<fs::path> workspace_layers;
  if (r.image) workspace_layers = EB_TRY(prepare_image_root(s, disk, root));
  EB_TRY(materialize_workspace(s, strategy, disk, workspace_layers));

  s.home_dir = disk.dir / "home";
  EB_TRY_CTX(
      home::lay_out(s.home_dir, r.home, r.secrets, s.options.sandbox_uid, s.options.sandbox_gid),
      "managed home");
  EB_TRY(materialize_mounts(s, root));
  EB_TRY(add_binds(s));

  s.launch_dir = s.run_dir / "launches";
  if (::mkdir(s.launch_dir.c_str(), 0700) != 0)
    return sys_error(errno, "mkdir {}", s.launch_dir.string());
  record_identity(s, disk);
  return {};
}

// As root, runs/ is a private tmpfs: each run's lock, mount points, launch plans, records and
// output are created and removed there. On the ext4 state root those creates, mkdirs and
// unlinks cost 0.1-3.5 ms each under load, about 15 ms of every prepare + teardown
// (prepare_bench prepare/overlay/small: 18-22 ms with runs/ on ext4, 3.5-5 ms on tmpfs). The
// tmpfs outlives a crashed evalbox (the reclaim finds its runs), not a reboot, after which
// there are no mounts or cgroups left to reclaim.
//
// <state>/runs.lock coordinates the processes sharing a state root: each holds it shared for
// as long as its preparer lives; mounting takes it exclusively (so two never stack tmpfs
// mounts over each other's runs), and so does unmounting, which the last preparer to go does
// when no run is left — a state root does not keep a mount after its last user (a test's
// or a benchmark's scratch state root would otherwise leave one behind for good).

// True when `runs` is a tmpfs mounted on itself (not merely a directory on a tmpfs). Two
// statx calls instead of a read of the mount table (O(host mounts)).
bool is_runs_tmpfs(const fs::path& runs) {
  struct statfs sf {};
  if (::statfs(runs.c_str(), &sf) != 0 || sf.f_type != TMPFS_MAGIC) return false;
  struct statx self {
  }, parent{};
  if (::statx(AT_FDCWD, runs.c_str(), AT_SYMLINK_NOFOLLOW, STATX_MNT_ID, &self) != 0 ||
      ::statx(AT_FDCWD, runs.parent_path().c_str(), AT_SYMLINK_NOFOLLOW, STATX_MNT_ID, &parent) !=
          0)
    return false;
  return self.stx_mnt_id != parent.stx_mnt_id;
}

// Mounts the runs tmpfs if it is not there, and returns runs.lock held shared. While any
// holder keeps it shared the tmpfs stays mounted, so the usual case takes the shared lock
// and checks. Only an unmounted runs/ needs the exclusive lock, taken without blocking (a
// second preparer of this very process may hold the shared lock through another open file).
result<unique_fd> hold_runs_tmpfs(const fs::path& state_root, const fs::path& runs) {
  const fs::path lock_path = state_root / "runs.lock";
  unique_fd lock(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!lock) return sys_error(errno, "open {}", lock_path.string());
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (;;) {
    if (::flock(lock.get(), LOCK_SH) != 0) return sys_error(errno, "flock {}", lock_path.string());
    if (is_runs_tmpfs(runs)) return lock;
    // Not mounted: mount it under the exclusive lock (converting drops the shared one).
    if (::flock(lock.get(), LOCK_EX | LOCK_NB) == 0) {
      if (!is_runs_tmpfs(runs)) {
        // Runs left on disk (before a reboot, or by an older evalbox) would hide under it.
        auto counts = EB_TRY(run_state::reclaim_stale(runs));
        for (const auto& e : counts.errors) log::warn("reclaim: {}", e);
        // The default size of a tmpfs (half of RAM): it holds small files and capped
        // outputs; each run's workspace and home have their own size-limited tmpfs below.
        const uint64_t half_ram = static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) *
                                  static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)) / 2;
        EB_TRY(mount::mount_tmpfs(runs, half_ram, 0700, 0, 0));
        // Run mounts must not propagate into other namespaces (nor theirs into ours).
        if (::mount(nullptr, runs.c_str(), nullptr, MS_PRIVATE, nullptr) != 0)
          return sys_error(errno, "mount({}, MS_PRIVATE)", runs.string());
      }
      continue;  // back to shared, and check again
    }
    if (errno != EWOULDBLOCK) return sys_error(errno, "flock {}", lock_path.string());
    if (std::chrono::steady_clock::now() > give_up)
      return make_error(error_kind::io,
                        "{} is not mounted and {} stays locked by another evalbox process: "
                        "is one stuck? (`fuser {}` names it)",
                        runs.string(), lock_path.string(), lock_path.string());
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// The last user of the state root unmounts the runs tmpfs when no run is left in it. True
// when it did.
bool release_runs_tmpfs(unique_fd lock, const fs::path& runs) {
  if (!lock || ::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) return false;  // others use it
  if (!is_runs_tmpfs(runs)) return false;
  std::error_code ec;
  if (fs::directory_iterator(runs, ec) != fs::directory_iterator() || ec) return false;
  // Empty, and no evalbox uses it: detached even while a straggler still holds a file of a
  // run removed long ago open (a killed evalbox's agent, until its reclaim killed it), which
  // made a plain umount fail with EBUSY and left the tmpfs mounted after the last user.
  if (::umount2(runs.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) != 0) {
    log::warn("unmount {}: {}", runs.string(), errno_name(errno));
    return false;
  }
  return true;
}

}  // namespace

result<prepared_session> preparer::prepare(const session_request& request) {
  const auto& o = impl_->options;
  auto ctx = fmt::format("prepare run {}", request.run_id);
  // Nothing is created before the request is known to be good.
  EB_TRY_CTX(validate(request, validation_context{o.state_root}), ctx);

  fs::path runs = run_state::runs_dir(o.state_root);
  std::call_once(impl_->started, [&] {
    impl_->start_status = [&]() -> status {
      EB_TRY(make_dirs(o.state_root, 0700));
      EB_TRY(make_dirs(runs, 0700));
      if (::geteuid() == 0) impl_->runs_lock = EB_TRY(hold_runs_tmpfs(o.state_root, runs));
      auto counts = EB_TRY(run_state::reclaim_stale(runs));
      for (const auto& e : counts.errors) log::warn("reclaim: {}", e);
      return {};
    }();
  });
  if (!impl_->start_status)
    return std::unexpected(error(impl_->start_status.error()).with_context(ctx));

  auto s = std::make_unique<prepared_session::state>();
  s->request = request;
  s->options = o;
  if (request.image) {
    // Held before anything is made: from here to teardown gc cannot remove a layer.
    auto* store = EB_TRY_CTX(impl_->image_store(), ctx);
    auto use = store->use(request.image->id);
    if (!use)
      return std::unexpected(std::move(use).error().with_context(
          fmt::format("{}: image {}", ctx, request.image->reference)));
    s->image_use = std::move(*use);
  }
  if (auto built = build(*s, runs); !built) {
    error e = std::move(built).error().with_context(ctx);
    // A busy run id is someone else's run: nothing of ours to tear down.
    if (s->lock.held()) {
      if (auto t = s->teardown(); !t) log::error("{}: cleanup: {}", ctx, t.error().message);
    }
    return std::unexpected(std::move(e));
  }
  return prepared_session(std::move(s));
}

result<image_summary> preparer::resolve_image(std::string_view reference, const fs::path& base_dir,
                                              const std::atomic<bool>* cancel,
                                              std::function<void(const std::string&)> say,
                                              image::pull_policy pull) {
  auto* store = EB_TRY(impl_->image_store());
  image::import_options io;
  io.cancel = cancel;
  io.pull = pull;
  io.registry = impl_->options.registry.get();
  if (say) {
    io.progress = [&say, reference](const image::import_event& e) {
      using k = image::import_event::kind;
      if (e.what == k::layer_start)
        say(fmt::format("image {}: {} layer {}/{} {}", reference,
                        reference.starts_with("docker://") ? "pulling" : "unpacking", e.index + 1,
                        e.count, e.diff_id.substr(0, 19)));
      else if (e.what == k::layer_done)
        say(fmt::format("image {}: layer {}/{} unpacked in {:.1f}s", reference, e.index + 1,
                        e.count, e.seconds));
    };
  }
  auto r = EB_TRY(store->import(reference, base_dir, io));
  image_summary out;
  out.reference = r.reference;
  out.reference_digest = r.reference_digest;
  if (!r.reference_digest.empty() && r.reference.starts_with("docker://")) {
    // docker://NAME[:TAG][@DIGEST] -> docker://NAME@DIGEST
    std::string name = r.reference.substr(0, r.reference.find('@'));
    if (auto colon = name.rfind(':'); colon != std::string::npos && colon > name.rfind('/'))
      name.erase(colon);
    out.pinned = name + "@" + r.reference_digest;
  }
  out.pulled = r.pulled;
  out.blob_bytes = r.blob_bytes;
  out.id = r.image.id;
  out.manifest_digest = r.manifest_digest;
  out.env = r.image.config.env;
  out.working_dir = r.image.config.working_dir;
  out.user = r.image.config.user;
  out.entrypoint = r.image.config.entrypoint;
  out.cmd = r.image.config.cmd;
  for (const auto& l : r.image.layers) out.layers.push_back(l.diff_id);
  out.bytes = r.image.bytes;
  out.layers_unpacked = r.layers_unpacked;
  return out;
}

result<std::string> preparer::registry_digest(std::string_view reference) {
  const image::reference ref = EB_TRY(image::parse_registry_reference(reference));
  std::optional<image::registry_settings> from_host;
  const image::registry_settings* settings = impl_->options.registry.get();
  if (!settings) settings = &from_host.emplace(EB_TRY(image::registry_settings_from_host()));
  image::registry_client client(*settings, ref);
  if (!ref.digest.empty()) {
    EB_TRY(client.manifest(ref.digest));  // it exists, and its bytes are what it says
    return ref.pinned(ref.digest);
  }
  auto m = EB_TRY(client.manifest(ref.tag));
  return ref.pinned(m.digest);
}

result<bool> preparer::image_has_file(std::string_view id, const fs::path& path) {
  auto* store = EB_TRY(impl_->image_store());
  auto info = EB_TRY(store->lookup(id));
  auto kind = EB_TRY(workspace::merged_lookup(info.lower_dirs(), path));
  return kind == workspace::merged_kind::file || kind == workspace::merged_kind::other;
}

result<reclaim_report> preparer::reclaim_stale() {
  const fs::path runs = run_state::runs_dir(impl_->options.state_root);
  auto counts = EB_TRY(run_state::reclaim_stale(runs));
  reclaim_report r;
  r.runs_reclaimed = counts.runs;
  r.mounts_unmounted = counts.mounts;
  // A crashed evalbox leaves the runs tmpfs mounted: with its runs reclaimed and no other
  // user, it goes too (not while this preparer holds it for sessions of its own).
  if (::geteuid() == 0 && !impl_->runs_lock) {
    const fs::path lock_path = impl_->options.state_root / "runs.lock";
    unique_fd lock(::open(lock_path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC));
    if (release_runs_tmpfs(std::move(lock), runs)) ++r.mounts_unmounted;
  }
  r.cgroups_removed = counts.cgroups;
  r.errors = std::move(counts.errors);
  return r;
}

result<image_collection_report> preparer::collect_images(std::optional<uint64_t> max_bytes) {
  auto* store = EB_TRY(impl_->image_store());
  auto gc = EB_TRY(store->gc(max_bytes));
  image_collection_report r;
  r.images_removed = gc.images_removed;
  r.layers_removed = gc.layers_removed;
  r.temporaries_removed = gc.temporaries_removed;
  r.images_in_use = gc.images_in_use;
  r.bytes_freed = gc.bytes_freed;
  r.bytes_after = gc.bytes_after;
  r.errors = std::move(gc.errors);
  return r;
}

preparer::~preparer() {
  if (impl_ && impl_->runs_lock)
    release_runs_tmpfs(std::move(impl_->runs_lock), run_state::runs_dir(impl_->options.state_root));
}

status copy_out(const std::filesystem::path& from, const std::filesystem::path& to) {
  return workspace::copy_tree(from, to, workspace::copy_mode::copy, ::getuid(), ::getgid());
}

}  // namespace prepare
}  // namespace evalbox::sandbox
