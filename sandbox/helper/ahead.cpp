// Namespaces made ahead (ahead.h).
#include "sandbox/helper/ahead.h"

#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "sandbox/cgroup/cgroup.h"
#include "sandbox/helper/child.h"
#include "sandbox/sys/fd_passing.h"
#include "sandbox/sys/syscalls.h"

namespace evalbox::sandbox::helper {

namespace {

// The holder's stack: it shares the helper's memory (CLONE_VM: its creation and exit copy and
// free no page tables) and runs only the few calls below, which touch nothing else of it and
// cannot fail (so it never writes the errno it shares with the helper).
alignas(64) char holder_stack[16 << 10];

int hold(void* parent) noexcept {
  (void)sys::close_range(0, ~0U, 0);  // its own fd table: holds no fd of the helper's
  (void)::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (::getppid() != *static_cast<const pid_t*>(parent)) ::_exit(0);
  for (;;) ::pause();  // no signal is caught: only a fatal one ends it
}

}  // namespace

result<sys::owned_process> make_namespaces_ahead() {
  static pid_t parent;
  parent = ::getpid();
  int pidfd = -1;
  const pid_t pid =
      ::clone(hold, holder_stack + sizeof holder_stack,
              CLONE_VM | CLONE_NEWUSER | CLONE_NEWNET | CLONE_PIDFD | SIGCHLD, &parent, &pidfd);
  if (pid < 0) return sys_error(errno, "clone(user, net) ahead of the launch");
  return sys::owned_process(pid, unique_fd(pidfd));
}

namespace {

// What the starter reads (it shares the helper's memory): set before it is cloned, and `ctx`
// before the byte on `go_fd` starts it.
struct starter_shared {
  pid_t parent = -1;
  int go_fd = -1;     // read end
  int moved_fd = -1;  // write end: the errno of its move into the cgroups (0: moved)
  int tasks[sys::max_fds] = {};
  size_t task_count = 0;
  void* ctx = nullptr;
};
starter_shared shared;

constexpr size_t starter_stack_size = 8 << 20;
constexpr size_t starter_guard = 64 << 10;

// The starter. First it moves itself into the cgroups (cgroup::move_self: no grace period, the
// cgroup mutex held for microseconds) while the helper waits for its answer: only then may a
// failed call write the errno it shares with the helper. After that it makes only calls that
// cannot fail while it waits: every signal blocked in it, so the read is never interrupted.
int start(void*) noexcept {
  sigset_t all;
  sigfillset(&all);
  ::sigprocmask(SIG_SETMASK, &all, nullptr);
  (void)::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (::getppid() != shared.parent) ::_exit(0);
  const int moved = cgroup::move_self(shared.tasks, shared.task_count);
  if (::write(shared.moved_fd, &moved, sizeof moved) != sizeof moved || moved != 0) ::_exit(1);
  char byte;
  if (::read(shared.go_fd, &byte, 1) != 1) ::_exit(0);  // end of file: never used
  // From here the helper waits for this process to exit. A table of its own: child_main closes
  // the helper's ends of the pipes, which must stay open in the helper.
  if (::unshare(CLONE_FILES) != 0) ::_exit(1);
  child_entry(shared.ctx);  // clones pid 1, then exits (pid 1 goes on)
  ::_exit(1);
}

}  // namespace

cgroup_ahead::~cgroup_ahead() {
  starter_.terminate();
  if (stack_) ::munmap(stack_, starter_stack_size);
  if (go_ && shared.go_fd >= 0) {  // never went: the read end is still open here
    (void)::close(shared.go_fd);
    shared.go_fd = -1;
  }
  if (cg_) (void)cg_->destroy();
}

result<std::unique_ptr<cgroup_ahead>> make_cgroup_ahead(const cgroup::host_options& host) {
  std::unique_ptr<cgroup_ahead> a(new cgroup_ahead);
  cgroup::remove_stale_ahead();
  a->cg_ = EB_TRY(cgroup::create_ahead(host, ::getpid()));
  const std::vector<unique_fd> tasks = EB_TRY(a->cg_->open_tasks());  // at most max_fds
  int go[2];
  if (::pipe2(go, O_CLOEXEC) != 0) return sys_error(errno, "pipe2");
  unique_fd go_read(go[0]);
  a->go_.reset(go[1]);
  int moved[2];
  if (::pipe2(moved, O_CLOEXEC) != 0) return sys_error(errno, "pipe2");
  const unique_fd moved_read(moved[0]);
  const unique_fd moved_write(moved[1]);
  void* stack = ::mmap(nullptr, starter_stack_size, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) return sys_error(errno, "mmap the starter's stack");
  a->stack_ = stack;
  (void)::mprotect(stack, starter_guard, PROT_NONE);  // an overflow faults instead
  shared.parent = ::getpid();
  shared.moved_fd = moved_write.get();
  for (size_t i = 0; i < tasks.size(); ++i) shared.tasks[i] = tasks[i].get();
  shared.task_count = tasks.size();
  shared.go_fd = go_read.release();  // closed by go() or the destructor
  int pidfd = -1;
  const pid_t pid = ::clone(start, static_cast<char*>(stack) + starter_stack_size,
                            CLONE_VM | CLONE_FILES | CLONE_PIDFD | SIGCHLD, nullptr, &pidfd);
  if (pid < 0) return sys_error(errno, "clone the starter");
  a->starter_ = sys::owned_process(pid, unique_fd(pidfd));
  // Its answer, or its exit (killed before it answered): the write end is the helper's too
  // (CLONE_FILES), so no end of file would say so. The tasks files and the pipe close when this
  // returns; the starter is done with them.
  pollfd ready[2] = {{moved_read.get(), POLLIN, 0}, {a->starter_.pidfd(), POLLIN, 0}};
  while (::poll(ready, 2, -1) < 0 && errno == EINTR) {
  }
  int err = 0;
  const ssize_t n =
      (ready[0].revents & POLLIN) ? ::read(moved_read.get(), &err, sizeof err) : ssize_t{0};
  shared.task_count = 0;
  if (n != sizeof err) return make_error(error_kind::io, "the starter exited before its move");
  if (err != 0) return sys_error(err, "move the starter into the cgroups made ahead");
  return a;
}

bool cgroup_ahead::starter_gone() const noexcept {
  pollfd p{starter_.pidfd(), POLLIN, 0};
  return ::poll(&p, 1, 0) != 0;
}

result<int> cgroup_ahead::go(void* ctx) {
  shared.ctx = ctx;
  const char byte = 'g';
  if (::write(go_.get(), &byte, 1) != 1) return sys_error(errno, "start the starter");
  int st = 0;
  if (starter_.reap(&st, nullptr) < 0) return sys_error(errno, "wait for the starter");
  ::munmap(stack_, starter_stack_size);
  stack_ = nullptr;
  (void)::close(shared.go_fd);
  shared.go_fd = -1;
  go_.reset();
  return st;
}

}  // namespace evalbox::sandbox::helper
