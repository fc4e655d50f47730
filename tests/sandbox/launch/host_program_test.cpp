// run_host_program: what a host program (git, a command judge, podman, sbatch) gets, and what
// evalbox keeps. Every program here is a short shell command; the timeouts are under a second.
#include "sandbox/launch/host_program.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "base/fs.h"
#include "base/unique_fd.h"

namespace evalbox::sandbox {
namespace {

using namespace std::chrono_literals;

host_program shell(std::string script) {
  host_program p;
  p.argv = {"sh", "-c", std::move(script)};
  p.env = {{"PATH", "/usr/bin:/bin"}};
  return p;
}

// Whether `pid` is gone or a zombie (killed, not reaped yet by whoever inherited it).
bool is_dead(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return true;
  std::string line;
  std::getline(stat, line);
  const auto close = line.rfind(')');
  return close == std::string::npos || line.substr(close + 2, 1) == "Z";
}

TEST(HostProgram, ItsOutputPipeIsCloseOnExecInEvalbox) {
  // The program looks at its parent (this process) and prints the flags of every fd there
  // that is the pipe its own stdout writes to. Without close-on-exec, any child another
  // thread starts meanwhile (a warm sandbox helper waits for minutes) would hold the pipe
  // and the read of the output would not end when the program does.
  host_program p = shell(
      "me=$(readlink /proc/$$/fd/1); for f in /proc/$PPID/fd/*; do "
      "[ \"$(readlink \"$f\")\" = \"$me\" ] && grep '^flags:' /proc/$PPID/fdinfo/${f##*/}; "
      "done; true");
  p.stderr_to = host_output::discard;
  auto r = run_host_program(p);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_TRUE(r->ok()) << r->output;
  std::istringstream lines(r->output);
  std::string word, flags;
  int seen = 0;
  while (lines >> word >> flags) {
    ASSERT_EQ(word, "flags:") << r->output;
    ++seen;
    EXPECT_NE(std::stoul(flags, nullptr, 8) & 02000000, 0u)
        << "evalbox's end of the output pipe is inheritable: " << r->output;
  }
  EXPECT_GE(seen, 1) << "the pipe was not found among evalbox's fds: " << r->output;
}

TEST(HostProgram, OutputExitCodeAndInputReachTheCaller) {
  host_program p = shell("read line; echo \"got $line\"; echo oops >&2; exit 3");
  p.input = "hello\n";
  auto r = run_host_program(p);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->signal, 0);
  EXPECT_FALSE(r->ok());
  EXPECT_FALSE(r->timed_out);
  EXPECT_EQ(r->output, "got hello\noops\n");
}

TEST(HostProgram, StdinIsEmptyWithoutInput) {
  auto r = run_host_program(shell("wc -c"));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->ok());
  EXPECT_EQ(r->output, "0\n");
}

TEST(HostProgram, AnInputLargerThanAPipeIsReadWhole) {
  host_program p = shell("wc -c");
  p.input = std::string(1u << 20, 'x');
  auto r = run_host_program(p);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->output, "1048576\n");
}

TEST(HostProgram, DiscardedStderrLeavesStdoutAlone) {
  host_program p = shell("echo out; echo err >&2");
  p.stderr_to = host_output::discard;
  auto r = run_host_program(p);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->output, "out\n");
}

TEST(HostProgram, ASignalIsReportedAsSuch) {
  auto r = run_host_program(shell("kill -TERM $$; sleep 5"));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->exit_code, -1);
  EXPECT_EQ(r->signal, SIGTERM);
  EXPECT_FALSE(r->timed_out);
  EXPECT_FALSE(r->ok());
}

TEST(HostProgram, TheTimeoutKillsTheWholeProcessGroup) {
  // The program starts a grandchild that sleeps with the output pipe open, prints its pid and
  // waits. Only a kill of the whole group ends the pipe before the sleep does.
  host_program p = shell("sleep 30 & echo $!; wait");
  p.timeout = 300ms;
  const auto start = std::chrono::steady_clock::now();
  auto r = run_host_program(p);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->timed_out);
  EXPECT_FALSE(r->ok());
  EXPECT_EQ(r->signal, SIGKILL);
  EXPECT_LT(took, 10s);
  const pid_t grandchild = std::atoi(r->output.c_str());
  ASSERT_GT(grandchild, 0) << r->output;
  for (int i = 0; i < 100 && !is_dead(grandchild); ++i) std::this_thread::sleep_for(20ms);
  EXPECT_TRUE(is_dead(grandchild)) << "the grandchild " << grandchild << " outlived the timeout";
}

TEST(HostProgram, TheTimeoutAppliesWithNothingCaptured) {
  host_program p = shell("sleep 30");
  p.stdout_to = p.stderr_to = host_output::discard;
  p.timeout = 200ms;
  const auto start = std::chrono::steady_clock::now();
  auto r = run_host_program(p);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->signal, SIGKILL);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

TEST(HostProgram, AProgramThatWritesWithoutEndStillTimesOut) {
  host_program p = shell("yes");
  p.max_output = 100;
  p.timeout = 300ms;
  const auto start = std::chrono::steady_clock::now();
  auto r = run_host_program(p);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->timed_out);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_LE(r->output.size(), 100u);
}

