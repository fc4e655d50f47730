// Credential leases, all four behaviours: created once (0600, the sandbox's), exclusive
// ("already in use", also between two threads) or shared by up to max_concurrent holders
// (read-only), token rotation persists, a changed source gets a fresh lease and the old one
// stays. Lease contents never appear in errors.
#include "sandbox/creds/lease.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "base/digest.h"
#include "base/fs.h"
#include "base/log.h"
#include "sandbox/prepare/preparer.h"
#include "sandbox/spec/system_paths.h"
#include "tests/support/isolation.h"
#include "tests/support/prep_env.h"

namespace evalbox::sandbox {
namespace {

using testing::prep_env;
namespace fs = std::filesystem;

constexpr const char* token_json = R"({"token":"sk-test-0123456789abcdef"})";

class Lease : public ::testing::Test {
 protected:
  void SetUp() override {
    EVALBOX_REQUIRE_FEATURE(::geteuid() == 0, "preparation with a tmpfs disk needs root");
  }
  session_request with_secret(const std::string& tag) {
    auto r = env.request(tag);
    r.secrets = {{"codex", env.creds / "auth.json", ".codex/auth.json"}};
    return r;
  }
  static fs::path lease_of(const prepared_session& s) { return s.mounts().front().source; }

  prep_env env;
};

TEST_F(Lease, CopiesTheSourceOnceWithMode0600) {
  preparer p(env.options());
  auto s = p.prepare(with_secret("a"));
  ASSERT_TRUE(s) << s.error().message;
  fs::path lease = lease_of(*s);
  EXPECT_EQ(lease, env.state / "credential-leases" / ("codex-" + sha256_hex(token_json)));
  EXPECT_EQ(*read_file(lease), token_json);
  struct stat st {};
  ASSERT_EQ(::stat(lease.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_uid, s->sandbox_uid());
  ASSERT_TRUE(s->close());
  EXPECT_TRUE(fs::exists(lease)) << "the lease outlives the run";
}

TEST_F(Lease, SecondConcurrentRunIsRefusedAsAlreadyInUse) {
  preparer p(env.options());
  auto first = p.prepare(with_secret("a"));
  ASSERT_TRUE(first) << first.error().message;
  auto before = env.state_fingerprint();
  auto second = p.prepare(with_secret("b"));
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().kind, error_kind::busy);
  EXPECT_NE(second.error().message.find("already in use"), std::string::npos);
  EXPECT_EQ(second.error().message.find("sk-test"), std::string::npos) << "no secret in errors";
  EXPECT_EQ(env.state_fingerprint(), before) << "the refused run left nothing behind";
  ASSERT_TRUE(first->close());
  auto third = p.prepare(with_secret("c"));
  EXPECT_TRUE(third) << "released on close: " << third.error().message;
}

// A child between fork and exec (a sandbox helper being started by another thread) holds a
// copy of every fd for a moment, the lease's too: a run's end unlocks the lease before it closes
// it, so the next run gets it at once, however long such a copy lives.
TEST_F(Lease, ALeaseReleasedWhileAForkedChildHoldsACopyIsFreeAtOnce) {
  preparer p(env.options());
  auto first = p.prepare(with_secret("a"));
  ASSERT_TRUE(first) << first.error().message;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // holds the lease's description (its fd, inherited) for 500 ms
    ::usleep(500000);
    ::_exit(0);
  }
  ASSERT_TRUE(first->close());
  auto second = p.prepare(with_secret("b"));
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_TRUE(second) << second.error().message;
}

// A holder that let go without unlocking (it crashed while such a copy lived) keeps the lock
// until the copy goes: a lease taken for less than 100 ms more is waited for.
TEST_F(Lease, ALeaseTakenAMomentLongerIsWaitedFor) {
  preparer p(env.options());
  auto first = p.prepare(with_secret("a"));
  ASSERT_TRUE(first) << first.error().message;
  const fs::path lease = lease_of(*first);
  ASSERT_TRUE(first->close());
  int locked[2];
  ASSERT_EQ(::pipe2(locked, O_CLOEXEC), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // its own description of the lease, locked for 30 ms
    const int fd = ::open(lease.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0 || ::flock(fd, LOCK_EX | LOCK_NB) != 0) ::_exit(1);
    (void)!::write(locked[1], "x", 1);
    ::usleep(30000);
    ::_exit(0);
  }
  ::close(locked[1]);
  char c;
  ASSERT_EQ(::read(locked[0], &c, 1), 1) << "the child could not lock the lease";
  ::close(locked[0]);
  auto second = p.prepare(with_secret("b"));
  ::waitpid(child, nullptr, 0);
  EXPECT_TRUE(second) << second.error().message;
}

TEST_F(Lease, TwoThreadsRacingForOneLeaseGetItOnce) {
  fs::path leases = env.state / "credential-leases";
  ASSERT_TRUE(make_dirs(env.state, 0700));
  secret_mount secret{"codex", env.creds / "auth.json", ".codex/auth.json"};
  for (int round = 0; round < 20; ++round) {
    std::barrier sync(2);
    std::atomic<int> won{0}, busy{0};
    std::vector<creds::credential_lease> held(2);
    auto racer = [&](int i) {
      sync.arrive_and_wait();
      auto l = creds::credential_lease::acquire(leases, secret, 60000, 60000);
      if (l) {
        ++won;
        held[static_cast<size_t>(i)] = std::move(*l);
      } else if (l.error().kind == error_kind::busy) {
        ++busy;
      }
    };
    std::thread a(racer, 0), b(racer, 1);
    a.join();
    b.join();
    EXPECT_EQ(won.load(), 1) << "round " << round;
    EXPECT_EQ(busy.load(), 1) << "round " << round;
  }
}

TEST_F(Lease, TokenRotationPersistsIntoTheNextRun) {
  preparer p(env.options());
  {
    auto s = p.prepare(with_secret("a"));
    ASSERT_TRUE(s) << s.error().message;
    // What the agent writes through its bind of the lease.
    ASSERT_TRUE(write_file(lease_of(*s), R"({"token":"sk-rotated-9876543210"})", 0600));
  }
  auto s = p.prepare(with_secret("b"));
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(*read_file(lease_of(*s)), R"({"token":"sk-rotated-9876543210"})");
  EXPECT_EQ(*read_file(env.creds / "auth.json"), token_json) << "the source is never written";
}

TEST_F(Lease, ChangedSourceGetsAFreshLeaseAndTheOldStays) {
  preparer p(env.options());
  fs::path old_lease;
  {
    auto s = p.prepare(with_secret("a"));
    ASSERT_TRUE(s) << s.error().message;
    old_lease = lease_of(*s);
    ASSERT_TRUE(write_file(old_lease, R"({"token":"sk-rotated-old-123"})", 0600));
  }
  ASSERT_TRUE(write_file(env.creds / "auth.json", R"({"token":"sk-relogin-abcdef"})", 0600));
  auto s = p.prepare(with_secret("b"));
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_NE(lease_of(*s), old_lease);
  EXPECT_EQ(*read_file(lease_of(*s)), R"({"token":"sk-relogin-abcdef"})");
  EXPECT_EQ(*read_file(old_lease), R"({"token":"sk-rotated-old-123"})");
}

TEST_F(Lease, ContentsAreRedactedFromLogs) {
  preparer p(env.options());
  auto s = p.prepare(with_secret("a"));
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(log::scrub(std::string("leaked: ") + token_json), "leaked: <redacted>");
}

// A shared credential (max_concurrent N): N holders at once, each on a slot of its own, all
// reading the one lease file; the N+1st is busy until one lets go.
TEST_F(Lease, ASharedLeaseIsHeldByUpToMaxConcurrentHolders) {
  const fs::path leases = env.state / "credential-leases";
  ASSERT_TRUE(make_dirs(env.state, 0700));
  secret_mount secret{"key", env.creds / "auth.json", ".key", 3};
  std::vector<creds::credential_lease> held;
  std::set<int> slots;
  for (int i = 0; i < 3; ++i) {
    auto l = creds::credential_lease::acquire(leases, secret, 60000, 60000);
    ASSERT_TRUE(l) << "holder " << i << ": " << l.error().message;
    EXPECT_FALSE(l->exclusive());
    slots.insert(l->slot());
    held.push_back(std::move(*l));
  }
  EXPECT_EQ(slots, (std::set<int>{0, 1, 2}));
  for (const auto& l : held) EXPECT_EQ(l.path(), held.front().path()) << "one lease file";
  auto fourth = creds::credential_lease::acquire(leases, secret, 60000, 60000);
  ASSERT_FALSE(fourth);
  EXPECT_EQ(fourth.error().kind, error_kind::busy);
  EXPECT_NE(fourth.error().message.find("already in use by 3 runs"), std::string::npos)
      << fourth.error().message;
  const int freed = held[1].slot();
  held[1].release();
  auto again = creds::credential_lease::acquire(leases, secret, 60000, 60000);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->slot(), freed);
}

