// A host client in an image's root: what kind of executable it is, and how its plan is adapted
// to an image that has (or lacks) its loader, its interpreter and the programs it needs.
#include "harness/agent/host_client.h"

#include <gtest/gtest.h>

#include <set>

#include "base/fs.h"

namespace evalbox::harness {
namespace {

namespace fs = std::filesystem;

// An image that has exactly `files`.
image_view image_with(std::set<std::string> files, std::vector<std::string> path = {"/bin"}) {
  image_view v;
  v.reference = "oci:/images/test";
  v.path_dirs = std::move(path);
  v.has_file = [files = std::move(files)](const fs::path& p) -> result<bool> {
    return files.contains(p.string());
  };
  return v;
}

class HostClient : public ::testing::Test {
 protected:
  fs::path script(const std::string& shebang) {
    fs::path p = dir_.path() / ("s" + std::to_string(++n_));
    EXPECT_TRUE(write_file(p, shebang + "\necho hi\n", 0755));
    return p;
  }
  temp_dir dir_{"evalbox-host-client"};
  int n_ = 0;
};

TEST_F(HostClient, TellsStaticDynamicAndScriptsApart) {
  // The host's dash links libc; the static hostile tool of the escape tests has no loader.
  auto dyn = inspect_executable("/bin/dash");
  ASSERT_TRUE(dyn) << dyn.error().message;
  EXPECT_EQ(dyn->what, executable_kind::type::dynamic_elf);
  EXPECT_EQ(dyn->interpreter, "/lib64/ld-linux-x86-64.so.2");
  auto st = inspect_executable(fs::path(EVALBOX_BINARY_DIR) / "tests/escape/evalbox-hostile");
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_EQ(st->what, executable_kind::type::static_elf);
  auto sc = inspect_executable(script("#!/usr/bin/env  node --flag"));
  ASSERT_TRUE(sc);
  EXPECT_EQ(sc->what, executable_kind::type::script);
  EXPECT_EQ(sc->interpreter, "/usr/bin/env");
  EXPECT_EQ(sc->argument, "node");
}

TEST_F(HostClient, ADynamicClientUsesTheImagesLoaderOrElseTheHostsAtAPrivatePath) {
  agent_plan with_glibc;
  with_glibc.argv = {"/bin/dash", "-c", "true"};
  // /bin/dash is below a system directory: the image's own program, left alone.
  ASSERT_TRUE(adapt_to_image(with_glibc, image_with({})));
  EXPECT_EQ(with_glibc.argv.front(), "/bin/dash");

  const fs::path client = dir_.path() / "client";
  fs::copy_file("/bin/dash", client);
  agent_plan p;
  p.argv = {client.string(), "-c", "true"};
  ASSERT_TRUE(adapt_to_image(p, image_with({"/lib64/ld-linux-x86-64.so.2"})));
  EXPECT_EQ(p.argv, (std::vector<std::string>{client.string(), "-c", "true"}));
  EXPECT_TRUE(p.host_binds.empty());

  ASSERT_TRUE(adapt_to_image(p, image_with({})));
  EXPECT_EQ(p.argv, (std::vector<std::string>{"/opt/evalbox/host/ld.so", "--library-path",
                                              "/opt/evalbox/host/lib", "--argv0", client.string(),
                                              client.string(), "-c", "true"}));
  ASSERT_EQ(p.host_binds.size(), 2u);
  EXPECT_EQ(p.host_binds[0].target, "/opt/evalbox/host/ld.so");
  EXPECT_EQ(p.host_binds[0].source, fs::canonical("/lib64/ld-linux-x86-64.so.2"));
  EXPECT_EQ(p.host_binds[1].source, p.host_binds[0].source.parent_path());
  EXPECT_FALSE(p.host_binds[0].writable || p.host_binds[1].writable);
  EXPECT_NE(std::find(p.readonly_paths.begin(), p.readonly_paths.end(), dir_.path()),
            p.readonly_paths.end());
}

TEST_F(HostClient, AScriptNeedsItsInterpreterInTheImage) {
  agent_plan p;
  p.argv = {script("#!/usr/bin/env node").string()};
  EXPECT_TRUE(adapt_to_image(p, image_with({"/usr/local/bin/node"}, {"/usr/local/bin", "/bin"})));
  auto refused = adapt_to_image(p, image_with({"/usr/bin/node"}, {"/bin"}));
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("is a node script (#!/usr/bin/env node), and the image "
                                         "oci:/images/test has no node on its PATH (/bin)"),
            std::string::npos)
      << refused.error().message;
  agent_plan sh;
  sh.argv = {script("#!/bin/bash").string()};
  EXPECT_TRUE(adapt_to_image(sh, image_with({"/bin/bash"})));
  auto no_bash = adapt_to_image(sh, image_with({"/bin/sh"}));
  ASSERT_FALSE(no_bash);
  EXPECT_NE(no_bash.error().message.find("is a script for /bin/bash"), std::string::npos);
}

TEST_F(HostClient, ProgramsTheClientNeedsMustBeInTheImage) {
  agent_plan p;
  p.argv = {"/bin/true"};
  p.needs_any_of = {"bash", "zsh"};
  p.needs_why = "the client runs its commands with bash or zsh";
  EXPECT_TRUE(adapt_to_image(p, image_with({"/usr/bin/zsh"}, {})));
  auto refused = adapt_to_image(p, image_with({"/bin/sh"}));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().message,
            "the client runs its commands with bash or zsh, and the image oci:/images/test has no "
            "bash or zsh (on its PATH or in /bin, /usr/bin, /usr/local/bin): use an image that "
            "has one");
}

}  // namespace
}  // namespace evalbox::harness
