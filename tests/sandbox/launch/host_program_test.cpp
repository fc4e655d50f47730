// run_host_program: what a host program (git, a command judge) gets, and what evalbox keeps.
#include "sandbox/launch/host_program.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

namespace evalbox::sandbox {
namespace {

TEST(HostProgram, ItsOutputPipeIsCloseOnExecInEvalbox) {
  // The program looks at its parent (this process) and prints the flags of every fd there
  // that is the pipe its own stdout writes to. Without close-on-exec, any child another
  // thread starts meanwhile (a warm sandbox helper waits for minutes) would hold the pipe
  // and the read of the output would not end when the program does.
  host_program p;
  p.argv = {"/bin/sh", "-c",
            "me=$(readlink /proc/$$/fd/1); for f in /proc/$PPID/fd/*; do "
            "[ \"$(readlink \"$f\")\" = \"$me\" ] && grep '^flags:' /proc/$PPID/fdinfo/${f##*/}; "
            "done; true"};
  p.env = {{"PATH", "/usr/bin:/bin"}};
  p.stdout_only = true;
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
  host_program p;
  p.argv = {"sh", "-c", "read line; echo \"got $line\"; echo oops >&2; exit 3"};
  p.env = {{"PATH", "/usr/bin:/bin"}};
  p.input = "hello\n";
  auto r = run_host_program(p);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_FALSE(r->ok());
  EXPECT_EQ(r->output, "got hello\noops\n");
}

}  // namespace
}  // namespace evalbox::sandbox
