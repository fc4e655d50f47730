// An image as the sandbox's root, over real prepared sessions: the root is the image's (its
// files, its whiteouts, not the host's), writable for the run and gone with it, counted against
// the run's disk; /etc's run files generated over the image's; a workspace taken from a
// directory of the image; programs found on the sandbox's own PATH; the record names the image.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "base/fs.h"
#include "sandbox/launch/launcher.h"
#include "tests/support/isolation.h"
#include "tests/support/prep_env.h"
#include "tests/support/test_images.h"

namespace evalbox::sandbox {
namespace {

namespace fs = std::filesystem;
using evalbox::testing::prep_env;

class ImageRoot : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto& h = evalbox::testing::host();
    EVALBOX_REQUIRE_FEATURE(h.user_namespaces && h.userns_overlay,
                            "user namespaces and overlayfs inside them (userxattr)");
    ref_ = evalbox::testing::test_image_ref("busybox");
    EVALBOX_REQUIRE_FEATURE(!ref_.empty(), "the busybox test image (tests/images/make-images)");
    prep_.emplace(env_.options());
    auto img = prep_->resolve_image(ref_, {});
    ASSERT_TRUE(img) << img.error().message;
    image_ = *img;
  }

  session_request request(const std::string& tag) const {
    auto r = env_.request(tag);
    r.image = image_root{image_.id, image_.reference, image_.manifest_digest};
    r.env = {{"PATH", "/bin"}, {"HOME", "/home/agent"}};
    return r;
  }

  // Runs `script` with the image's sh; returns its output (stdout and stderr).
  std::string sh(prepared_session& s, const std::string& script, run_record* rec_out = nullptr) {
    launch_options o;
    o.argv = {"/bin/sh", "-c", script};
    o.stdout_path = out_.path() / "out";
    o.stderr_path = out_.path() / "out";
    auto rec = launch_in(s, o);
    EXPECT_TRUE(rec) << rec.error().message;
    if (!rec) return "";
    EXPECT_EQ(rec->error, "");
    if (rec_out) *rec_out = *rec;
    return read_file(out_.path() / "out").value_or("");
  }

  prep_env env_;
  temp_dir out_{"evalbox-image-out"};
  std::optional<preparer> prep_;
  image_summary image_;
  std::string ref_;
};

TEST_F(ImageRoot, TheRootIsTheImagesWithItsWhiteoutsAndNotTheHosts) {
  ASSERT_TRUE(fs::exists("/etc/debian_version")) << "the host is expected to be Debian";
  auto s = prep_->prepare(request("img-root"));
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(sh(*s,
               "cat /etc/os-release | grep ^ID=; "
               "test -e /etc/debian_version && echo host-file-visible; "
               "test -e /etc/motd && echo whiteout-ignored; "
               "ls /opt/data; pwd; echo $EVALBOX_IMAGE"),
            "ID=evalbox-busybox\nnew\n/workspace\n\n");
}

TEST_F(ImageRoot, WritesToTheRootLastForTheSessionOnlyAndLeaveTheLayersAlone) {
  auto s = prep_->prepare(request("img-write"));
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(sh(*s, "echo installed > /bin/marker && rm /etc/passwd && echo ok"), "ok\n");
  // A later launch of the same run (grading is one) sees the run's root as it was left.
  EXPECT_EQ(sh(*s, "cat /bin/marker; test -e /etc/passwd || echo passwd-gone"),
            "installed\npasswd-gone\n");
  ASSERT_TRUE(s->close());
  // Another run starts from the image again; the store's layers never changed.
  auto t = prep_->prepare(request("img-write2"));
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(sh(*t, "test -e /bin/marker || echo clean; test -e /etc/passwd && echo passwd"),
            "clean\npasswd\n");
  for (const auto& l : t->image()->lowers) EXPECT_FALSE(fs::exists(l / "bin/marker")) << l;
}

TEST_F(ImageRoot, WritesToTheRootCountAgainstTheDiskLimit) {
  EVALBOX_REQUIRE_FEATURE(::geteuid() == 0, "root (the run's disk is a size-limited tmpfs)");
  auto req = request("img-quota");
  req.limits.disk_bytes = 8ull << 20;
  auto s = prep_->prepare(req);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(sh(*s, "dd if=/dev/zero of=/bin/big bs=1M count=16 2>/dev/null || echo refused"),
            "refused\n");
}

