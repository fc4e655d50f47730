// The launcher: turns a prepared session and launch options into a launch plan, runs the
// helper with Boost.Process (this is the only file that includes it), waits (polling the
// cancel token) and reads the run record back.
#include "sandbox/launch/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>

// Boost.Process compiles its vfork launcher only under an old _POSIX_C_SOURCE; glibc has vfork.
#define BOOST_POSIX_HAS_VFORK 1
#include <boost/process.hpp>
#include <boost/process/posix.hpp>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "sandbox/base/fs.h"
#include "sandbox/base/json.h"
#include "sandbox/base/unique_fd.h"
#include "sandbox/cgroup/cgroup.h"
#include "sandbox/launch/plan.h"
#include "sandbox/sys/syscalls.h"

namespace evalbox::sandbox {
namespace fs = std::filesystem;
namespace bp = boost::process;

fs::path helper_path() {
  if (const char* env = std::getenv("EVALBOX_HELPER"); env && *env) return env;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path beside = self.parent_path() / "evalbox-sandbox";
    if (fs::exists(beside, ec)) return beside;
  }
  return EVALBOX_HELPER_BUILD_PATH;
}

namespace {

std::atomic<int> next_seq{0};

// Credential leases are the writable file binds inside the managed home.
bool is_secret_mount(const bind_mount& m) {
  return m.writable && m.is_file && is_within(m.target, "/home/agent");
}

}  // namespace

