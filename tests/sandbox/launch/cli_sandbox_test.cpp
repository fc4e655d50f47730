// `evalbox sandbox exec` as a user runs it: exit codes, the record file, and a host workspace
// that is never modified.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>

#include "base/fs.h"
#include "base/json.h"
#include "tests/support/isolation.h"
#include "tests/support/test_images.h"

namespace evalbox {
namespace {

namespace fs = std::filesystem;

class CliSandbox : public ::testing::Test {
 protected:
  void SetUp() override {
    EVALBOX_REQUIRE_FEATURE(evalbox::testing::host().user_namespaces, "user namespaces");
    ASSERT_TRUE(make_dirs(dir_.path() / "ws", 0755));
    ASSERT_TRUE(write_file(dir_.path() / "ws" / "f.txt", "original\n"));
  }
  // Runs `evalbox sandbox exec` with `args`; returns the exit code, stdout into out_.
  int exec(const std::string& args, bool workspace = true) {
    const std::string cmd =
        fmt::format("{}/harness/cli/evalbox sandbox exec --state-dir {} {} {} > {} 2>{}",
                    EVALBOX_BINARY_DIR, (dir_.path() / "state").string(),
                    workspace ? "--workspace " + (dir_.path() / "ws").string() : "", args,
                    (dir_.path() / "out").string(), (dir_.path() / "err").string());
    int st = std::system(cmd.c_str());
    out_ = read_file(dir_.path() / "out").value_or("");
    err_ = read_file(dir_.path() / "err").value_or("");
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }
  temp_dir dir_{"evalbox-cli"};
  std::string out_, err_;
};

TEST_F(CliSandbox, ExitsWithTheProgramExitCodeAndLeavesTheHostWorkspaceAlone) {
  EXPECT_EQ(exec("-- sh -c 'cat f.txt; echo changed > f.txt; exit 5'"), 5) << err_;
  EXPECT_EQ(out_, "original\n");
  EXPECT_EQ(read_file(dir_.path() / "ws" / "f.txt").value_or(""), "original\n");
}

TEST_F(CliSandbox, AWallTimeoutExits124) {
  EXPECT_EQ(exec("--wall 1s -- sleep 10"), 124);
  EXPECT_NE(err_.find("wall-time limit"), std::string::npos) << err_;
}

TEST_F(CliSandbox, ASignalExits128PlusTheSignalAndWritesTheRecord) {
  const fs::path record = dir_.path() / "record.json";
  EXPECT_EQ(exec(fmt::format("--record {} -- sh -c 'kill -TERM $$'", record.string())), 143);
  auto j = read_json_file(record);
  ASSERT_TRUE(j);
  EXPECT_EQ((*j)["schema"], "evalbox.run-record.v1");
  EXPECT_EQ((*j)["outcome"], "signaled");
  EXPECT_EQ((*j)["signal"], 15);
}

TEST_F(CliSandbox, AnUnknownCommandExits127) {
  EXPECT_EQ(exec("-- no-such-command-anywhere"), 127);
}

TEST_F(CliSandbox, ASandboxFailureExits125WithTheMessage) {
  EXPECT_EQ(exec("-- /usr/bin/env -i /no/such/program"), 127);  // the program's own 127
  EXPECT_EQ(exec("--network allow:10.0.0.1:80 -- true"), 125);
  EXPECT_NE(err_.find("only loopback IP literals or host names"), std::string::npos) << err_;
}

// --image: the image's root and Env, its working directory as the workspace when no host
// directory is given, commands found on its PATH, unknown ones 127.
TEST_F(CliSandbox, AnImageIsTheRootAndItsWorkingDirectoryTheWorkspace) {
  EVALBOX_REQUIRE_FEATURE(evalbox::testing::host().userns_overlay, "overlayfs in a user namespace");
  const std::string ref = evalbox::testing::test_image_ref("busybox");
  EVALBOX_REQUIRE_FEATURE(!ref.empty(), "the busybox test image");
  EXPECT_EQ(exec(fmt::format("--image {} -- sh -c 'pwd; grep ^ID= /etc/os-release; echo $PATH; "
                             "echo $EVALBOX_IMAGE'",
                             ref),
                 false),
            0)
      << err_;
  EXPECT_EQ(out_, "/root\nID=evalbox-busybox\n/bin\nbusybox\n");
  // With a host directory too: that is /workspace, in the image's root.
  EXPECT_EQ(exec(fmt::format("--image {} -- sh -c 'pwd; cat f.txt; test -e /etc/debian_version "
                             "|| echo not-the-host'",
                             ref)),
            0)
      << err_;
  EXPECT_EQ(out_, "/workspace\noriginal\nnot-the-host\n");
  EXPECT_EQ(exec(fmt::format("--image {} -- python3 --version", ref), false), 127);
  EXPECT_NE(err_.find("python3: not found in the sandbox"), std::string::npos) << err_;
  EXPECT_EQ(exec("--image oci:/no/such/image -- true", false), 64);
  EXPECT_NE(err_.find("oci:/no/such/image"), std::string::npos) << err_;
  EXPECT_EQ(exec("-- true", false), 64);
  EXPECT_NE(err_.find("give --workspace DIR"), std::string::npos) << err_;
}

TEST_F(CliSandbox, ADebianImagesPythonRunsAndAnInstallIntoItsRootIsThrownAway) {
  EVALBOX_REQUIRE_FEATURE(evalbox::testing::host().userns_overlay, "overlayfs in a user namespace");
  const std::string ref = evalbox::testing::test_image_ref("debian");
  EVALBOX_REQUIRE_FEATURE(!ref.empty(), "the Debian test image (Debian's mirror, once)");
  EXPECT_EQ(
      exec(fmt::format("--image {} -- sh -c 'python3 -c \"import sys; "
                       "print(sys.version_info[:2])\"; grep ^VERSION_CODENAME /etc/os-release; "
                       "echo x > /usr/lib/python3/dist-packages/evalbox_probe.py && echo wrote'",
                       ref),
           false),
      0)
      << err_;
  EXPECT_EQ(out_, "(3, 11)\nVERSION_CODENAME=bookworm\nwrote\n");
  EXPECT_EQ(exec(fmt::format("--image {} -- sh -c 'test -e "
                             "/usr/lib/python3/dist-packages/evalbox_probe.py || echo gone'",
                             ref),
                 false),
            0);
  EXPECT_EQ(out_, "gone\n");
}

}  // namespace
}  // namespace evalbox
