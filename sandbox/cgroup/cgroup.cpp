// Both cgroup implementations (v1 and v2) and the choice between them for this host.
#include "sandbox/cgroup/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "base/fs.h"
#include "base/json.h"
#include "base/json_get.h"
#include "base/unique_fd.h"
#include "sandbox/sys/fd_passing.h"
#include "sandbox/sys/probe.h"

namespace evalbox::sandbox::cgroup {
namespace fs = std::filesystem;
namespace {

status write_flags(const fs::path& file, std::string_view value, int flags) {
  unique_fd fd(::open(file.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC | flags, 0644));
  if (!fd) return sys_error(errno, "open({})", file.string());
  if (::write(fd.get(), value.data(), value.size()) != static_cast<ssize_t>(value.size())) {
    return sys_error(errno, "write({}, {})", file.string(), value);
  }
  return {};
}

// O_CREAT and O_TRUNC are harmless on cgroupfs and needed for the fake tree in tests.
status write_value(const fs::path& file, std::string_view value) {
  return write_flags(file, value, O_CREAT);
}

// A write to a file the kernel may not offer (never made in a fake tree): fails if absent.
status write_existing(const fs::path& file, std::string_view value) {
  return write_flags(file, value, 0);
}

// A cgroup file is a few lines that the kernel renders whole on the first read: one read into
// a page-sized buffer (no fstat, which says 0 for these files, and no read to find the end
// unless the page was filled). A launch reads about ten of them. A larger file may come back cut
// at a line's end (the kernel fills a read with whole lines): only cgroup.procs can be that
// large, and kill_tasks reads it again until it is empty.
std::optional<std::string> read_small(const fs::path& file) {
  unique_fd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    out.append(buf, static_cast<size_t>(n));
    if (static_cast<size_t>(n) < sizeof buf || out.size() > (1u << 20)) return out;
  }
}

uint64_t read_u64(const fs::path& file) {
  auto s = read_small(file);
  if (!s) return 0;
  try {
    return std::stoull(*s);
  } catch (...) {
    return 0;
  }
}

// "key value" lines (memory.events, cpu.stat, memory.oom_control, pids.events).
uint64_t read_keyed(const fs::path& file, std::string_view key) {
  auto s = read_small(file);
  if (!s) return 0;
  std::istringstream in(*s);
  std::string k;
  uint64_t v = 0;
  while (in >> k >> v) {
    if (k == key) return v;
  }
  return 0;
}

status make_dir(const fs::path& p) {
  if (::mkdir(p.c_str(), 0755) != 0 && errno != EEXIST)
    return sys_error(errno, "mkdir({})", p.string());
  return {};
}

// Kills every task listed in `procs` until the list is empty (a forking task may add more
// while we kill), bounded in time.
void kill_tasks(const fs::path& procs) {
  for (int round = 0; round < 2000; ++round) {
    auto s = read_small(procs);
    if (!s || s->empty()) return;
    std::istringstream in(*s);
    pid_t pid = 0;
    while (in >> pid) ::kill(pid, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// rmdir that waits for killed tasks to leave (EBUSY until they are reaped), up to 10 s: on a
// loaded machine the exit of a large process tree takes a while.
status remove_dir(const fs::path& p) {
  for (int i = 0; i < 2000; ++i) {
    if (::rmdir(p.c_str()) == 0 || errno == ENOENT) return {};
    if (errno != EBUSY) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return sys_error(errno, "rmdir({})", p.string());
}

}  // namespace

status kill_and_remove(const fs::path& dir) {
  // cgroup.kill (v2, 5.14+) kills atomically, even a task that is forking right now.
  if (fs::exists(dir / "cgroup.kill")) (void)write_value(dir / "cgroup.kill", "1");
  kill_tasks(dir / "cgroup.procs");
  return remove_dir(dir);
}

namespace {

class v2_cgroup final : public run_cgroup {
 public:
  v2_cgroup(fs::path leaf, unique_fd dir, evict_fn evict)
      : leaf_(std::move(leaf)), dir_(std::move(dir)), evict_(evict) {}
  ~v2_cgroup() override { (void)destroy(); }
  std::string_view version() const noexcept override { return "v2"; }
  int clone_into_fd() const noexcept override { return dir_.get(); }
  status add_pid(pid_t pid) override {
    return write_value(leaf_ / "cgroup.procs", std::to_string(pid));
  }
  result<std::vector<unique_fd>> open_tasks() const override { return std::vector<unique_fd>{}; }
  result<usage> read_usage() const override {
    usage u;
    u.cpu_ns = read_cpu_ns();
    u.peak_memory_bytes = read_u64(leaf_ / "memory.peak");
    u.oom_kills = read_keyed(leaf_ / "memory.events", "oom_kill");
    u.pids_limit_hit = read_keyed(leaf_ / "pids.events", "max") > 0;
    return u;
  }
  uint64_t read_cpu_ns() const override {
    return read_keyed(leaf_ / "cpu.stat", "usage_usec") * 1000;
  }
  status destroy() override {
    if (destroyed_) return {};
    destroyed_ = true;
    dir_.reset();
    // Empty once the run's processes are reaped, as after every normal end: one rmdir. Only a
    // cgroup that still holds tasks (EBUSY) has them killed first.
    if (::rmdir(leaf_.c_str()) == 0 || errno == ENOENT) return {};
    return evict_(leaf_);
  }
  std::vector<fs::path> paths() const override { return {leaf_}; }
  json describe() const override { return json{{"version", "v2"}, {"leaf", leaf_.string()}}; }
  void release() noexcept override { destroyed_ = true; }
  status claim(const std::string&, const std::string&, const limits&) override {
    return make_error(error_kind::unsupported, "a cgroup v2 is not made ahead");
  }

 private:
  fs::path leaf_;
  unique_fd dir_;
  evict_fn evict_;
  bool destroyed_ = false;
};

// The limits in v1 leaves (controller -> directory).
status set_v1_limits(const std::map<std::string, fs::path>& leaves, const limits& lim) {
  if (auto it = leaves.find("memory"); it != leaves.end() && lim.memory_bytes) {
    const auto v = std::to_string(lim.memory_bytes);
    EB_TRY(write_value(it->second / "memory.limit_in_bytes", v));
    // memsw = memory: no escape into swap (absent without swap accounting: the open fails).
    (void)write_existing(it->second / "memory.memsw.limit_in_bytes", v);
  }
  if (auto it = leaves.find("pids"); it != leaves.end() && lim.pids) {
    EB_TRY(write_value(it->second / "pids.max", std::to_string(lim.pids)));
  }
  return {};
}

class v1_cgroup final : public run_cgroup {
 public:
  v1_cgroup(std::map<std::string, fs::path> leaves, evict_fn evict)
      : leaves_(std::move(leaves)), evict_(evict) {}
  ~v1_cgroup() override { (void)destroy(); }
  std::string_view version() const noexcept override { return "v1"; }
  int clone_into_fd() const noexcept override { return -1; }
  status add_pid(pid_t pid) override {
    for (const auto& [ctl, dir] : leaves_) {
      EB_TRY_CTX(write_value(dir / "cgroup.procs", std::to_string(pid)), "cgroup " + ctl);
    }
    return {};
  }
  result<std::vector<unique_fd>> open_tasks() const override {
    if (leaves_.size() > sys::max_fds)
      return make_error(error_kind::internal, "{} cgroup hierarchies", leaves_.size());
    std::vector<unique_fd> out;
    for (const auto& [ctl, dir] : leaves_) {
      // O_CREAT for the fake trees of tests; cgroupfs has the file.
      const fs::path file = dir / "tasks";
      unique_fd fd(::open(file.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
      if (!fd) return sys_error(errno, "open({})", file.string());
      out.push_back(std::move(fd));
    }
    return out;
  }
  result<usage> read_usage() const override {
    usage u;
    u.cpu_ns = read_cpu_ns();
    if (auto it = leaves_.find("memory"); it != leaves_.end()) {
      u.peak_memory_bytes = read_u64(it->second / "memory.max_usage_in_bytes");
      u.oom_kills = read_keyed(it->second / "memory.oom_control", "oom_kill");
    }
    if (auto it = leaves_.find("pids"); it != leaves_.end()) {
      u.pids_limit_hit = read_keyed(it->second / "pids.events", "max") > 0;
    }
    return u;
  }
  uint64_t read_cpu_ns() const override {
    auto it = leaves_.find("cpuacct");
    return it == leaves_.end() ? 0 : read_u64(it->second / "cpuacct.usage");
  }
  status destroy() override {
    if (destroyed_) return {};
    destroyed_ = true;
    status first;
    for (const auto& [ctl, dir] : leaves_) {
      // As for v2: one rmdir when empty; the tasks still in it are killed only when refused.
      if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) continue;
      if (auto s = evict_(dir); !s && first) first = s;
    }
    return first;
  }
  std::vector<fs::path> paths() const override {
    std::vector<fs::path> out;
    for (const auto& [ctl, dir] : leaves_) out.push_back(dir);
    return out;
  }
  json describe() const override {
    json leaves = json::object();
    for (const auto& [ctl, dir] : leaves_) leaves[ctl] = dir.string();
    return json{{"version", "v1"}, {"leaves", leaves}};
  }
  void release() noexcept override { destroyed_ = true; }
  const std::map<std::string, fs::path>& leaves() const noexcept { return leaves_; }
  status claim(const std::string& run_id, const std::string& leaf, const limits& lim) override {
    const std::string name = launch_cgroup_name(run_id, leaf);
    for (auto& [ctl, dir] : leaves_) {
      fs::path to = dir.parent_path() / name;
      if (::rename(dir.c_str(), to.c_str()) != 0)
        return sys_error(errno, "rename({}, {})", dir.string(), to.string());
      dir = std::move(to);
    }
    return set_v1_limits(leaves_, lim);
  }

 private:
  std::map<std::string, fs::path> leaves_;
  evict_fn evict_;
  bool destroyed_ = false;
};

}  // namespace

int move_self(const int* fds, size_t n) noexcept {
  for (size_t i = 0; i < n; ++i) {
    ssize_t w;
    do w = ::write(fds[i], "0", 1);
    while (w < 0 && errno == EINTR);
    if (w < 0) return errno;
    if (w != 1) return EIO;
  }
  return 0;
}

result<std::unique_ptr<run_cgroup>> create_v2(const fs::path& root, const std::string& run_id,
                                              const std::string& leaf, const limits& lim,
                                              evict_fn evict) {
  // Enable the controllers for the levels below, where offered (a fake or undelegated tree
  // may offer none; then the limit files below are what matters).
  auto enable = [](const fs::path& dir) {
    auto offered = read_small(dir / "cgroup.controllers").value_or("");
    std::string want;
    for (const char* c : {"memory", "pids", "cpu"}) {
      if (offered.find(c) != std::string::npos) want += fmt::format("+{} ", c);
    }
    if (!want.empty()) (void)write_value(dir / "cgroup.subtree_control", want);
  };
  const fs::path base = root / "evalbox";
  const fs::path dir = base / launch_cgroup_name(run_id, leaf);
  enable(root);
  EB_TRY(make_dir(base));
  enable(base);
  if (::mkdir(dir.c_str(), 0755) != 0) return sys_error(errno, "mkdir({})", dir.string());
  unique_fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return sys_error(errno, "open({})", dir.string());
  auto cg = std::make_unique<v2_cgroup>(dir, std::move(fd), evict);
  if (lim.memory_bytes) {
    EB_TRY(write_value(dir / "memory.max", std::to_string(lim.memory_bytes)));
    (void)write_value(dir / "memory.swap.max", "0");  // absent without swap accounting
  }
  if (lim.pids) EB_TRY(write_value(dir / "pids.max", std::to_string(lim.pids)));
  return cg;
}

namespace {

// The v1 leaves named `name` below <mount>/evalbox, made now; on failure, none is left.
result<std::unique_ptr<v1_cgroup>> make_v1_leaves(const std::map<std::string, fs::path>& mounts,
                                                  const std::string& name, evict_fn evict) {
  std::map<std::string, fs::path> leaves;
  for (const auto& [ctl, mnt] : mounts) {
    if (mnt.empty()) continue;
    const fs::path dir = mnt / "evalbox" / name;
    // <mount>/evalbox exists after the first launch on this host: made only when missing.
    int rc = ::mkdir(dir.c_str(), 0755);
    if (rc != 0 && errno == ENOENT) {
      EB_TRY(make_dir(mnt / "evalbox"));
      rc = ::mkdir(dir.c_str(), 0755);
    }
    if (rc != 0) {
      int err = errno;
      v1_cgroup partial(std::move(leaves), evict);  // removes what was made
      return sys_error(err, "mkdir({})", dir.string());
    }
    leaves[ctl] = dir;
  }
  return std::make_unique<v1_cgroup>(std::move(leaves), evict);
}

}  // namespace

result<std::unique_ptr<run_cgroup>> create_v1(const std::map<std::string, fs::path>& mounts,
                                              const std::string& run_id, const std::string& leaf,
                                              const limits& lim, evict_fn evict) {
  auto cg = EB_TRY(make_v1_leaves(mounts, launch_cgroup_name(run_id, leaf), evict));
  EB_TRY(set_v1_limits(cg->leaves(), lim));
  return std::unique_ptr<run_cgroup>(std::move(cg));
}

std::string launch_cgroup_name(std::string_view run_id, std::string_view leaf) {
  return fmt::format("{}@{}", run_id, leaf);
}

std::vector<fs::path> run_cgroups_in(const fs::path& parent, std::string_view run_id) {
  std::vector<fs::path> out;
  const std::string prefix = fmt::format("{}@", run_id);
  unique_dir d(::opendir(parent.c_str()));
  if (!d) return out;
  while (dirent* e = ::readdir(d.get())) {
    const std::string_view name = e->d_name;
    if ((name.starts_with(prefix) || name == run_id) &&
        (e->d_type == DT_DIR || e->d_type == DT_UNKNOWN))
      out.push_back(parent / name);
  }
  return out;
}

result<std::unique_ptr<run_cgroup>> adopt(const json& d) {
  auto bad = [&] {
    return make_error(error_kind::internal, "not a cgroup description: {}", d.dump());
  };
  const auto version = json_find<std::string>(d, "version");
  if (!version) return bad();
  if (*version == "v2") {
    const auto leaf_text = json_find<std::string>(d, "leaf");
    if (!leaf_text) return bad();
    fs::path leaf = *leaf_text;
    unique_fd fd(::open(leaf.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd) return sys_error(errno, "open({})", leaf.string());
    return std::make_unique<v2_cgroup>(std::move(leaf), std::move(fd), kill_and_remove);
  }
  const auto dirs = json_find<std::map<std::string, std::string>>(d, "leaves");
  if (*version != "v1" || !dirs) return bad();
  std::map<std::string, fs::path> leaves(dirs->begin(), dirs->end());
  return std::make_unique<v1_cgroup>(std::move(leaves), kill_and_remove);
}

namespace {

// Where this host lets evalbox create run cgroups. Looked up once per process: the layout
// does not change while evalbox runs, and the launcher asks on every launch.
struct host_cgroups {
  fs::path v2_root;                    // a v2 root that offers memory and pids, or empty
  std::map<std::string, fs::path> v1;  // else the writable v1 controller mounts
};

const host_cgroups& host_layout() {
  // Never destroyed: a thread still ending while the process exits (a session server's
  // connection, a runner's worker) may ask for it after static destructors have run.
  static const host_cgroups& h = *new host_cgroups([] {
    host_cgroups out;
    // v2: the unified mount, if it offers memory and pids to our subtree.
    for (const char* root_s : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
      const fs::path root = root_s;
      auto ctl = read_small(root / "cgroup.controllers");
      if (ctl && ctl->find("memory") != std::string::npos &&
          ctl->find("pids") != std::string::npos &&
          ::access((root / "cgroup.subtree_control").c_str(), W_OK) == 0) {
        out.v2_root = root;
        return out;
      }
    }
    // Found together (sys::cgroup_v1_mounts: statfs in the usual layout, else one read of
    // the mount table). cpuacct measures CPU time; the cpu controller (shares, quotas) is
    // not used, and each hierarchy costs two mkdirs, a migration and two rmdirs per launch.
    const std::vector<std::string> controllers = {"memory", "pids", "cpuacct"};
    const auto found = sys::cgroup_v1_mounts(controllers);
    for (size_t i = 0; i < controllers.size(); ++i) {
      const auto& m = found[i];
      if (!m.empty() && ::access(m.c_str(), W_OK) == 0) out.v1[controllers[i]] = m;
    }
    return out;
  }());
  return h;
}

}  // namespace

result<std::unique_ptr<run_cgroup>> create_for_host(const host_options& host,
                                                    const std::string& run_id,
                                                    const std::string& leaf, const limits& lim) {
  // For tests and unusual hosts: force cgroup v2 at a given root (e.g. the controller-less
  // unified mount, to exercise CLONE_INTO_CGROUP).
  if (!host.v2_root.empty()) return create_v2(host.v2_root, run_id, leaf, lim);
  const host_cgroups& h = host_layout();
  if (!h.v2_root.empty()) return create_v2(h.v2_root, run_id, leaf, lim);
  if (h.v1.contains("memory") && h.v1.contains("pids")) return create_v1(h.v1, run_id, leaf, lim);
  return make_error(error_kind::unsupported,
                    "no writable cgroup: neither a delegated cgroup v2 with memory and pids nor "
                    "cgroup v1 memory and pids mounts");
}

bool ahead_applies(const host_options& host) {
  if (!host.v2_root.empty() || !host.ahead) return false;
  const host_cgroups& h = host_layout();
  return h.v2_root.empty() && h.v1.contains("memory") && h.v1.contains("pids");
}

namespace {
constexpr std::string_view ahead_prefix = "@ahead-";  // then the helper's pid
}  // namespace

std::string ahead_cgroup_name(pid_t helper) { return fmt::format("{}{}", ahead_prefix, helper); }

result<std::unique_ptr<run_cgroup>> create_ahead_v1(const std::map<std::string, fs::path>& mounts,
                                                    pid_t helper, evict_fn evict) {
  auto cg = EB_TRY(make_v1_leaves(mounts, ahead_cgroup_name(helper), evict));
  return std::unique_ptr<run_cgroup>(std::move(cg));
}

result<std::unique_ptr<run_cgroup>> create_ahead(const host_options& host, pid_t helper) {
  if (!ahead_applies(host))
    return make_error(error_kind::unsupported, "cgroups are made ahead on cgroup v1 only");
  return create_ahead_v1(host_layout().v1, helper, kill_and_remove);
}

void remove_stale_ahead() {
  for (const auto& [ctl, mount] : host_layout().v1) {
    const fs::path parent = mount / "evalbox";
    unique_dir d(::opendir(parent.c_str()));
    if (!d) continue;
    while (dirent* e = ::readdir(d.get())) {
      const std::string_view name = e->d_name;
      if (!name.starts_with(ahead_prefix)) continue;
      pid_t pid = 0;
      const auto digits = name.substr(ahead_prefix.size());
      const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
      if (ec != std::errc() || end != digits.data() + digits.size() || pid <= 0) continue;
      if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // its helper may still use it
      (void)::rmdir((parent / name).c_str());               // refused while a task is in it
    }
  }
}

std::vector<fs::path> run_cgroup_parents(const host_options& host) {
  const host_cgroups& h = host_layout();
  std::vector<fs::path> out;
  if (!h.v2_root.empty()) out.push_back(h.v2_root / "evalbox");
  for (const auto& [ctl, mount] : h.v1)
    if (std::find(out.begin(), out.end(), mount / "evalbox") == out.end())
      out.push_back(mount / "evalbox");
  if (!host.v2_root.empty()) out.push_back(host.v2_root / "evalbox");
  return out;
}

}  // namespace evalbox::sandbox::cgroup
