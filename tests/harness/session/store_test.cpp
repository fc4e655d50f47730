// Sessions on disk (harness/session/store.h), in temporary state roots and without root: a
// claim is a private directory and an exclusive lock that a second claim cannot take, listing
// tells a live session by its lock, a session is found by its id or a unique prefix, and
// reaping removes only what no server holds and signals only a process that is the session's
// server (never a process that merely has the pid session.json names).
#include "harness/session/store.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>

#include "base/fs.h"
#include "base/json.h"
#include "sandbox/sys/process.h"
#include "sandbox/sys/syscalls.h"

extern char** environ;

namespace evalbox::harness {
namespace {

namespace fs = std::filesystem;

mode_t mode_of(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
  return st.st_mode & 07777;
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A `sleep 600` child, owned (killed and reaped on every way out). With `hold`, the child has
// that file open as its fd 3, as a session's server has its lock file open.
sys::owned_process sleeper(const fs::path& hold = {}) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (!hold.empty()) posix_spawn_file_actions_addopen(&fa, 3, hold.c_str(), O_RDONLY, 0);
  char prog[] = "sleep", seconds[] = "600";
  char* argv[] = {prog, seconds, nullptr};
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, "sleep", &fa, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  EXPECT_EQ(rc, 0) << "posix_spawnp(sleep): " << errno_name(rc);
  if (rc != 0) return {};
  return sys::owned_process(pid, unique_fd(sys::pidfd_open(pid, 0)));
}

// Whether `child` is still running `wait` from now (it exits: false, as soon as it does).
bool still_running(const sys::owned_process& child, std::chrono::milliseconds wait) {
  pollfd p{child.pidfd(), POLLIN, 0};
  return ::poll(&p, 1, static_cast<int>(wait.count())) == 0;
}

// A state root whose path has no symbolic link in it (TMPDIR may have one).
struct state_dir {
  temp_dir tmp{"session-store"};
  fs::path root = fs::canonical(tmp.path());
};

// A session directory with session.json, its lock held by the returned claim.
claimed_dir live_session(const fs::path& root, const std::string& id, const json& info) {
  auto c = claim_dir(sessions_root(root), id);
  EXPECT_TRUE(c) << c.error().message;
  if (!c) return {};
  auto w = write_session_json(c->dir, info);
  EXPECT_TRUE(w) << w.error().message;
  return std::move(*c);
}

// ---- claim_dir ----------------------------------------------------------------------------------

TEST(SessionClaim, MakesAPrivateDirectoryWithItsParentsAndALock) {
  state_dir s;
  const fs::path root = s.root / "deep" / "sessions";
  auto c = claim_dir(root, "ses-1");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->dir, root / "ses-1");
  EXPECT_TRUE(c->lock);
  EXPECT_EQ(mode_of(root), 0700u);
  EXPECT_EQ(mode_of(c->dir), 0700u);
  EXPECT_EQ(mode_of(c->dir / "lock"), 0600u);
}

TEST(SessionClaim, ASecondClaimIsBusyWhileTheFirstHoldsIt) {
  state_dir s;
  const fs::path root = sessions_root(s.root);
  auto first = claim_dir(root, "ses-1");
  ASSERT_TRUE(first) << first.error().message;
  // The same process, another open of the lock file: flock(2) locks belong to the open file
  // description, so this conflicts as another process's claim would.
  auto second = claim_dir(root, "ses-1");
  ASSERT_FALSE(second) << "two claims held one directory";
  EXPECT_EQ(second.error().kind, error_kind::busy);
  first->lock.unlock();
  auto third = claim_dir(root, "ses-1");
  EXPECT_TRUE(third) << third.error().message;
}

TEST(SessionClaim, ClaimsOfOtherNamesDoNotConflict) {
  state_dir s;
  auto a = claim_dir(sessions_root(s.root), "ses-a");
  auto b = claim_dir(sessions_root(s.root), "ses-b");
  EXPECT_TRUE(a) << a.error().message;
  EXPECT_TRUE(b) << b.error().message;
}

TEST(SessionClaim, ALeftoverDirectoryWhoseLockIsFreeIsClaimed) {
  state_dir s;
  const fs::path dir = sessions_root(s.root) / "ses-1";
  fs::create_directories(dir);
  ASSERT_TRUE(write_file(dir / "lock", "", 0600));
  auto c = claim_dir(sessions_root(s.root), "ses-1");
  EXPECT_TRUE(c) << c.error().message;
}

TEST(SessionClaim, ALockThatIsASymlinkIsNotFollowed) {
  state_dir s;
  const fs::path dir = sessions_root(s.root) / "ses-1";
  fs::create_directories(dir);
  const fs::path elsewhere = s.root / "elsewhere";
  fs::create_symlink(elsewhere, dir / "lock");
  auto c = claim_dir(sessions_root(s.root), "ses-1");
  EXPECT_FALSE(c) << "a claim followed a planted lock link";
  EXPECT_FALSE(fs::exists(elsewhere)) << "the link's target was created";
}

// ---- write_session_json, list_sessions ----------------------------------------------------------

TEST(SessionJson, IsWrittenPrivateAndReplacedWhole) {
  state_dir s;
  auto c = claim_dir(sessions_root(s.root), "ses-1");
  ASSERT_TRUE(c) << c.error().message;
  ASSERT_TRUE(write_session_json(c->dir, {{"id", "ses-1"}, {"notes", std::string(4096, 'x')}}));
  ASSERT_TRUE(write_session_json(c->dir, {{"id", "ses-1"}}));
  EXPECT_EQ(mode_of(c->dir / "session.json"), 0600u);
  auto back = read_json_file(c->dir / "session.json");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, json({{"id", "ses-1"}}));
}

