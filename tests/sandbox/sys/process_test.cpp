// owned_process: a child evalbox started is killed and reaped by its owner on every way out,
// reaped once, and never by two owners.
#include "sandbox/sys/process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <utility>

#include "sandbox/sys/syscalls.h"

namespace evalbox::sys {
namespace {

// A child that sleeps until killed.
pid_t sleeper() {
  const pid_t pid = ::fork();
  if (pid == 0) {
    for (;;) ::pause();
  }
  return pid;
}

// True while `pid` is a child of ours that nobody has reaped.
bool unreaped(pid_t pid) {
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0;
}

TEST(OwnedProcess, GoingOutOfScopeKillsAndReapsTheChild) {
  const pid_t pid = sleeper();
  ASSERT_GT(pid, 0);
  {
    owned_process child(pid, unique_fd(pidfd_open(pid, 0)));
    EXPECT_TRUE(child.owned());
    EXPECT_GE(child.pidfd(), 0);
  }
  EXPECT_FALSE(unreaped(pid)) << "left a running child or a zombie";
  EXPECT_EQ(::kill(pid, 0), -1);
}

TEST(OwnedProcess, WorksWithoutAPidfd) {
  const pid_t pid = sleeper();
  { owned_process child(pid, unique_fd()); }
  EXPECT_FALSE(unreaped(pid));
}

TEST(OwnedProcess, ReapReturnsTheStatusOnceAndThenOwnsNothing) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(3);
  owned_process child(pid, unique_fd(pidfd_open(pid, 0)));
  int status = 0;
  rusage usage{};
  ASSERT_EQ(child.reap(&status, &usage), pid);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 3);
  EXPECT_FALSE(child.owned());
  EXPECT_EQ(child.pidfd(), -1);
  EXPECT_EQ(child.signal(SIGKILL), ESRCH);  // nothing is signalled once reaped
  EXPECT_EQ(child.reap(&status, nullptr), -1);
  EXPECT_EQ(errno, ECHILD);
  child.terminate();  // nothing to do
}

TEST(OwnedProcess, ASignalReachesTheChild) {
  const pid_t pid = sleeper();
  owned_process child(pid, unique_fd(pidfd_open(pid, 0)));
  EXPECT_EQ(child.signal(SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(child.reap(&status, nullptr), pid);
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
}

TEST(OwnedProcess, AMoveHandsOverTheChildAndAnAssignmentEndsTheOldOne) {
  const pid_t first = sleeper();
  const pid_t second = sleeper();
  owned_process a(first, unique_fd());
  owned_process b(std::move(a));
  EXPECT_FALSE(a.owned());  // NOLINT(bugprone-use-after-move): the moved-from state is the point
  EXPECT_EQ(b.pid(), first);
  EXPECT_TRUE(unreaped(first));  // the move killed nothing
  b = owned_process(second, unique_fd());
  EXPECT_FALSE(unreaped(first)) << "the replaced child was left behind";
  EXPECT_EQ(b.pid(), second);
}

}  // namespace
}  // namespace evalbox::sys