// Slot 0 is the lease file itself: an exclusive holder and shared ones count against each
// other (two suites naming one source differently never exceed either's promise).
TEST_F(Lease, AnExclusiveHolderTakesTheFirstSlotOfASharedLease) {
  const fs::path leases = env.state / "credential-leases";
  ASSERT_TRUE(make_dirs(env.state, 0700));
  secret_mount exclusive{"key", env.creds / "auth.json", ".key", 1};
  secret_mount shared = exclusive;
  shared.max_concurrent = 2;
  auto a = creds::credential_lease::acquire(leases, exclusive, 60000, 60000);
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_TRUE(a->exclusive());
  auto b = creds::credential_lease::acquire(leases, shared, 60000, 60000);
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_EQ(b->slot(), 1);
  auto c = creds::credential_lease::acquire(leases, shared, 60000, 60000);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().kind, error_kind::busy);
}

// Each run of a shared credential gets a read-only view of the same lease: none can change
// what the others read. An exclusive lease stays writable (a login's tokens rotate).
TEST_F(Lease, ASharedLeaseIsMountedReadOnlyForEveryHolder) {
  preparer p(env.options());
  auto shared = [&](const std::string& tag) {
    auto r = env.request(tag);
    r.secrets = {{"key", env.creds / "auth.json", ".config/key", 2}};
    return r;
  };
  auto a = p.prepare(shared("a"));
  ASSERT_TRUE(a) << a.error().message;
  auto b = p.prepare(shared("b"));
  ASSERT_TRUE(b) << "two holders at once: " << b.error().message;
  for (const auto* s : {&*a, &*b}) {
    const auto& m = s->mounts().front();
    EXPECT_FALSE(m.writable);
    EXPECT_EQ(m.target, fs::path(sandbox_home) / ".config/key");
  }
  EXPECT_EQ(lease_of(*a), lease_of(*b));
  auto before = env.state_fingerprint();
  auto c = p.prepare(shared("c"));
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().kind, error_kind::busy);
  EXPECT_EQ(env.state_fingerprint(), before) << "the refused run left nothing behind";
  ASSERT_TRUE(a->close());
  auto exclusive = p.prepare(with_secret("d"));
  ASSERT_TRUE(exclusive) << exclusive.error().message;
  EXPECT_TRUE(exclusive->mounts().front().writable);
}

TEST_F(Lease, AMaxConcurrentOutsideItsRangeIsRefusedBeforeAnythingIsMade) {
  preparer p(env.options());
  for (int bad : {0, -1, 257}) {
    auto r = with_secret("a");
    r.secrets.front().max_concurrent = bad;
    auto before = env.state_fingerprint();
    auto s = p.prepare(r);
    ASSERT_FALSE(s) << bad;
    EXPECT_EQ(s.error().kind, error_kind::invalid_argument) << s.error().message;
    EXPECT_NE(s.error().message.find("max_concurrent"), std::string::npos) << s.error().message;
    EXPECT_EQ(env.state_fingerprint(), before);
  }
}

}  // namespace
}  // namespace evalbox::sandbox