TEST(SessionList, NothingWhenThereIsNoSessionsDirectory) {
  state_dir s;
  EXPECT_TRUE(list_sessions(s.root).empty());
  EXPECT_TRUE(list_sessions(s.root / "missing").empty());
}

TEST(SessionList, IsSortedByIdWithEachSessionJson) {
  state_dir s;
  auto b = live_session(s.root, "ses-b", {{"id", "ses-b"}});
  auto a = live_session(s.root, "ses-a", {{"id", "ses-a"}});
  const auto all = list_sessions(s.root);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].id, "ses-a");
  EXPECT_EQ(all[0].dir, sessions_root(s.root) / "ses-a");
  EXPECT_EQ(all[0].info, json({{"id", "ses-a"}}));
  EXPECT_EQ(all[1].id, "ses-b");
}

TEST(SessionList, LiveWhileAClaimHoldsTheLockAndNotAfter) {
  state_dir s;
  auto c = live_session(s.root, "ses-1", {{"id", "ses-1"}});
  auto during = list_sessions(s.root);
  ASSERT_EQ(during.size(), 1u);
  EXPECT_TRUE(during[0].live);
  c.lock.unlock();
  auto after = list_sessions(s.root);
  ASSERT_EQ(after.size(), 1u);
  EXPECT_FALSE(after[0].live);
  // Listing took no lock of its own: the session can be claimed again.
  EXPECT_TRUE(claim_dir(sessions_root(s.root), "ses-1"));
}

TEST(SessionList, ADirectoryWithoutLockOrWithBrokenJsonIsListedNotLive) {
  state_dir s;
  fs::create_directories(sessions_root(s.root) / "ses-bare");
  fs::create_directories(sessions_root(s.root) / "ses-broken");
  ASSERT_TRUE(write_file(sessions_root(s.root) / "ses-broken" / "session.json", "{\"id\":", 0600));
  const auto all = list_sessions(s.root);
  ASSERT_EQ(all.size(), 2u);
  for (const auto& l : all) {
    EXPECT_FALSE(l.live) << l.id;
    EXPECT_TRUE(l.info.is_null()) << l.id;
  }
}

TEST(SessionList, FilesAndLinksInTheSessionsDirectoryAreNotSessions) {
  state_dir s;
  auto c = live_session(s.root, "ses-1", {{"id", "ses-1"}});
  ASSERT_TRUE(write_file(sessions_root(s.root) / "stray", "x", 0600));
  fs::create_directories(s.root / "outside");
  fs::create_directory_symlink(s.root / "outside", sessions_root(s.root) / "ses-link");
  const auto all = list_sessions(s.root);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].id, "ses-1");
}

// ---- find_session -------------------------------------------------------------------------------

class SessionFind : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* id : {"ses-3f9a1c2b7d4e", "ses-3f9b00000000", "ses-77", "ses-7"})
      fs::create_directories(sessions_root(s_.root) / id);
  }
  state_dir s_;
};

TEST_F(SessionFind, ByTheWholeId) {
  auto f = find_session(s_.root, "ses-3f9a1c2b7d4e");
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_EQ(f->id, "ses-3f9a1c2b7d4e");
  EXPECT_EQ(f->dir, sessions_root(s_.root) / "ses-3f9a1c2b7d4e");
}

TEST_F(SessionFind, ByAUniquePrefix) {
  auto f = find_session(s_.root, "ses-3f9a");
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_EQ(f->id, "ses-3f9a1c2b7d4e");
}

TEST_F(SessionFind, AnIdThatIsAlsoAnothersPrefixIsItself) {
  auto f = find_session(s_.root, "ses-7");
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_EQ(f->id, "ses-7");
}