TEST_F(ImageRoot, EtcHostsAndResolvConfAreTheRunsAndReadOnly) {
  auto s = prep_->prepare(request("img-etc"));
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(sh(*s,
               "grep -c '^127.0.0.1 localhost evalbox$' /etc/hosts; head -c 9 /etc/resolv.conf; "
               "echo; cat /etc/hostname; (echo x >> /etc/hosts) 2>/dev/null || echo read-only"),
            "1\n# evalbox\nevalbox\nread-only\n");
}

TEST_F(ImageRoot, AWorkspaceFromAnImageDirectoryIsItsMergedContentCopyOnWrite) {
  auto req = request("img-ws");
  req.workspace.source.clear();
  req.workspace.image_dir = "/opt/data";
  req.workspace.target = "/opt/data";
  auto s = prep_->prepare(req);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->workspace_target(), "/opt/data");
  auto before = s->snapshot_workspace();
  ASSERT_TRUE(before) << before.error().message;
  // The opaque directory of layer 2 shows only its own file; the agent starts there.
  EXPECT_EQ(sh(*s, "pwd; ls; echo mine > made.txt; rm new"), "/opt/data\nnew\n");
  EXPECT_EQ(read_file(s->workspace_dir() / "made.txt").value_or(""), "mine\n");
  auto changed = s->changed_paths(*before);
  ASSERT_TRUE(changed) << changed.error().message;
  EXPECT_EQ(*changed, (std::vector<std::string>{"made.txt", "new"}));
  for (const auto& l : s->image()->lowers) EXPECT_FALSE(fs::exists(l / "opt/data/made.txt"));
}

TEST_F(ImageRoot, AnImageWithoutTheDirectoryGivesAnEmptyWorkspace) {
  auto req = request("img-ws-empty");
  req.workspace.source.clear();
  req.workspace.image_dir = "/app";
  req.workspace.target = "/app";
  auto s = prep_->prepare(req);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(sh(*s, "pwd; ls -A | wc -l"), "/app\n0\n");
}

TEST_F(ImageRoot, ABareProgramNameIsFoundOnTheSandboxsPath) {
  auto s = prep_->prepare(request("img-path"));
  ASSERT_TRUE(s) << s.error().message;
  launch_options o;
  o.argv = {"echo", "found"};
  o.stdout_path = out_.path() / "out";
  auto rec = launch_in(*s, o);
  ASSERT_TRUE(rec) << rec.error().message;
  EXPECT_EQ(rec->error, "");
  EXPECT_EQ(read_file(out_.path() / "out").value_or(""), "found\n");

  o.argv = {"no-such-program"};
  rec = launch_in(*s, o);
  ASSERT_TRUE(rec) << rec.error().message;
  EXPECT_EQ(rec->error_step, "execve no-such-program (searched PATH=/bin)");
  EXPECT_NE(rec->error.find("ENOENT"), std::string::npos) << rec->error;
}

TEST_F(ImageRoot, TheRecordNamesTheImageAndItsLayers) {
  auto s = prep_->prepare(request("img-record"));
  ASSERT_TRUE(s) << s.error().message;
  run_record rec;
  sh(*s, "true", &rec);
  const json& root = rec.mechanisms["root"];
  EXPECT_EQ(root["kind"], "image");
  EXPECT_EQ(root["image"], image_.id);
  EXPECT_EQ(root["manifest_digest"], image_.manifest_digest);
  EXPECT_EQ(root["layers"].get<std::vector<std::string>>(), image_.layers);
  EXPECT_EQ(image_.layers.size(), 2u);
  // And without an image, the host's allow-list.
  auto h = prep_->prepare(env_.request("img-host"));
  ASSERT_TRUE(h) << h.error().message;
  sh(*h, "true", &rec);
  EXPECT_EQ(rec.mechanisms["root"]["kind"], "host");
}

TEST_F(ImageRoot, TheImagesEnvIsWhatTheRequestSaysNothingMore) {
  // The sandbox applies exactly the request's environment: composing it from the image's Env
  // is the caller's (the harness's) job, so that nothing is inherited by accident.
  auto s = prep_->prepare(request("img-env"));
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(sh(*s, "echo \"[$EVALBOX_IMAGE]\""), "[]\n");
  EXPECT_EQ(image_.env, (std::vector<std::string>{"PATH=/bin", "EVALBOX_IMAGE=busybox"}));
  EXPECT_EQ(image_.working_dir, "/root");
}

TEST_F(ImageRoot, ASecondResolveReadsNoLayerAgain) {
  auto again = prep_->resolve_image(ref_, {});
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->id, image_.id);
  EXPECT_EQ(again->layers_unpacked, 0u);
}

}  // namespace
}  // namespace evalbox::sandbox