TEST(HostProgram, WhatItLeavesInItsGroupEndsWithIt) {
  // A background job that closed the pipe: the program's end is the group's.
  host_program p = shell("sleep 30 >/dev/null 2>&1 & echo $!");
  auto r = run_host_program(p);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->ok());
  const pid_t job = std::atoi(r->output.c_str());
  ASSERT_GT(job, 0) << r->output;
  for (int i = 0; i < 100 && !is_dead(job); ++i) std::this_thread::sleep_for(20ms);
  EXPECT_TRUE(is_dead(job));
}

TEST(HostProgram, ItsProcessGroupIsItsOwnUnlessAskedOtherwise) {
  const std::string script = "echo $$ $(cut -d' ' -f5 /proc/$$/stat)";
  auto own = run_host_program(shell(script));
  ASSERT_TRUE(own) << own.error().message;
  std::istringstream o(own->output);
  pid_t pid = 0, group = 0;
  o >> pid >> group;
  EXPECT_EQ(pid, group) << own->output;

  host_program p = shell(script);
  p.own_process_group = false;
  auto shared = run_host_program(p);
  ASSERT_TRUE(shared) << shared.error().message;
  std::istringstream s(shared->output);
  s >> pid >> group;
  EXPECT_EQ(group, ::getpgrp()) << shared->output;
}

TEST(HostProgram, TheOutputKeptIsItsTail) {
  host_program p = shell("head -c 200000 /dev/zero | tr '\\0' a; printf END");
  p.max_output = 1000;
  auto r = run_host_program(p);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->output.size(), 1000u);
  EXPECT_TRUE(r->output.ends_with("aaaEND")) << r->output.substr(990);
}

TEST(HostProgram, StreamsSentToTheLogAreAppended) {
  temp_dir dir("evalbox-host-program");
  const auto log = dir.path() / "tool.log";
  ASSERT_TRUE(write_file(log, "before\n"));
  host_program p = shell("echo out; echo err >&2");
  p.stdout_to = p.stderr_to = host_output::log;
  p.log = log;
  auto r = run_host_program(p);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->output, "");
  p.stdout_to = host_output::capture;
  auto captured = run_host_program(p);
  ASSERT_TRUE(captured) << captured.error().message;
  EXPECT_EQ(captured->output, "out\n");
  auto text = read_file(log);
  ASSERT_TRUE(text) << text.error().message;
  EXPECT_EQ(*text, "before\nout\nerr\nerr\n");
}

TEST(HostProgram, ALogStreamNeedsALog) {
  host_program p = shell("true");
  p.stderr_to = host_output::log;
  auto r = run_host_program(p);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, error_kind::invalid_argument);
}

TEST(HostProgram, TheEnvironmentIsTheGivenOneUnlessInherited) {
  ASSERT_EQ(::setenv("EVALBOX_HOST_PROGRAM_TEST", "evalbox's", 1), 0);
  host_program p = shell("echo \"[$EVALBOX_HOST_PROGRAM_TEST] [$GIVEN]\"");
  p.env["GIVEN"] = "given";
  auto given = run_host_program(p);
  ASSERT_TRUE(given) << given.error().message;
  EXPECT_EQ(given->output, "[] [given]\n");

  p.inherit_env = true;
  auto inherited = run_host_program(p);
  ASSERT_TRUE(inherited) << inherited.error().message;
  EXPECT_EQ(inherited->output, "[evalbox's] [given]\n");

  p.env["EVALBOX_HOST_PROGRAM_TEST"] = "over it";
  auto over = run_host_program(p);
  ASSERT_TRUE(over) << over.error().message;
  EXPECT_EQ(over->output, "[over it] [given]\n");
  ::unsetenv("EVALBOX_HOST_PROGRAM_TEST");
}

TEST(HostProgram, ItRunsInTheGivenDirectory) {
  host_program p = shell("pwd");
  p.cwd = "/";
  auto r = run_host_program(p);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->output, "/\n");
}

TEST(HostProgram, AProgramNotFoundIsAnError) {
  host_program p = shell("true");
  p.argv[0] = "evalbox-no-such-program";
  auto r = run_host_program(p);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, error_kind::not_found) << r.error().message;

  p.argv[0] = "/nonexistent/evalbox-no-such-program";
  r = run_host_program(p);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, error_kind::not_found) << r.error().message;
}

TEST(HostProgram, ItIsFoundOnItsOwnPath) {
  host_program p = shell("true");
  p.env["PATH"] = "/nonexistent";
  auto r = run_host_program(p);
  ASSERT_FALSE(r) << "sh was found outside the program's PATH";
  EXPECT_EQ(r.error().kind, error_kind::not_found);
  EXPECT_EQ(find_host_program("sh", "/nonexistent::/bin"), "/bin/sh");
  EXPECT_EQ(find_host_program("sh", ""), "");
  EXPECT_EQ(find_host_program("./x", "/bin"), "./x");
}

TEST(HostProgram, ItGetsNoOtherFdAndNoBlockedSignal) {
  // An inheritable fd of evalbox's and the mask of a thread that blocks SIGTERM (as the CLI's
  // threads do while a suite runs) must not reach the program.
  unique_fd leaked(::open("/dev/null", O_RDONLY));
  ASSERT_TRUE(leaked);
  sigset_t term, old;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, &term, &old), 0);
  auto r = run_host_program(shell("[ -e /proc/$$/fd/" + std::to_string(leaked.get()) +
                                  " ] && echo leaked; grep '^SigBlk' /proc/self/status"));
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->output, "SigBlk:\t0000000000000000\n");
}

}  // namespace
}  // namespace evalbox::sandbox
