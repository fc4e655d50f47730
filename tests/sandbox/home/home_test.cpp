// The managed home on its own (home/home.h): directories 0700, files with their modes, an
// empty 0600 placeholder at each credential target, everything owned by the sandbox id; and
// refusals that leave no doubt.
#include "sandbox/home/home.h"

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "base/fs.h"
#include "tests/support/isolation.h"

namespace evalbox::sandbox::home {
namespace {

namespace fs = std::filesystem;

mode_t mode_of(const fs::path& p) {
  struct stat st {};
  ::lstat(p.c_str(), &st);
  return st.st_mode & 07777;
}

class Home : public ::testing::Test {
 protected:
  fs::path home() const { return dir_.path() / "home"; }
  status lay(const home_layout& layout, const std::vector<secret_mount>& secrets = {}) {
    return lay_out(home(), layout, secrets, ::getuid(), ::getgid());
  }
  temp_dir dir_{"evalbox-home"};
};

TEST_F(Home, LaysOutDirectoriesFilesAndLeasePlaceholders) {
  home_layout layout;
  layout.directories = {".config/agent", ".cache"};
  layout.files = {{".config/agent/settings.json", "{}\n", 0644},
                  {".local/bin/tool", "#!/bin/sh\n", 0755}};
  ASSERT_TRUE(lay(layout, {{"codex", "/creds/auth.json", ".codex/auth.json"}}));
  EXPECT_EQ(mode_of(home()), 0700u);
  EXPECT_EQ(mode_of(home() / ".config"), 0700u);  // intermediate directories too
  EXPECT_EQ(mode_of(home() / ".config" / "agent"), 0700u);
  EXPECT_EQ(mode_of(home() / ".cache"), 0700u);
  EXPECT_EQ(read_file(home() / ".config/agent/settings.json").value_or(""), "{}\n");
  EXPECT_EQ(mode_of(home() / ".config/agent/settings.json"), 0644u);
  EXPECT_EQ(mode_of(home() / ".local/bin/tool"), 0755u);
  // The lease is bound over an empty owner-only file at its target.
  EXPECT_EQ(read_file(home() / ".codex/auth.json").value_or("?"), "");
  EXPECT_EQ(mode_of(home() / ".codex/auth.json"), 0600u);
}

TEST_F(Home, EverythingBelongsToTheSandboxIdAsRoot) {
  EVALBOX_REQUIRE_FEATURE(::geteuid() == 0, "root (chown to another id)");
  home_layout layout;
  layout.files = {{".config/agent/settings.json", "{}\n", 0644}};
  ASSERT_TRUE(lay_out(home(), layout, {{"c", "/creds/a", ".codex/auth.json"}}, 60000, 60001));
  for (const char* p : {"", ".config", ".config/agent/settings.json", ".codex/auth.json"}) {
    struct stat st {};
    ASSERT_EQ(::lstat((home() / p).c_str(), &st), 0) << p;
    EXPECT_EQ(st.st_uid, 60000u) << p;
    EXPECT_EQ(st.st_gid, 60001u) << p;
  }
}

TEST_F(Home, RefusesPathsThatLeaveTheHome) {
  for (const char* bad : {"../escape", "/etc/passwd", "a/../../b", ""}) {
    home_layout layout;
    layout.files = {{bad, "x", 0644}};
    auto r = lay_out(dir_.path() / fmt::format("h{}", std::hash<std::string>{}(bad)), layout, {},
                     ::getuid(), ::getgid());
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().kind, error_kind::invalid_argument) << bad;
  }
  home_layout dirs;
  dirs.directories = {"../up"};
  EXPECT_FALSE(lay(dirs));
  auto secret = lay_out(dir_.path() / "s", {}, {{"c", "/creds/a", "../../auth.json"}}, ::getuid(),
                        ::getgid());
  ASSERT_FALSE(secret);
  EXPECT_NE(secret.error().message.find("credential target"), std::string::npos);
}

TEST_F(Home, AFileTwiceOrBelowAFileIsAnError) {
  home_layout twice;
  twice.files = {{"a.txt", "1", 0644}, {"a.txt", "2", 0644}};
  auto r = lay(twice);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().sys_errno, EEXIST);
  EXPECT_NE(r.error().message.find("a.txt"), std::string::npos);

  home_layout below;
  below.files = {{"a", "1", 0644}, {"a/b", "2", 0644}};
  auto b = lay_out(dir_.path() / "other", below, {}, ::getuid(), ::getgid());
  ASSERT_FALSE(b);
  EXPECT_NE(b.error().message.find("not a directory?"), std::string::npos) << b.error().message;
}

TEST_F(Home, AnExistingHomeIsNotReused) {
  ASSERT_TRUE(make_dirs(home(), 0755));
  auto r = lay({});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().sys_errno, EEXIST);
}

}  // namespace
}  // namespace evalbox::sandbox::home
