// sandbox/landlock: the ruleset the helper builds for a program, negotiated to the kernel's
// ABI, and what it does once applied — in a child process, since a Landlock domain cannot be
// left: the tree the rules give stays writable, everything else is read-only, and no rule
// grants more than its ABI handles.
#include "sandbox/landlock/landlock.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>

#include "base/fs.h"
#include "sandbox/sys/syscalls.h"  // the Landlock constants older headers lack
#include "tests/support/isolation.h"

namespace evalbox::sandbox::landlock {
namespace {

TEST(LandlockRuleset, AbiZeroAppliesNothing) {
  auto rs = make_ruleset(0, {{"/", access::read_only}});
  EXPECT_EQ(rs.abi, 0);
  EXPECT_TRUE(rs.paths.empty());
  EXPECT_EQ(apply(rs), 0) << "an ABI of 0 is a ruleset not applied, not an error";
}

TEST(LandlockRuleset, HandlesOnlyWhatItsAbiKnows) {
  auto v1 = make_ruleset(1, {{"/w", access::read_write}});
  EXPECT_EQ(v1.handled_fs & LANDLOCK_ACCESS_FS_REFER, 0u) << "REFER came with ABI 2";
  EXPECT_EQ(v1.handled_fs & LANDLOCK_ACCESS_FS_TRUNCATE, 0u) << "TRUNCATE came with ABI 3";
  EXPECT_EQ(v1.scoped, 0u);
  auto v3 = make_ruleset(3, {{"/w", access::read_write}});
  EXPECT_NE(v3.handled_fs & LANDLOCK_ACCESS_FS_REFER, 0u);
  EXPECT_NE(v3.handled_fs & LANDLOCK_ACCESS_FS_TRUNCATE, 0u);
  EXPECT_EQ(v3.handled_fs & LANDLOCK_ACCESS_FS_IOCTL_DEV, 0u) << "IOCTL_DEV came with ABI 5";
  auto v6 = make_ruleset(6, {});
  EXPECT_NE(v6.scoped, 0u) << "ABI 6 scopes abstract sockets and signals to the run";
  EXPECT_EQ(make_ruleset(99, {}).abi, max_abi) << "a newer kernel is asked for what we know";
}

TEST(LandlockRuleset, EachRuleGrantsASubsetOfWhatIsHandled) {
  for (int abi = 1; abi <= max_abi; ++abi) {
    auto rs = make_ruleset(abi, {{"/", access::read_only},
                                 {"/workspace", access::read_write},
                                 {"/dev/null", access::device}});
    ASSERT_EQ(rs.paths.size(), 3u);
    for (auto r : rs.rights) EXPECT_EQ(r & ~rs.handled_fs, 0u) << "abi " << abi;
    EXPECT_EQ(rs.rights[0] & LANDLOCK_ACCESS_FS_WRITE_FILE, 0u) << "read-only writes nothing";
    EXPECT_EQ(rs.rights[1], rs.handled_fs) << "a writable tree gets every handled right";
    EXPECT_NE(rs.rights[2] & LANDLOCK_ACCESS_FS_WRITE_FILE, 0u) << "a device is written";
    EXPECT_EQ(rs.rights[2] & LANDLOCK_ACCESS_FS_MAKE_REG, 0u) << "but nothing is made there";
  }
}

// In a child: writes `probe` after applying `rs`; the exit code says what happened.
int write_after(const ruleset& rs, const std::string& probe) {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ::_exit(10);
    if (apply(rs) != 0) ::_exit(11);
    int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ::_exit(fd >= 0 ? 0 : (errno == EACCES ? 13 : 12));
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(LandlockApply, TheWritableTreeStaysWritableAndNothingElseIs) {
  const int abi = kernel_abi();
  EVALBOX_REQUIRE_FEATURE(abi > 0, "Landlock (the kernel has no ABI or it is disabled)");
  temp_dir writable("evalbox-landlock-rw"), other("evalbox-landlock-ro");
  auto rs =
      make_ruleset(abi, {{"/", access::read_only}, {writable.path().string(), access::read_write}});
  EXPECT_EQ(write_after(rs, (writable.path() / "ok").string()), 0);
  EXPECT_EQ(write_after(rs, (other.path() / "denied").string()), 13)
      << "a file outside the writable tree was created";
  EXPECT_FALSE(std::filesystem::exists(other.path() / "denied"));
}

TEST(LandlockApply, AMissingRulePathIsSkippedNotFatal) {
  const int abi = kernel_abi();
  EVALBOX_REQUIRE_FEATURE(abi > 0, "Landlock (the kernel has no ABI or it is disabled)");
  temp_dir writable("evalbox-landlock-rw");
  auto rs = make_ruleset(abi, {{"/", access::read_only},
                               {"/no/such/path/evalbox", access::read_write},
                               {writable.path().string(), access::read_write}});
  EXPECT_EQ(write_after(rs, (writable.path() / "ok").string()), 0);
}

}  // namespace
}  // namespace evalbox::sandbox::landlock
