// Benchmark scaffolding (see bench_support.h).
#include "bench/bench_support.h"

#include <cstdio>

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>

#include "sandbox/mount/mount.h"

extern char** environ;

namespace evalbox::bench {
namespace fs = std::filesystem;

bench_env::bench_env() : tmp_("evalbox-bench") {
  // The sandbox id opens leases and traverses the workspace by path.
  ::chmod(tmp_.path().c_str(), 0755);
  (void)make_dirs(tmp_.path() / "creds", 0700);
  (void)write_file(tmp_.path() / "creds" / "auth.json", R"({"token":"bench-0123456789"})", 0600);
  auto opts = sandbox::default_preparer_options();
  opts.state_root = tmp_.path() / "state";
  preparer_ = std::make_unique<sandbox::preparer>(opts);
}

sandbox::preparer& bench_env::cold_preparer() {
  if (!cold_preparer_) {
    auto opts = preparer_->options();
    opts.launch.warm_helper = false;
    cold_preparer_ = std::make_unique<sandbox::preparer>(opts);
  }
  return *cold_preparer_;
}

bench_env::~bench_env() {
  cold_preparer_.reset();
  preparer_.reset();
  // The preparer binds <state>/runs onto itself (private propagation); leave no mount behind.
  (void)sandbox::mount::unmount_all_under(tmp_.path());
  std::error_code ec;
  fs::remove_all(tmp_.path() / "state", ec);
}

sandbox::secret_mount bench_env::secret() const {
  return {"bench-login", tmp_.path() / "creds" / "auth.json", ".agent/auth.json"};
}

sandbox::session_request bench_env::request(const fs::path& workspace,
                                            sandbox::workspace_strategy strategy) const {
  sandbox::session_request r;
  r.run_id = next_run_id("bench");
  r.authorized_until = std::chrono::system_clock::now() + std::chrono::hours(24);
  r.argv = {"/bin/true"};
  r.env = {{"PATH", "/usr/bin:/bin"}, {"HOME", "/home/agent"}};
  r.workspace.source = workspace;
  r.workspace.strategy = strategy;
  r.home.adapter = "bench";
  r.home.directories = {".config/agent"};
  r.home.files = {{".config/agent/settings.json", "{\"model\": \"bench\"}\n", 0644}};
  r.secrets = {secret()};
  r.limits.disk_bytes = 1ull << 30;
  r.limits.memory_bytes = 512ull << 20;
  r.limits.pids = 128;
  r.limits.wall_ms = 60'000;
  r.limits.cpu_ms = 60'000;
  return r;
}

result<sandbox::image_summary> bench_env::image(const std::string& name) {
  if (auto it = images_.find(name); it != images_.end()) return it->second;
  const std::string cmd = std::string(EVALBOX_SOURCE_DIR) + "/tests/images/make-images " + name;
  std::string dir;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) dir.append(buf, n);
    if (::pclose(p) != 0) dir.clear();
  }
  while (!dir.empty() && dir.back() == '\n') dir.pop_back();
  if (dir.empty())
    return make_error(error_kind::not_found, "tests/images/make-images {} failed", name);
  auto img = EB_TRY(preparer_->resolve_image("oci:" + dir + "/oci:latest", {}));
  return images_[name] = std::move(img);
}

sandbox::session_request bench_env::image_request(const fs::path& workspace,
                                                  const sandbox::image_summary& image) const {
  auto r = request(workspace, sandbox::workspace_strategy::auto_select);
  r.image = sandbox::image_root{image.id, image.reference, image.manifest_digest};
  return r;
}

std::string next_run_id(std::string_view prefix) {
  static std::atomic<int> counter{0};
  return fmt::format("{}-{}-{}", prefix, ::getpid(), ++counter);
}

child_result run_child(const std::vector<std::string>& argv,
                       const std::vector<std::string>& extra_env) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> envp;
  for (char** e = environ; *e; ++e) envp.push_back(*e);
  for (const auto& e : extra_env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  child_result r;
  posix_spawn_file_actions_t fa;
  ::posix_spawn_file_actions_init(&fa);
  for (int fd : {0, 1, 2}) ::posix_spawn_file_actions_addopen(&fa, fd, "/dev/null", O_RDWR, 0);
  pid_t pid = -1;
  const int err = ::posix_spawn(&pid, args[0], &fa, nullptr, args.data(), envp.data());
  ::posix_spawn_file_actions_destroy(&fa);
  if (err != 0) return r;
  ::wait4(pid, &r.status, 0, &r.usage);
  return r;
}

tmpfs_mount::tmpfs_mount(const fs::path& dir, uint64_t bytes) : dir_(dir) {
  (void)make_dirs(dir, 0755);
  const std::string opts = fmt::format("size={},mode=0755", bytes);
  ok_ = ::mount("tmpfs", dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, opts.c_str()) == 0;
}

tmpfs_mount::~tmpfs_mount() {
  if (ok_) ::umount2(dir_.c_str(), MNT_DETACH);
}

}  // namespace evalbox::bench
