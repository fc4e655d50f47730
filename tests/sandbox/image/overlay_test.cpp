// Unpacked layers really work as overlayfs lowers: stacked with fsconfig("lowerdir+") one by
// one, whited-out files are gone and opaque directories hide the lower content — as root in
// the host's namespaces (trusted.overlay.*), inside a user namespace with userxattr (how a
// rootless run mounts), from a store made without root, and with the xattr whiteout form.
// Each mount happens in a child process with its own mount namespace, detached (never
// attached anywhere), so nothing can leak into the host.
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <functional>

#include <gtest/gtest.h>

#include "sandbox/sys/syscalls.h"
#include "tests/sandbox/image/image_test_support.h"
#include "tests/support/isolation.h"

namespace evalbox::testing::image {
namespace {

namespace fs = std::filesystem;

// Runs `fn` in a forked child; returns what it returned ("ok" or what went wrong).
std::string in_child(const std::function<std::string()>& fn) {
  int p[2];
  if (::pipe(p) != 0) return "pipe failed";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(p[0]);
    std::string out = fn();
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
  return out.empty() ? "child died" : out;
}

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

bool write_self(const char* file, const std::string& text) {
  int fd = ::open(file, O_WRONLY | O_CLOEXEC);
  bool ok = fd >= 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  if (fd >= 0) ::close(fd);
  return ok;
}

// Builds a detached overlay of `lowers` (top-most first) and checks what it shows.
std::string mount_and_check(const std::vector<std::string>& lowers, bool userxattr) {
  int fs_fd = sys::fsopen("overlay", FSOPEN_CLOEXEC);
  if (fs_fd < 0) return errno_text("fsopen overlay");
  for (const auto& l : lowers)
    if (sys::fsconfig(fs_fd, FSCONFIG_SET_STRING, "lowerdir+", l.c_str(), 0) != 0)
      return errno_text("fsconfig lowerdir+ " + l);
  if (userxattr && sys::fsconfig(fs_fd, FSCONFIG_SET_FLAG, "userxattr", nullptr, 0) != 0)
    return errno_text("fsconfig userxattr");
  if (sys::fsconfig(fs_fd, FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0)
    return errno_text("fsconfig create");
  int mnt = sys::fsmount(fs_fd, FSMOUNT_CLOEXEC, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID);
  if (mnt < 0) return errno_text("fsmount");
  struct stat st {};
  auto there = [&](const char* p) { return ::fstatat(mnt, p, &st, AT_SYMLINK_NOFOLLOW) == 0; };
  if (!there("etc/os-release")) return "etc/os-release (lower layer) is missing";
  if (there("etc/motd")) return "etc/motd is visible: the whiteout did not hide it";
  if (!there("opt/data/new")) return "opt/data/new (upper layer) is missing";
  if (there("opt/data/old")) return "opt/data/old is visible: the opaque directory did not hide it";
  if (there("opt/data/sub")) return "opt/data/sub is visible: the opaque directory did not hide it";
  return "ok";
}

std::vector<layer> two_layers() {
  return {make_layer({dir("etc"), file("etc/os-release", "ID=test\n"), file("etc/motd", "gone"),
                      dir("opt"), dir("opt/data"), file("opt/data/old", "hidden"),
                      dir("opt/data/sub"), file("opt/data/sub/deep", "hidden")},
                     "none"),
          make_layer({dir("etc"), file("etc/.wh.motd", ""), dir("opt/data"),
                      file("opt/data/new", "new"), file("opt/data/.wh..wh..opq", "")})};
}

class Overlay : public ::testing::Test {
 protected:
  void SetUp() override {
    EVALBOX_REQUIRE_FEATURE(host().overlayfs, "overlayfs");
    // The scratch directory stands for the state root: walkable, not listable.
    ASSERT_EQ(::chmod(tmp_.path().c_str(), 0711), 0);
  }
  // Imports the two layers into a store at `state` with `options`; returns the lowers.
  std::vector<fs::path> import(img::store_options o) {
    // A state root the sandbox id may walk (the store keeps a root it creates 0700; see
    // docs/environments.md for what mounting from the sandbox's user namespace needs).
    EXPECT_TRUE(make_dirs(o.state_root, 0711));
    auto s = img::store::open(o);
    EXPECT_TRUE(s) << s.error().message;
    if (!s) return {};
    write_oci_layout(tmp_.path() / "img", two_layers());
    auto r = s->import("oci:" + (tmp_.path() / "img").string(), {});
    EXPECT_TRUE(r) << r.error().message;
    return r ? r->image.lower_dirs() : std::vector<fs::path>{};
  }
  // In a child: become `uid`, enter a new user namespace mapping only that id to 0, and
  // mount there with userxattr — what a sandbox whose root is the store's owner can do (the
  // store's directories on the way to a layer are 0711 for that).
  std::string check_in_user_namespace(const std::vector<fs::path>& lowers, uid_t uid) {
    return in_child([&]() -> std::string {
      std::vector<std::string> paths;
      for (const auto& l : lowers) paths.push_back(l.string());
      if (uid != ::geteuid()) {
        if (::setgroups(0, nullptr) != 0 || ::setresgid(uid, uid, uid) != 0 ||
            ::setresuid(uid, uid, uid) != 0)
          return errno_text("drop to uid " + std::to_string(uid));
        // A changed uid makes the process non-dumpable: its /proc files would stay root's.
        ::prctl(PR_SET_DUMPABLE, 1);
      }
      if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return errno_text("unshare user+mount");
      if (!write_self("/proc/self/setgroups", "deny") ||
          !write_self("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1") ||
          !write_self("/proc/self/gid_map", "0 " + std::to_string(uid) + " 1"))
        return errno_text("write id maps");
      return mount_and_check(paths, true);
    });
  }
  temp_dir tmp_{"evalbox-image-overlay"};
};

TEST_F(Overlay, RootMountInTheHostNamespacesHidesWhiteoutsAndOpaqueLowers) {
  EVALBOX_REQUIRE_FEATURE(::geteuid() == 0, "root (a host-namespace overlay mount)");
  auto lowers = import(test_store_options(tmp_.path() / "state"));
  ASSERT_EQ(lowers.size(), 2u);
  EXPECT_EQ(in_child([&]() -> std::string {
              if (::unshare(CLONE_NEWNS) != 0) return errno_text("unshare mount");
              std::vector<std::string> paths;
              for (const auto& l : lowers) paths.push_back(l.string());
              return mount_and_check(paths, false);
            }),
            "ok");
}

TEST_F(Overlay, UserNamespaceMountWithUserxattrHidesWhiteoutsAndOpaqueLowers) {
  EVALBOX_REQUIRE_FEATURE(host().userns_overlay, "overlayfs in a user namespace (userxattr)");
  auto lowers = import(test_store_options(tmp_.path() / "state"));
  ASSERT_EQ(lowers.size(), 2u);
  // As the sandbox would: its root is the store's owner (60000 when we are root).
  EXPECT_EQ(check_in_user_namespace(lowers, test_owner()), "ok");
}

TEST_F(Overlay, XattrWhiteoutFormWorksWithUserxattr) {
  EVALBOX_REQUIRE_FEATURE(host().userns_overlay, "overlayfs in a user namespace (userxattr)");
  auto o = test_store_options(tmp_.path() / "state");
  o.whiteout = sys::whiteout_form::user_xattr;
  auto lowers = import(o);
  ASSERT_EQ(lowers.size(), 2u);
  struct stat st {};
  ASSERT_EQ(::lstat((lowers[0] / "etc/motd").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode)) << "an xattr whiteout is an empty regular file";
  EXPECT_EQ(check_in_user_namespace(lowers, test_owner()), "ok");
}

TEST_F(Overlay, StoreMadeWithoutRootMountsInAUserNamespace) {
  EVALBOX_REQUIRE_FEATURE(host().userns_overlay, "overlayfs in a user namespace (userxattr)");
  EVALBOX_REQUIRE_FEATURE(::geteuid() == 0, "root, to become an unprivileged user for the test");
  const uid_t nobody = 65534;
  ASSERT_EQ(::chown(tmp_.path().c_str(), nobody, nobody), 0);
  write_oci_layout(tmp_.path() / "img", two_layers());
  ASSERT_EQ(::chown((tmp_.path() / "img").c_str(), nobody, nobody), 0);
  const fs::path state = tmp_.path() / "state";
  EXPECT_EQ(in_child([&]() -> std::string {
              if (::setgroups(0, nullptr) != 0 || ::setresgid(nobody, nobody, nobody) != 0 ||
                  ::setresuid(nobody, nobody, nobody) != 0)
                return errno_text("become nobody");
              ::prctl(PR_SET_DUMPABLE, 1);
              img::store_options o;
              o.state_root = state;
              o.owner_uid = nobody;
              o.owner_gid = nobody;
              o.durable = false;
              auto s = img::store::open(o);
              if (!s) return s.error().message;
              if (s->whiteout() == sys::whiteout_form::copy) return "no whiteout form without root";
              auto r = s->import("oci:" + (tmp_.path() / "img").string(), {});
              if (!r) return r.error().message;
              std::vector<std::string> lowers;
              for (const auto& l : r->image.lower_dirs()) lowers.push_back(l.string());
              if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return errno_text("unshare");
              if (!write_self("/proc/self/setgroups", "deny") ||
                  !write_self("/proc/self/uid_map", "0 65534 1") ||
                  !write_self("/proc/self/gid_map", "0 65534 1"))
                return errno_text("write id maps");
              return mount_and_check(lowers, true);
            }),
            "ok");
}

}  // namespace
}  // namespace evalbox::testing::image
