// Every rejection of a session request happens before anything is created: each test makes
// one request invalid in one way, expects the error to name it, and proves the state root is
// byte-for-byte what it was.
#include "sandbox/spec/validate.h"

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "base/digest.h"
#include "base/fs.h"
#include "tests/support/prep_env.h"

namespace evalbox::sandbox {
namespace {

using testing::prep_env;
namespace fs = std::filesystem;

class Validate : public ::testing::Test {
 protected:
  void SetUp() override {
    // A state root with history: another run's directory and an old lease.
    ASSERT_TRUE(make_dirs(env.state / "runs" / "other-run", 0700));
    ASSERT_TRUE(make_dirs(env.state / "credential-leases", 0700));
    ASSERT_TRUE(write_file(env.state / "credential-leases" / "old-abc", "old", 0600));
    before = env.state_fingerprint();
  }

  // Prepares `r`, expects a rejection of `kind` whose message contains `needle`, and an
  // untouched state root.
  void expect_rejected(const session_request& r, error_kind kind, std::string_view needle) {
    preparer p(env.options());
    auto s = p.prepare(r);
    ASSERT_FALSE(s.has_value()) << "accepted a request that should be rejected";
    EXPECT_EQ(s.error().kind, kind) << s.error().message;
    EXPECT_NE(s.error().message.find(needle), std::string::npos) << s.error().message;
    EXPECT_EQ(env.state_fingerprint(), before);
  }

