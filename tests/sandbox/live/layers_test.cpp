// Freezing an overlay upper into a layer (sandbox/live/layers.h): the copy keeps contents,
// modes (without setuid/setgid), owners, times, links (never followed), whiteouts and opaque
// marks, leaves special files out, and really works as an overlay lower; a bad request or a
// failure midway leaves no partial layer behind.
#include "sandbox/live/layers.h"

#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/fs.h"
#include "base/unique_fd.h"
#include "tests/support/isolation.h"

namespace evalbox::sandbox {
namespace {

namespace fs = std::filesystem;

constexpr uid_t other_id = 60000;  // an owner that is neither root nor the test

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

// Runs `fn` in a forked child; returns what it returned ("ok" or what went wrong).
std::string in_child(const std::function<std::string()>& fn) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return errno_text("pipe");
  const pid_t pid = ::fork();
  if (pid < 0) return errno_text("fork");
  if (pid == 0) {
    ::close(p[0]);
    const std::string out = fn();
    (void)!::write(p[1], out.data(), out.size());
    ::_exit(0);
  }
  ::close(p[1]);
  std::string out;
  char buf[512];
  ssize_t n;
  while ((n = ::read(p[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(p[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  return out.empty() ? "the child died" : out;
}

struct stat lstat_of(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p << ": " << std::strerror(errno);
  return st;
}

bool present(const fs::path& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0;
}

std::optional<std::string> xattr_of(const fs::path& p, const char* name) {
  char buf[256];
  const ssize_t n = ::lgetxattr(p.c_str(), name, buf, sizeof buf);
  if (n < 0) return std::nullopt;
  return std::string(buf, static_cast<size_t>(n));
}

std::string content_of(const fs::path& p) {
  auto r = read_file(p);
  EXPECT_TRUE(r) << p;
  return r ? *r : std::string();
}

// Sets an entry's mode exactly (the umask applied at creation) and its times, never following.
void set_mode(const fs::path& p, mode_t mode) { ASSERT_EQ(::chmod(p.c_str(), mode), 0) << p; }
void set_times(const fs::path& p, time_t sec, long nsec) {
  const struct timespec t[2] = {{sec - 100, nsec}, {sec, nsec}};
  ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), t, AT_SYMLINK_NOFOLLOW), 0) << p;
}

// An upper as overlayfs leaves it, with every kind of entry. `entries` lists what the layer
// must hold (relative paths), parents before children.
struct upper_tree {
  fs::path root;
  std::vector<std::string> entries;
  uint64_t bytes = 0;

  void file(const std::string& rel, const std::string& data, mode_t mode) {
    ASSERT_TRUE(write_file(root / rel, data, mode));
    set_mode(root / rel, mode);
    entries.push_back(rel);
    bytes += data.size();
  }
  void dir(const std::string& rel) {
    ASSERT_EQ(::mkdir((root / rel).c_str(), 0755), 0) << rel;
    entries.push_back(rel);
  }
  void link(const std::string& rel, const char* target) {
    ASSERT_EQ(::symlink(target, (root / rel).c_str()), 0) << rel;
    entries.push_back(rel);
  }
};

std::string binary_bytes() {
  std::string s;
  for (int round = 0; round < 4; ++round)
    for (int b = 0; b < 256; ++b) s.push_back(static_cast<char>(b));
  return s;
}

std::string big_bytes() {
  std::string s(size_t{3} << 20, '\0');
  uint32_t x = 2463534242u;
  for (auto& c : s) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    c = static_cast<char>(x);
  }
  return s;
}

// Builds the upper (as root: it chowns and sets trusted.* xattrs).
void build_upper(upper_tree& t) {
  ASSERT_EQ(::mkdir(t.root.c_str(), 0700), 0);
  t.file("plain.txt", "hello\n", 0640);
  ASSERT_EQ(::chown((t.root / "plain.txt").c_str(), other_id, other_id), 0);
  ASSERT_EQ(::setxattr((t.root / "plain.txt").c_str(), "user.note", "kept note", 9, 0), 0);
  t.file("binary", binary_bytes(), 0604);
  t.file("suid", "#!/bin/sh\n", 04755);
  t.file("sgid", "#!/bin/sh\nexit 0\n", 02711);
  t.file("big", big_bytes(), 0644);
  t.dir("dir");
  t.dir("dir/nested");
  set_mode(t.root / "dir/nested", 0700);
  t.file("dir/nested/deep.txt", "deep", 0600);
  t.dir("ro");
  t.file("ro/inside.txt", "inside", 0444);
  ASSERT_EQ(::chown((t.root / "ro").c_str(), other_id, other_id), 0);
  set_mode(t.root / "ro", 0555);
  t.link("rel", "plain.txt");
  ASSERT_EQ(::lchown((t.root / "rel").c_str(), other_id, other_id), 0);
  t.link("abs", "/etc/passwd");
  t.link("dangling", "nowhere/at/all");
  t.link("dirlink", "dir");
  // rm of a lower file leaves a 0/0 character device, mode 0.
  ASSERT_EQ(::mknod((t.root / "gone").c_str(), S_IFCHR, makedev(0, 0)), 0);
  t.entries.push_back("gone");
  // rmdir + mkdir over a lower directory: opaque, marked by whichever overlay made it.
  t.dir("opaque_t");
  ASSERT_EQ(::setxattr((t.root / "opaque_t").c_str(), "trusted.overlay.opaque", "y", 1, 0), 0);
  t.file("opaque_t/kept.txt", "new t", 0644);
  t.dir("opaque_u");
  ASSERT_EQ(::setxattr((t.root / "opaque_u").c_str(), "user.overlay.opaque", "y", 1, 0), 0);
  t.file("opaque_u/kept.txt", "new u", 0644);
  // Left out of a layer.
  ASSERT_EQ(::mkfifo((t.root / "fifo").c_str(), 0644), 0);
  const unique_fd sock(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(sock);
  struct sockaddr_un addr {};
  addr.sun_family = AF_UNIX;
  const std::string sock_path = (t.root / "sock").string();
  ASSERT_LT(sock_path.size(), sizeof addr.sun_path);
  std::memcpy(addr.sun_path, sock_path.c_str(), sock_path.size() + 1);
  ASSERT_EQ(::bind(sock.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
  // Distinct times last, children before parents (a new entry changes its parent's mtime).
  for (size_t i = t.entries.size(); i-- > 0;)
    set_times(t.root / t.entries[i], 1'500'000'000 + static_cast<time_t>(i), 1000 + long(i));
  set_mode(t.root, 0751);
  set_times(t.root, 1'400'000'000, 42);
}

// The base layer below the frozen one: each name the frozen layer must hide or merge.
void build_base(const fs::path& base) {
  ASSERT_TRUE(make_dirs(base / "dir", 0755));
  ASSERT_TRUE(make_dirs(base / "opaque_t", 0755));
  ASSERT_TRUE(make_dirs(base / "opaque_u", 0755));
  ASSERT_TRUE(write_file(base / "gone", "from base"));
  ASSERT_TRUE(write_file(base / "dir/base_only.txt", "merged"));
  ASSERT_TRUE(write_file(base / "opaque_t/old.txt", "hidden"));
  ASSERT_TRUE(write_file(base / "opaque_u/old.txt", "hidden"));
  ASSERT_TRUE(write_file(base / "base_file.txt", "base"));
}

class FreezeLayer : public ::testing::Test {
 protected:
  temp_dir tmp_{"evalbox-layers"};
  fs::path upper_ = tmp_.path() / "upper";
  fs::path frozen_ = tmp_.path() / "frozen";
};

TEST_F(FreezeLayer, KeepsContentsModesOwnersTimesLinksWhiteoutsAndOpaqueMarks) {
  EVALBOX_REQUIRE_FEATURE(::geteuid() == 0, "root (owners and trusted.* xattrs)");
  upper_tree t{upper_};
  build_upper(t);
  if (HasFatalFailure()) return;

  auto r = freeze_layer(upper_, frozen_);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->entries, t.entries.size());
  EXPECT_EQ(r->bytes, t.bytes);
  auto skipped = r->skipped;
  std::sort(skipped.begin(), skipped.end());
  EXPECT_EQ(skipped, (std::vector<std::string>{"fifo", "sock"}));
  EXPECT_FALSE(present(frozen_ / "fifo"));
  EXPECT_FALSE(present(frozen_ / "sock"));

  // Every entry: same type, owner, times; same mode but setuid/setgid on files; same size.
  std::vector<std::string> all = t.entries;
  all.push_back("");
  for (const auto& rel : all) {
    SCOPED_TRACE(rel.empty() ? "(root)" : rel);
    const auto a = lstat_of(upper_ / rel), b = lstat_of(frozen_ / rel);
    EXPECT_EQ(a.st_mode & S_IFMT, b.st_mode & S_IFMT);
    const mode_t dropped = S_ISREG(a.st_mode) ? (S_ISUID | S_ISGID) : 0;
    if (!S_ISLNK(a.st_mode)) {
      EXPECT_EQ(a.st_mode & 07777 & ~dropped, b.st_mode & 07777);
    }
    EXPECT_EQ(a.st_uid, b.st_uid);
    EXPECT_EQ(a.st_gid, b.st_gid);
    EXPECT_EQ(a.st_mtim.tv_sec, b.st_mtim.tv_sec);
    EXPECT_EQ(a.st_mtim.tv_nsec, b.st_mtim.tv_nsec);
    if (!S_ISDIR(a.st_mode)) {
      EXPECT_EQ(a.st_size, b.st_size);
    }
    if (S_ISREG(a.st_mode)) {
      EXPECT_TRUE(content_of(upper_ / rel) == content_of(frozen_ / rel));
    }
  }
  EXPECT_EQ(content_of(frozen_ / "plain.txt"), "hello\n");
  EXPECT_EQ(content_of(frozen_ / "binary"), binary_bytes());
  EXPECT_TRUE(content_of(frozen_ / "big") == big_bytes());
  EXPECT_EQ(lstat_of(frozen_ / "suid").st_mode & 07777, 0755u);
  EXPECT_EQ(lstat_of(frozen_ / "sgid").st_mode & 07777, 0711u);
  EXPECT_EQ(lstat_of(frozen_ / "ro").st_mode & 07777, 0555u);
  EXPECT_EQ(lstat_of(frozen_ / "ro").st_uid, other_id);
  EXPECT_EQ(lstat_of(frozen_ / "plain.txt").st_uid, other_id);
  EXPECT_EQ(lstat_of(frozen_ / "rel").st_uid, other_id);
  EXPECT_EQ(lstat_of(frozen_).st_mode & 07777, 0751u);

  // Links are copied as links, whatever they point at.
  for (const auto& [rel, target] :
       std::vector<std::pair<std::string, std::string>>{{"rel", "plain.txt"},
                                                        {"abs", "/etc/passwd"},
                                                        {"dangling", "nowhere/at/all"},
                                                        {"dirlink", "dir"}}) {
    ASSERT_TRUE(S_ISLNK(lstat_of(frozen_ / rel).st_mode)) << rel;
    EXPECT_EQ(fs::read_symlink(frozen_ / rel).string(), target);
  }

  const auto wh = lstat_of(frozen_ / "gone");
  EXPECT_TRUE(S_ISCHR(wh.st_mode));
  EXPECT_EQ(wh.st_rdev, makedev(0, 0));

  EXPECT_EQ(xattr_of(frozen_ / "opaque_t", "user.overlay.opaque"), "y");
  EXPECT_EQ(xattr_of(frozen_ / "opaque_u", "user.overlay.opaque"), "y");
  EXPECT_EQ(xattr_of(frozen_ / "opaque_t", "trusted.overlay.opaque"), std::nullopt);
  EXPECT_EQ(xattr_of(frozen_ / "dir", "user.overlay.opaque"), std::nullopt);
  EXPECT_EQ(xattr_of(frozen_ / "plain.txt", "user.note"), "kept note");
}

// The real proof: a userxattr overlay with the frozen layer above a base hides what the upper
// had removed, and the same overlay over the upper itself shows why the translation of
// trusted.overlay.opaque is needed.
TEST_F(FreezeLayer, WorksAsALowerOfAUserxattrOverlay) {
  EVALBOX_REQUIRE_FEATURE(::geteuid() == 0, "root (an overlay mount in the host's namespaces)");
  EVALBOX_REQUIRE_FEATURE(testing::host().overlayfs, "overlayfs");
  upper_tree t{upper_};
  build_upper(t);
  build_base(tmp_.path() / "base");
  if (HasFatalFailure()) return;
  auto r = freeze_layer(upper_, frozen_);
  ASSERT_TRUE(r) << r.error().message;
  const fs::path merged = tmp_.path() / "merged";
  ASSERT_TRUE(make_dirs(merged, 0755));

  // In a child with a mount namespace of its own: no mount outlives it, whatever happens.
  auto mount_and_look = [&](const fs::path& top, const std::function<std::string()>& look) {
    return in_child([&]() -> std::string {
      if (::unshare(CLONE_NEWNS) != 0) return errno_text("unshare(CLONE_NEWNS)");
      if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
        return errno_text("mount(/, MS_REC | MS_PRIVATE)");
      const std::string options =
          "lowerdir=" + top.string() + ":" + (tmp_.path() / "base").string() + ",userxattr";
      if (::mount("overlay", merged.c_str(), "overlay", MS_RDONLY, options.c_str()) != 0)
        return "skip: " + errno_text("mount(overlay, " + options + ")");
      std::string seen = look();
      (void)::umount2(merged.c_str(), MNT_DETACH);
      return seen;
    });
  };
  const std::string seen = mount_and_look(frozen_, [&]() -> std::string {
    if (present(merged / "gone")) return "gone is visible: the whiteout did not hide it";
    if (present(merged / "opaque_t/old.txt")) return "opaque_t/old.txt is visible";
    if (present(merged / "opaque_u/old.txt")) return "opaque_u/old.txt is visible";
    if (!present(merged / "opaque_t/kept.txt")) return "opaque_t/kept.txt is missing";
    if (!present(merged / "opaque_u/kept.txt")) return "opaque_u/kept.txt is missing";
    if (!present(merged / "dir/base_only.txt")) return "dir is not merged with the base";
    if (!present(merged / "dir/nested/deep.txt")) return "dir/nested/deep.txt is missing";
    if (!present(merged / "base_file.txt")) return "base_file.txt is missing";
    auto plain = read_file(merged / "plain.txt");
    if (!plain || *plain != "hello\n") return "plain.txt does not read hello";
    return "ok";
  });
  // EINVAL/EPERM from mount: a kernel without overlayfs userxattr (5.11) or a host that forbids it.
  EVALBOX_REQUIRE_FEATURE(!seen.starts_with("skip: "), seen);
  EXPECT_EQ(seen, "ok");

  // The upper itself, under a userxattr overlay, is not opaque where only root's mark is.
  EXPECT_EQ(mount_and_look(upper_,
                           [&]() -> std::string {
                             return present(merged / "opaque_t/old.txt") ? "merged" : "hidden";
                           }),
            "merged");
}

TEST_F(FreezeLayer, AnExistingDestinationIsAnErrorAndLeftAsItIs) {
  ASSERT_TRUE(make_dirs(upper_ / "a", 0755));
  ASSERT_TRUE(write_file(upper_ / "a/f", "f"));
  ASSERT_TRUE(make_dirs(frozen_, 0700));
  ASSERT_TRUE(write_file(frozen_ / "mine", "mine"));
  auto r = freeze_layer(upper_, frozen_);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find(frozen_.string()), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("EEXIST"), std::string::npos) << r.error().message;
  EXPECT_EQ(content_of(frozen_ / "mine"), "mine");
  EXPECT_FALSE(present(frozen_ / "a"));
  EXPECT_EQ(lstat_of(frozen_).st_mode & 07777, 0700u);
}

TEST_F(FreezeLayer, ASymlinkedSourceIsNotFollowed) {
  ASSERT_TRUE(make_dirs(tmp_.path() / "real", 0755));
  ASSERT_TRUE(write_file(tmp_.path() / "real/f", "f"));
  ASSERT_EQ(::symlink("real", upper_.c_str()), 0);
  auto r = freeze_layer(upper_, frozen_);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find(upper_.string()), std::string::npos) << r.error().message;
  EXPECT_FALSE(present(frozen_));
}

TEST_F(FreezeLayer, ADestinationInsideTheSourceIsRefused) {
  ASSERT_TRUE(make_dirs(upper_, 0755));
  auto r = freeze_layer(upper_, upper_ / "snap");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, error_kind::invalid_argument);
  EXPECT_FALSE(present(upper_ / "snap"));
}

// A chain of `levels` directories below `root` with a file at its end, made relative to fds (a
// path that deep is longer than PATH_MAX). Returns what failed, or nothing.
std::string make_chain(const fs::path& root, const std::string& name, int levels) {
  unique_fd fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return errno_text("open " + root.string());
  for (int i = 0; i < levels; ++i) {
    const char* n = i == 0 ? name.c_str() : "d";
    if (::mkdirat(fd.get(), n, 0755) != 0) return errno_text("mkdirat");
    fd.reset(::openat(fd.get(), n, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd) return errno_text("openat");
  }
  const unique_fd leaf(::openat(fd.get(), "leaf", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  return leaf ? std::string() : errno_text("create leaf");
}

TEST_F(FreezeLayer, TheDepthBoundHoldsAndAFailureLeavesNoPartialLayer) {
  ASSERT_TRUE(make_dirs(upper_, 0755));
  ASSERT_TRUE(write_file(upper_ / "first", "f"));
  ASSERT_EQ(make_chain(upper_, "chain", max_layer_depth), "");
  auto ok = freeze_layer(upper_, frozen_);
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->entries, 2u + static_cast<uint64_t>(max_layer_depth));

  ASSERT_EQ(make_chain(upper_, "deeper", max_layer_depth + 1), "");
  const fs::path again = tmp_.path() / "again";
  auto r = freeze_layer(upper_, again);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("deeper than"), std::string::npos) << r.error().message;
  EXPECT_FALSE(present(again));
}

// Without root the copy is the caller's, and a partial copy is removed even where it already
// holds a read-only directory (which the caller cannot empty without making it writable).
TEST_F(FreezeLayer, WithoutRootTheCopyIsTheCallersAndAPartialOneIsRemoved) {
  const bool root = ::geteuid() == 0;
  const uid_t nobody = 65534;
  ASSERT_TRUE(make_dirs(upper_, 0755));
  if (root) {
    ASSERT_EQ(::chown(tmp_.path().c_str(), nobody, nobody), 0);
    ASSERT_EQ(::chown(upper_.c_str(), nobody, nobody), 0);
    // Someone else's file, readable: its copy must be the caller's.
    ASSERT_TRUE(write_file(upper_ / "foreign", "foreign", 0644));
    ASSERT_EQ(::chown((upper_ / "foreign").c_str(), other_id, other_id), 0);
  }
  const std::string result = in_child([&]() -> std::string {
    if (root) {
      if (::setgroups(0, nullptr) != 0 || ::setresgid(nobody, nobody, nobody) != 0 ||
          ::setresuid(nobody, nobody, nobody) != 0)
        return errno_text("become nobody");
      ::prctl(PR_SET_DUMPABLE, 1);
    }
    if (::mkdir((upper_ / "ro").c_str(), 0755) != 0) return errno_text("mkdir ro");
    if (!write_file(upper_ / "ro/inside", "inside")) return "write ro/inside";
    if (::chmod((upper_ / "ro").c_str(), 0555) != 0) return errno_text("chmod ro");
    auto ok = freeze_layer(upper_, frozen_);
    if (!ok) return "freeze: " + ok.error().message;
    struct stat st {};
    if (root && (::lstat((frozen_ / "foreign").c_str(), &st) != 0 || st.st_uid != nobody ||
                 st.st_gid != nobody))
      return "the copy of foreign is not the caller's";
    if (::lstat((frozen_ / "ro").c_str(), &st) != 0 || (st.st_mode & 07777) != 0555)
      return "the copy of ro is not 0555";

    // A chain past the bound, listed after ro: ro's copy is complete (0555) when the copy
    // fails. The walk reads entries in readdir order; renaming the chain moves it in that order.
    std::string chain = "chain";
    if (auto made = make_chain(upper_, chain, max_layer_depth + 1); !made.empty()) return made;
    for (int attempt = 0;; ++attempt) {
      if (attempt == 64) return "could not place the chain after ro in readdir order";
      const unique_fd d(::open(upper_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      if (!d) return errno_text("open upper");
      auto stream = read_dir_at(d.get(), upper_);
      if (!stream) return stream.error().message;
      int ro_at = -1, chain_at = -1;
      for (int i = 0; const dirent* ent = ::readdir(stream->get()); ++i) {
        if (chain == ent->d_name) chain_at = i;
        if (std::string_view("ro") == ent->d_name) ro_at = i;
      }
      if (ro_at < chain_at) break;
      const std::string renamed = "chain" + std::to_string(attempt);
      if (::rename((upper_ / chain).c_str(), (upper_ / renamed).c_str()) != 0)
        return errno_text("rename");
      chain = renamed;
    }
    const fs::path again = tmp_.path() / "again";
    auto r = freeze_layer(upper_, again);
    if (r) return "a chain past the bound was copied";
    if (r.error().message.find("deeper than") == std::string::npos)
      return "unexpected error: " + r.error().message;
    if (::lstat(again.c_str(), &st) == 0) return "the partial copy was left behind";
    return "ok";
  });
  EXPECT_EQ(result, "ok");
}

}  // namespace
}  // namespace evalbox::sandbox