// Three steps, in order: fill the helper's plan from the session (one line a field), start the
// helper with its cgroup handed over on fd 3, then wait for it (a cancel becomes SIGTERM) and read
// its record. One function because the steps share the plan, the paths and the child; it is long
// mostly for the plan's fields.
result<run_record> launch(const prepared_session& session, const launch_options& options,
                          const cancel_token* cancel) {
  const session_request& req = session.request();
  launch_plan p;
  p.run_id = req.run_id;
  p.label = options.label;
  p.seq = ++next_seq;
  p.host_uid = session.sandbox_uid();
  p.host_gid = session.sandbox_gid();
  const fs::path dir = session.launch_dir();
  EB_TRY(make_dirs(dir, 0700));
  const std::string base = (dir / fmt::format("{}-{}", p.label, p.seq)).string();
  p.root_dir = base + ".root";
  if (::mkdir(p.root_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return sys_error(errno, "mkdir({})", p.root_dir);
  }
  p.workspace_dir = session.workspace_dir().string();
  p.workspace_target = session.workspace_target().string();
  if (const session_image* img = options.host_root ? nullptr : session.image()) {
    plan_image pi;
    for (const auto& l : img->lowers) pi.lowers.push_back(l.string());
    pi.upper = img->upper.string();
    pi.work = img->work.string();
    pi.id = img->id;
    pi.reference = img->reference;
    pi.manifest_digest = img->manifest_digest;
    pi.layers = img->layers;
    p.image = std::move(pi);
  }
  p.home_dir = session.home_dir().string();
  for (const auto& m : session.mounts()) {
    if (!options.with_secrets && is_secret_mount(m)) continue;
    p.mounts.push_back(m);
  }
  for (const auto& m : options.extra_mounts) p.mounts.push_back(m);
  p.argv = options.argv.empty() ? req.argv : options.argv;
  p.env = options.env ? *options.env : req.env;
  p.cwd = options.cwd.empty() ? p.workspace_target : options.cwd.string();
  p.limits = options.limits_override ? *options.limits_override : req.limits;
  p.network = options.network_override ? *options.network_override : req.network;
  p.landlock = req.landlock;
  p.disk_quota = session.disk_quota_enforced();
  p.tmp_bytes =
      std::min<uint64_t>(p.limits.disk_bytes ? p.limits.disk_bytes : (1ull << 30), 1ull << 30);
  p.inherit_stdio = options.inherit_stdio;
  p.terminal = options.inherit_stdio && options.terminal;
  if (options.stdin_data) {
    p.stdin_path = base + ".stdin";
    EB_TRY(write_file(p.stdin_path, *options.stdin_data, 0600));
  }
  if (!options.inherit_stdio) {
    p.stdout_path = options.stdout_path.empty() ? base + ".stdout" : options.stdout_path.string();
    p.stderr_path = options.stderr_path.empty()
                        ? (options.stdout_path.empty() ? base + ".stderr" : p.stdout_path)
                        : options.stderr_path.string();
  }
  p.binding_digest = session.binding_digest();
  const std::string plan_path = base + ".plan.json";
  const std::string record_path = base + ".record.json";
  EB_TRY(write_file(plan_path, pretty_json(p.to_json()), 0600));

  const fs::path helper = helper_path();
  // The run's cgroup is made here while the helper starts (its exec, plan and compile: ~0.3 ms
  // that would otherwise come one after the other), then handed over on the helper's fd 3
  // (docs/sandbox.md, "Order of steps"). A socket rather than a pipe: sending to a helper
  // that died raises no SIGPIPE.
  int cg_pipe[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, cg_pipe) != 0)
    return sys_error(errno, "socketpair");
  unique_fd cg_write(cg_pipe[1]);
  // Above the standard streams, so that binding it to fd 3 in the child is a real dup2 (which
  // clears close-on-exec); close-on-exec here, so no other thread's child inherits it.
  unique_fd cg_read;
  {
    unique_fd low(cg_pipe[0]);
    cg_read.reset(::fcntl(low.get(), F_DUPFD_CLOEXEC, 10));
  }
  if (!cg_read) return sys_error(errno, "fcntl(F_DUPFD_CLOEXEC)");
  int exit_code = -1;
  try {
    std::error_code ec;
    // vfork: the caller is often multi-threaded (the runner's workers) and large; a fork
    // would copy its page tables only for the child to exec at once (0.4 ms of each launch).
    const auto cg_fd = bp::posix::fd.bind(3, cg_read.get());
    bp::child c =
        options.inherit_stdio
            ? bp::child(helper.string(), "--plan", plan_path, "--record", record_path,
                        "--cgroup-fd", "3", cg_fd, bp::posix::use_vfork, ec)
            : bp::child(helper.string(), "--plan", plan_path, "--record", record_path,
                        "--cgroup-fd", "3", cg_fd, bp::std_in < bp::null, bp::posix::use_vfork, ec);
    cg_read.reset();
    if (ec) {
      return make_error(error_kind::io, "start {}: {}", helper.string(), ec.message());
    }
    {
      json msg;
      if (auto cg = cgroup::create_for_host(p.run_id, fmt::format("{}-{}", p.label, p.seq),
                                            {p.limits.memory_bytes, p.limits.pids})) {
        msg = {{"cgroup", (*cg)->describe()}};
        (*cg)->release();  // the helper's now (and the teardown's, should it die first)
      } else {
        msg = {{"error", cg.error().message}};
      }
      const std::string text = msg.dump();
      (void)!::send(cg_write.get(), text.data(), text.size(), MSG_NOSIGNAL);
      cg_write.reset();
    }
    bool signalled = false;
    // Wake on the helper's exit through a pidfd (a fixed sleep here added 12.5 ms to the
    // average launch); the timeout only bounds how late a cancel is noticed.
    unique_fd pidfd(sys::pidfd_open(c.id(), 0));
    while (c.running(ec)) {
      if (cancel && !signalled && cancel->requested.load()) {
        // The helper kills the run, tears down and records outcome `cancelled`.
        ::kill(c.id(), SIGTERM);
        signalled = true;
      }
      if (pidfd) {
        pollfd pfd{pidfd.get(), POLLIN, 0};
        ::poll(&pfd, 1, 25);
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(25));
      }
    }
    c.wait(ec);
    exit_code = c.exit_code();
  } catch (const std::exception& e) {
    return make_error(error_kind::io, "run {}: {}", helper.string(), e.what());
  }
  ::rmdir(p.root_dir.c_str());
  auto j = read_json_file(record_path);
  if (!j) {
    return make_error(error_kind::internal, "{} exited with code {} and wrote no record: {}",
                      helper.string(), exit_code, j.error().message);
  }
  auto rec = run_record::from_json(*j);
  if (!rec)
    return make_error(error_kind::internal, "{} wrote a record evalbox cannot read ({}): {}",
                      helper.string(), record_path, rec.error().message);
  return std::move(*rec);
}

}  // namespace evalbox::sandbox