TEST_F(SessionFind, AnAmbiguousPrefixIsInvalid) {
  auto f = find_session(s_.root, "ses-3f9");
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().kind, error_kind::invalid_argument);
  EXPECT_NE(f.error().message.find("2 sessions"), std::string::npos) << f.error().message;
}

TEST_F(SessionFind, AMissingIdIsNotFound) {
  for (const char* id : {"ses-0", "ses-3f9a1c2b7d4e0", "x"}) {
    auto f = find_session(s_.root, id);
    ASSERT_FALSE(f) << id;
    EXPECT_EQ(f.error().kind, error_kind::not_found) << id;
  }
}

TEST_F(SessionFind, AnIdThatIsAPathIsRefused) {
  fs::create_directories(s_.root / "other");
  for (const char* id : {"", ".", "..", "../other", "/", "ses-7/", "a/b", "/etc"}) {
    auto f = find_session(s_.root, id);
    ASSERT_FALSE(f) << "'" << id << "' was taken as a session";
    EXPECT_EQ(f.error().kind, error_kind::invalid_argument) << id;
  }
}

TEST(SessionFindEmpty, NoSessionsIsNotFound) {
  state_dir s;
  auto f = find_session(s.root, "ses-1");
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().kind, error_kind::not_found);
}

// ---- reap_sessions ------------------------------------------------------------------------------

TEST(SessionReap, RemovesSessionsWhoseLockIsFreeAndKeepsLiveOnes) {
  state_dir s;
  auto live = live_session(s.root, "ses-live", {{"id", "ses-live"}});
  {
    auto dead = live_session(s.root, "ses-dead", {{"id", "ses-dead"}});
  }  // its server went away: the lock is free
  fs::create_directories(sessions_root(s.root) / "ses-nolock" / "sub");
  fs::create_directories(sessions_root(s.root) / "ses-new");
  // Left alone for a minute: `session start` makes the directory, then its server locks it.
  for (const char* old : {"ses-dead", "ses-nolock"}) {
    const timespec times[2] = {{::time(nullptr) - 120, 0}, {::time(nullptr) - 120, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, (sessions_root(s.root) / old).c_str(), times, 0), 0);
  }
  const reap_report r = reap_sessions(s.root);
  EXPECT_EQ(r.removed, 2);
  EXPECT_TRUE(fs::exists(sessions_root(s.root) / "ses-new"));
  EXPECT_EQ(r.stopped, 0);
  EXPECT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_TRUE(fs::exists(sessions_root(s.root) / "ses-live" / "session.json"));
  EXPECT_FALSE(fs::exists(sessions_root(s.root) / "ses-dead"));
  EXPECT_FALSE(fs::exists(sessions_root(s.root) / "ses-nolock"));
}

TEST(SessionReap, RemovesLayerStoresWhoseLockIsFreeAndKeepsHeldOnes) {
  state_dir s;
  auto held = claim_dir(session_layers_root(s.root), "fam-held");
  ASSERT_TRUE(held) << held.error().message;
  {
    auto freed = claim_dir(session_layers_root(s.root), "fam-free");
    ASSERT_TRUE(freed) << freed.error().message;
    ASSERT_TRUE(write_file(freed->dir / "layer", "x", 0600));
  }
  const reap_report r = reap_sessions(s.root);
  EXPECT_EQ(r.removed, 1);
  EXPECT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_TRUE(fs::exists(session_layers_root(s.root) / "fam-held" / "lock"));
  EXPECT_FALSE(fs::exists(session_layers_root(s.root) / "fam-free"));
}

TEST(SessionReap, NeverFollowsALinkOutOfTheStore) {
  state_dir s;
  const fs::path outside = s.root / "outside";
  fs::create_directories(outside);
  ASSERT_TRUE(write_file(outside / "keep", "x", 0600));
  fs::create_directories(sessions_root(s.root));
  fs::create_directories(session_layers_root(s.root));
  fs::create_directory_symlink(outside, sessions_root(s.root) / "ses-link");
  fs::create_directory_symlink(outside, session_layers_root(s.root) / "fam-link");
  (void)reap_sessions(s.root);
  EXPECT_TRUE(fs::exists(outside / "keep"));
}

TEST(SessionReap, NeverSignalsAProcessThatIsNotTheSessionsServer) {
  state_dir s;
  auto other = sleeper();
  ASSERT_TRUE(other.owned());
  // Live and long expired, but the pid it names is a process that does not hold its lock: a
  // pid reused by an unrelated process.
  auto c = live_session(s.root, "ses-1",
                        {{"expires_unix", unix_now() - 3600}, {"server_pid", other.pid()}});
  const reap_report r = reap_sessions(s.root, std::chrono::seconds(0));
  EXPECT_EQ(r.stopped, 0);
  EXPECT_EQ(r.removed, 0);
  EXPECT_TRUE(still_running(other, std::chrono::milliseconds(300))) << "sleep was signalled";
  EXPECT_TRUE(fs::exists(c.dir));
}