  prep_env env;
  std::string before;
};

TEST_F(Validate, AcceptsTheBaseRequest) { EXPECT_TRUE(validate(env.request(), {env.state})); }

TEST_F(Validate, RejectsExpiredAuthorization) {
  auto r = env.request();
  r.authorized_until = std::chrono::system_clock::now() - std::chrono::seconds(1);
  expect_rejected(r, error_kind::expired, "authorization expired");
}

TEST_F(Validate, RejectsBadRunId) {
  auto r = env.request();
  r.run_id = "../escape";
  expect_rejected(r, error_kind::invalid_argument, "run id");
}

TEST_F(Validate, RejectsUnknownBackend) {
  auto r = env.request();
  r.backend = "docker";
  expect_rejected(r, error_kind::invalid_argument, "backend 'docker'");
}

TEST_F(Validate, RejectsMissingArgv0) {
  auto r = env.request();
  r.argv = {(env.root / "no-such-agent").string()};
  expect_rejected(r, error_kind::not_found, "does not exist");
}

TEST_F(Validate, RejectsARelativePathAsArgv0) {
  auto r = env.request();
  r.argv = {"bin/agent"};
  expect_rejected(r, error_kind::invalid_argument, "is a relative path");
}

// A bare name is looked up on the sandbox's own PATH when the program starts: the host's PATH
// (a pyenv shim under a protected home, say) plays no part, so nothing is checked here.
TEST_F(Validate, AcceptsABareProgramNameToFindOnTheSandboxsPath) {
  auto r = env.request();
  r.argv = {"python3", "-c", "pass"};
  EXPECT_TRUE(validate(r, {env.state}));
  r.argv = {".."};
  expect_rejected(r, error_kind::invalid_argument, "not a program name");
}

// With an image root, a program below a system directory is the image's: the host need not
// have it.
TEST_F(Validate, AnImagesSystemProgramNeedsNoHostFile) {
  auto r = env.request();
  r.argv = {"/usr/bin/no-such-program-on-this-host"};
  expect_rejected(r, error_kind::not_found, "does not exist");
  r.image = image_root{"sha256:" + std::string(64, 'a'), "oci:/images/x", ""};
  r.workspace.target = "/workspace";
  EXPECT_TRUE(validate(r, {env.state}));
}

TEST_F(Validate, ImageRequestsAreCheckedBeforeAnythingIsMade) {
  auto r = env.request();
  r.image = image_root{"sha256:short", "oci:/images/x", ""};
  expect_rejected(r, error_kind::invalid_argument, "not sha256:<64 hex>");
  r.image->id = "sha256:" + std::string(64, 'a');
  r.workspace.target = "/";
  expect_rejected(r, error_kind::invalid_argument, "other than /");
  r.workspace.target = "/home";
  expect_rejected(r, error_kind::invalid_argument, "which the sandbox builds itself");
  r.workspace.target = "/app";
  r.workspace.image_dir = "/app";
  expect_rejected(r, error_kind::invalid_argument, "both a host source");
  auto plain = env.request();
  plain.workspace.target = "/app";
  expect_rejected(plain, error_kind::invalid_argument, "without an image root");
  plain.workspace.target = "/workspace";
  plain.workspace.image_dir = "/app";
  expect_rejected(plain, error_kind::invalid_argument, "needs an image root");
}

TEST_F(Validate, RejectsNonExecutableArgv0) {
  auto r = env.request();
  ASSERT_TRUE(write_file(env.root / "agent", "#!/bin/sh\n", 0644));
  r.argv = {(env.root / "agent").string()};
  expect_rejected(r, error_kind::invalid_argument, "not an executable");
}

TEST_F(Validate, RejectsArgv0InsideProtectedRoot) {
  auto r = env.request();
  ASSERT_TRUE(make_dirs(env.root / "protected", 0755));
  ASSERT_TRUE(write_file(env.root / "protected" / "agent", "#!/bin/sh\n", 0755));
  r.argv = {(env.root / "protected" / "agent").string()};
  expect_rejected(r, error_kind::permission, "protected root");
}

TEST_F(Validate, RejectsSymlinkToArgv0InsideProtectedRoot) {
  auto r = env.request();
  ASSERT_TRUE(make_dirs(env.root / "protected", 0755));
  ASSERT_TRUE(make_dirs(env.root / "bin", 0755));
  ASSERT_TRUE(write_file(env.root / "protected" / "agent", "#!/bin/sh\n", 0755));
  ASSERT_EQ(
      ::symlink((env.root / "protected" / "agent").c_str(), (env.root / "bin" / "agent").c_str()),
      0);
  r.argv = {(env.root / "bin" / "agent").string()};
  expect_rejected(r, error_kind::permission, "protected root");
}

TEST_F(Validate, RejectsWorkspaceInsideProtectedRoot) {
  auto r = env.request();
  r.protected_roots.push_back(env.root / "fixture");
  expect_rejected(r, error_kind::permission, "workspace source");
}

// A protected root named through a link is resolved once per validation and still guards
// what lies in its target, for every path checked against it (workspace, argv[0], read-only
// paths), and the message names the root as it was given.
TEST_F(Validate, RejectsPathsInsideAProtectedRootNamedThroughALink) {
  ASSERT_TRUE(make_dirs(env.root / "real" / "bin", 0755));
  ASSERT_TRUE(write_file(env.root / "real" / "bin" / "agent", "#!/bin/sh\n", 0755));
  ASSERT_EQ(::symlink((env.root / "real").c_str(), (env.root / "alias").c_str()), 0);
  auto r = env.request();
  r.protected_roots.push_back(env.root / "alias");
  EXPECT_TRUE(validate(r, {env.state})) << "nothing of the base request lies in it";
  auto ro = r;
  ro.readonly_paths.push_back(env.root / "real" / "bin");
  expect_rejected(ro, error_kind::permission, "protected root " + (env.root / "alias").string());
  auto exe = r;
  exe.argv = {(env.root / "real" / "bin" / "agent").string()};
  expect_rejected(exe, error_kind::permission, "argv[0]");
  auto ws = r;
  ws.workspace.source = env.root / "real";
  expect_rejected(ws, error_kind::permission, "workspace source");
}

TEST_F(Validate, RejectsWorkspaceInsideStateRoot) {
  auto r = env.request();
  ASSERT_TRUE(make_dirs(env.state / "runs" / "other-run" / "ws", 0755));
  before = env.state_fingerprint();
  r.workspace.source = env.state / "runs" / "other-run" / "ws";
  expect_rejected(r, error_kind::permission, "protected root");
}

// A fixture's git commit, checked out under <state>/workspace-sources, is a workspace source;
// the rest of the state root is not, nor a link from there into it, nor the directory itself.
TEST_F(Validate, AcceptsAWorkspaceSourceTreeOfTheStateRootAndNothingElseThere) {
  const fs::path trees = workspace_sources_dir(env.state) / "git";
  ASSERT_TRUE(make_dirs(trees / "0123abcd", 0755));
  ASSERT_TRUE(write_file(trees / "0123abcd" / "README.md", "hi\n"));
  auto r = env.request();
  r.workspace.source = trees / "0123abcd";
  EXPECT_TRUE(validate(r, {env.state})) << validate(r, {env.state}).error().message;

  ASSERT_EQ(::symlink((env.state / "runs" / "other-run").c_str(), (trees / "link").c_str()), 0);
  before = env.state_fingerprint();
  r.workspace.source = trees / "link";
  expect_rejected(r, error_kind::permission, "protected root");
  r.workspace.source = workspace_sources_dir(env.state);
  expect_rejected(r, error_kind::permission, "protected root");
  // The other roots still count there.
  r.workspace.source = trees / "0123abcd";
  r.protected_roots.push_back(trees);
  expect_rejected(r, error_kind::permission, "protected root");
}

// A cache (sandbox/prepare/caches.h) is mounted from <state>/caches/<key>/tree: that tree and
// nothing else of the state root, never through a link, and the other roots still count.
TEST_F(Validate, AcceptsACacheStoreTreeAsAMountSourceAndNothingElseOfTheStateRoot) {
  const std::string key(64, 'c');
  const fs::path tree = cache_store_dir(env.state) / key / "tree";
  ASSERT_TRUE(make_dirs(tree / "wheels", 0755));
  auto r = env.request();
  r.mounts.push_back(
      {tree, "/home/agent/.cache/pip", mount_access::ephemeral_write, 64ull << 20, std::string()});
  EXPECT_TRUE(validate(r, {env.state})) << validate(r, {env.state}).error().message;

  ASSERT_TRUE(make_dirs(cache_store_dir(env.state) / "not-a-key" / "tree", 0755));
  ASSERT_EQ(::symlink((env.state / "runs" / "other-run").c_str(),
                      (cache_store_dir(env.state) / std::string(64, 'd')).c_str()),
            0);
  before = env.state_fingerprint();
  for (const fs::path& bad :
       {cache_store_dir(env.state) / "not-a-key" / "tree", cache_store_dir(env.state) / key,
        tree / "wheels", cache_store_dir(env.state) / std::string(64, 'd') / "tree"}) {
    r.mounts.back().source = bad;
    expect_rejected(r, error_kind::permission, "protected root");
  }
  r.mounts.back().source = tree;
  r.protected_roots.push_back(cache_store_dir(env.state));
  expect_rejected(r, error_kind::permission, "protected root");
}

// A mount below the managed home (a client's cache) is accepted; the home itself, and a mount
// that would hide a credential or a home file, are not.
TEST_F(Validate, AMountBelowTheHomeNeverHidesACredentialOrAHomeFile) {
  const fs::path data = env.root / "data";
  ASSERT_TRUE(make_dirs(data, 0755));
  auto r = env.request();
  r.secrets = {{"codex", env.creds / "auth.json", ".codex/auth.json"}};
  r.mounts.push_back(
      {data, "/home/agent/.cache/pip", mount_access::ephemeral_write, 64ull << 20, std::string()});
  EXPECT_TRUE(validate(r, {env.state})) << validate(r, {env.state}).error().message;
  r.mounts.back().target = "/home/agent";
  expect_rejected(r, error_kind::invalid_argument, "/home/agent");
  r.mounts.back().target = "/home/agent/.codex";
  expect_rejected(r, error_kind::invalid_argument, "would hide credential codex");
  r.mounts.back().target = "/home/agent/.config";
  expect_rejected(r, error_kind::invalid_argument, "would hide home file");
  r.mounts.back().target = "/home/agent/.codex/auth.json/x";
  expect_rejected(r, error_kind::invalid_argument, "is a file");
  r.mounts.back().target = "/home/agent/../etc";
  expect_rejected(r, error_kind::invalid_argument, "mount target");
}

TEST_F(Validate, RejectsWorkspaceContainingCredentialSource) {
  auto r = env.request();
  ASSERT_TRUE(write_file(env.source / "token", "secret-value-123", 0600));
  r.secrets = {{"tok", env.source / "token", ".tok"}};
  expect_rejected(r, error_kind::permission, "protected root");
}

TEST_F(Validate, RejectsWorkspaceWithGitfile) {
  auto r = env.request();
  ASSERT_TRUE(remove_tree(env.source / ".git"));
  ASSERT_TRUE(write_file(env.source / ".git", "gitdir: /elsewhere/.git\n", 0644));
  expect_rejected(r, error_kind::invalid_argument, ".git is a file");
}

TEST_F(Validate, RejectsWorkspaceWithGitSymlink) {
  auto r = env.request();
  ASSERT_TRUE(remove_tree(env.source / ".git"));
  ASSERT_EQ(::symlink("/tmp", (env.source / ".git").c_str()), 0);
  expect_rejected(r, error_kind::invalid_argument, ".git is a symlink");
}

TEST_F(Validate, RejectsMissingWorkspace) {
  auto r = env.request();
  r.workspace.source = env.root / "nope";
  expect_rejected(r, error_kind::not_found, "workspace source");
}

TEST_F(Validate, RejectsCredentialSymlink) {
  auto r = env.request();
  ASSERT_EQ(::symlink((env.creds / "auth.json").c_str(), (env.creds / "link.json").c_str()), 0);
  r.secrets = {{"codex", env.creds / "link.json", ".codex/auth.json"}};
  expect_rejected(r, error_kind::invalid_argument, "is a symlink");
}

TEST_F(Validate, RejectsCredentialNotRegularFile) {
  auto r = env.request();
  ASSERT_TRUE(make_dirs(env.creds / "dir", 0700));
  r.secrets = {{"codex", env.creds / "dir", ".codex/auth.json"}};
  expect_rejected(r, error_kind::invalid_argument, "not a regular file");
}

TEST_F(Validate, RejectsCredentialLargerThanOneMiB) {
  auto r = env.request();
  ASSERT_TRUE(write_file(env.creds / "big", std::string((1u << 20) + 1, 'x'), 0600));
  r.secrets = {{"codex", env.creds / "big", ".codex/auth.json"}};
  expect_rejected(r, error_kind::invalid_argument, "more than 1 MiB");
}

TEST_F(Validate, RejectsCredentialReadableByOthers) {
  auto r = env.request();
  ASSERT_EQ(::chmod((env.creds / "auth.json").c_str(), 0644), 0);
  r.secrets = {{"codex", env.creds / "auth.json", ".codex/auth.json"}};
  expect_rejected(r, error_kind::permission, "chmod 600");
}

TEST_F(Validate, RejectsCredentialInsideProtectedRoot) {
  auto r = env.request();
  r.protected_roots.push_back(env.creds);
  r.secrets = {{"codex", env.creds / "auth.json", ".codex/auth.json"}};
  expect_rejected(r, error_kind::permission, "protected root");
}

TEST_F(Validate, RejectsCredentialTargetEscapingHome) {
  auto r = env.request();
  r.secrets = {{"codex", env.creds / "auth.json", "../../etc/auth.json"}};
  expect_rejected(r, error_kind::invalid_argument, "target");
}

TEST_F(Validate, RejectsAbsoluteCredentialTarget) {
  auto r = env.request();
  r.secrets = {{"codex", env.creds / "auth.json", "/etc/auth.json"}};
  expect_rejected(r, error_kind::invalid_argument, "relative path");
}

TEST_F(Validate, RejectsHomeFileEscapingHome) {
  auto r = env.request();
  r.home.files = {{"../outside", "x", 0644}};
  expect_rejected(r, error_kind::invalid_argument, "home file");
}

TEST_F(Validate, RejectsDuplicateTargets) {
  auto r = env.request();
  r.secrets = {{"codex", env.creds / "auth.json", ".config/agent/settings.json"}};
  expect_rejected(r, error_kind::invalid_argument, "duplicate target");
}

TEST_F(Validate, RejectsBadHandle) {
  auto r = env.request();
  r.secrets = {{"a/b", env.creds / "auth.json", ".codex/auth.json"}};
  expect_rejected(r, error_kind::invalid_argument, "handle");
}

TEST_F(Validate, RejectsMalformedBundleDigest) {
  auto r = env.request();
  ASSERT_TRUE(make_dirs(env.root / "bundle", 0755));
  r.bundles = {{env.root / "bundle", "ABC", "/evalbox/bundle"}};
  expect_rejected(r, error_kind::invalid_argument, "64 lowercase hex");
}

TEST_F(Validate, RejectsBundleWhoseContentDoesNotMatch) {
  auto r = env.request();
  ASSERT_TRUE(make_dirs(env.root / "bundle", 0755));
  ASSERT_TRUE(write_file(env.root / "bundle" / "tool", "v1", 0755));
  auto digest = tree_digest(env.root / "bundle");
  ASSERT_TRUE(digest);
  ASSERT_TRUE(write_file(env.root / "bundle" / "tool", "v2", 0755));
  r.bundles = {{env.root / "bundle", *digest, "/evalbox/bundle"}};
  expect_rejected(r, error_kind::invalid_argument, "does not match its digest");
}

TEST_F(Validate, RejectsBundleTargetWithDotDot) {
  auto r = env.request();
  ASSERT_TRUE(make_dirs(env.root / "bundle", 0755));
  r.bundles = {{env.root / "bundle", *tree_digest(env.root / "bundle"), "/evalbox/../etc"}};
  expect_rejected(r, error_kind::invalid_argument, "bundle target");
}

TEST_F(Validate, RejectsBundleTargetThroughWorkspaceSymlink) {
  auto r = env.request();
  ASSERT_TRUE(make_dirs(env.root / "bundle", 0755));
  ASSERT_EQ(::symlink("/etc", (env.source / "etc-link").c_str()), 0);
  r.bundles = {
      {env.root / "bundle", *tree_digest(env.root / "bundle"), "/workspace/etc-link/tool"}};
  expect_rejected(r, error_kind::invalid_argument, "symlink");
}

TEST_F(Validate, RejectsBundleSourceInsideProtectedRoot) {
  auto r = env.request();
  ASSERT_TRUE(make_dirs(env.root / "protected" / "b", 0755));
  r.bundles = {
      {env.root / "protected" / "b", *tree_digest(env.root / "protected" / "b"), "/evalbox/b"}};
  expect_rejected(r, error_kind::permission, "protected root");
}

TEST_F(Validate, RejectsReadonlyPathExposingProtectedRoot) {
  auto r = env.request();
  r.readonly_paths = {env.root};
  expect_rejected(r, error_kind::permission, "would expose");
}

TEST_F(Validate, RejectsZeroLimit) {
  auto r = env.request();
  r.limits.memory_bytes = 0;
  expect_rejected(r, error_kind::invalid_argument, "limit memory");
}

TEST_F(Validate, RejectsAbsurdLimit) {
  auto r = env.request();
  r.limits.pids = 10'000'000;
  expect_rejected(r, error_kind::invalid_argument, "limit pids");
}

TEST_F(Validate, RejectsHostNetworkWithoutOptIn) {
  auto r = env.request();
  r.network.mode = network_mode::host;
  expect_rejected(r, error_kind::invalid_argument, "unsafe_host_network");
}

TEST_F(Validate, RejectsMalformedAllowEntry) {
  auto r = env.request();
  r.network.mode = network_mode::allow;
  r.network.allow = {"api.example.com:99999"};
  expect_rejected(r, error_kind::invalid_argument, "allow entry");
}

TEST(AllowEntry, AcceptsHostPortAndBracketedV6) {
  EXPECT_TRUE(valid_allow_entry("api.openai.com:443"));
  EXPECT_TRUE(valid_allow_entry("127.0.0.1:8080"));
  EXPECT_TRUE(valid_allow_entry("[::1]:8080"));
  EXPECT_FALSE(valid_allow_entry("api.openai.com"));
  EXPECT_FALSE(valid_allow_entry(":443"));
  EXPECT_FALSE(valid_allow_entry("host:0"));
  EXPECT_FALSE(valid_allow_entry("ho st:80"));
}

}  // namespace
}  // namespace evalbox::sandbox