TEST(SessionReap, NeverSignalsPidsOneZeroOrNegative) {
  state_dir s;
  auto c1 = live_session(s.root, "ses-1", {{"expires_unix", 1}, {"server_pid", 1}});
  auto c2 = live_session(s.root, "ses-2", {{"expires_unix", 1}, {"server_pid", 0}});
  auto c3 = live_session(s.root, "ses-3", {{"expires_unix", 1}, {"server_pid", -1}});
  const reap_report r = reap_sessions(s.root, std::chrono::seconds(0));
  EXPECT_EQ(r.stopped, 0);
  EXPECT_EQ(r.removed, 0);
}

TEST(SessionReap, SignalsTheServerOfASessionPastItsTtlAndGrace) {
  state_dir s;
  auto c = live_session(s.root, "ses-1", {{"id", "ses-1"}});
  auto server = sleeper(c.dir / "lock");
  ASSERT_TRUE(server.owned());
  ASSERT_TRUE(write_session_json(
      c.dir, {{"expires_unix", unix_now() - 120}, {"server_pid", server.pid()}}));
  const reap_report r = reap_sessions(s.root, std::chrono::seconds(30));
  EXPECT_EQ(r.stopped, 1);
  EXPECT_EQ(r.removed, 0);
  ASSERT_FALSE(still_running(server, std::chrono::seconds(5))) << "the server was not signalled";
  int status = 0;
  ASSERT_EQ(server.reap(&status, nullptr), server.pid());
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
}

TEST(SessionReap, GivesAServerItsGraceAndASessionWithoutExpiryNone) {
  state_dir s;
  auto in_grace = live_session(s.root, "ses-grace", {});
  auto server1 = sleeper(in_grace.dir / "lock");
  auto no_expiry = live_session(s.root, "ses-forever", {});
  auto server2 = sleeper(no_expiry.dir / "lock");
  ASSERT_TRUE(server1.owned() && server2.owned());
  ASSERT_TRUE(write_session_json(
      in_grace.dir, {{"expires_unix", unix_now() - 10}, {"server_pid", server1.pid()}}));
  ASSERT_TRUE(write_session_json(no_expiry.dir, {{"server_pid", server2.pid()}}));
  const reap_report r = reap_sessions(s.root, std::chrono::seconds(600));
  EXPECT_EQ(r.stopped, 0);
  EXPECT_TRUE(still_running(server1, std::chrono::milliseconds(200)));
  EXPECT_TRUE(still_running(server2, std::chrono::milliseconds(0)));
}

TEST(SessionReap, ASessionExpiringAtTheEndOfTimeIsNotPastIt) {
  // expires_unix is read from a file: the largest one must not wrap around when the grace is
  // added to it and make a live session look expired.
  state_dir s;
  auto c = live_session(s.root, "ses-1", {});
  auto server = sleeper(c.dir / "lock");
  ASSERT_TRUE(server.owned());
  ASSERT_TRUE(write_session_json(c.dir, {{"expires_unix", std::numeric_limits<int64_t>::max()},
                                         {"server_pid", server.pid()}}));
  const reap_report r = reap_sessions(s.root, std::chrono::seconds(30));
  EXPECT_EQ(r.stopped, 0);
  EXPECT_TRUE(still_running(server, std::chrono::milliseconds(200)));
}

TEST(SessionReap, SignalsTheServerWhenTheStateRootIsReachedThroughALink) {
  // $HOME, $XDG_STATE_HOME or --state may name the state root through a symbolic link (or
  // relatively); the server's lock is the same file whatever path reaches it.
  state_dir s;
  fs::create_directories(s.root / "real");
  const fs::path via = s.root / "via";
  fs::create_directory_symlink(s.root / "real", via);
  auto c = live_session(via, "ses-1", {});
  auto server = sleeper(c.dir / "lock");
  ASSERT_TRUE(server.owned());
  ASSERT_TRUE(write_session_json(
      c.dir, {{"expires_unix", unix_now() - 3600}, {"server_pid", server.pid()}}));
  const reap_report r = reap_sessions(via, std::chrono::seconds(0));
  EXPECT_EQ(r.stopped, 1);
  EXPECT_FALSE(still_running(server, std::chrono::seconds(3))) << "the server was not signalled";
}

}  // namespace
}  // namespace evalbox::harness
