// The store's guarantees: idempotent imports that do not read layers again, one unpack per
// layer however many threads or processes ask, nothing a crash leaves mistaken for a finished
// layer, shared base layers stored once, gc least-recently-used first and never under a run,
// and the same image from every transport.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <tuple>

#include <gtest/gtest.h>

#include "base/digest.h"
#include "base/json.h"
#include "tests/sandbox/image/image_test_support.h"

namespace evalbox::testing::image {
namespace {

namespace fs = std::filesystem;

class Store : public ::testing::Test {
 protected:
  img::store open() {
    auto s = img::store::open(test_store_options(state()));
    EXPECT_TRUE(s) << s.error().message;
    return std::move(*s);
  }
  fs::path state() const { return tmp_.path() / "state"; }
  fs::path layers_dir() const { return state() / "images/layers"; }
  std::string layout(const std::string& name, const std::vector<layer>& layers) {
    write_oci_layout(tmp_.path() / name, layers);
    return "oci:" + (tmp_.path() / name).string();
  }
  std::vector<std::string> finished_layers() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(layers_dir()))
      if (is_sha256_hex(e.path().filename().string())) out.push_back(e.path().filename());
    std::sort(out.begin(), out.end());
    return out;
  }
  std::vector<std::string> temporaries() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(layers_dir()))
      if (e.path().filename().string().starts_with(".")) out.push_back(e.path().filename());
    return out;
  }
  temp_dir tmp_{"evalbox-image-store"};
};

layer base_layer() {
  return make_layer(
      {dir("etc"), file("etc/os-release", "ID=base\n"), file("bin/tool", "elf", 0755)});
}

TEST_F(Store, SecondImportReadsNoLayerAgain) {
  auto s = open();
  auto ref = layout("img", {base_layer(), make_layer({file("app", "v1")})});
  auto first = s.import(ref, {});
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(first->layers_unpacked, 2u);
  // Damage the layer blobs: a second import that read them would now fail.
  for (const auto& l : first->image.layers)
    ASSERT_TRUE(write_file(tmp_.path() / "img/blobs/sha256" / l.digest.substr(7), "garbage"));
  auto second = s.import(ref, {});
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_EQ(second->layers_unpacked, 0u);
  EXPECT_EQ(second->layers_present, 2u);
  EXPECT_EQ(second->image.id, first->image.id);
}

TEST_F(Store, LowerDirsAreTopMostFirst) {
  auto s = open();
  auto r = s.import(layout("img", {base_layer(), make_layer({file("app", "v1")})}), {});
  ASSERT_TRUE(r) << r.error().message;
  auto lowers = r->image.lower_dirs();
  ASSERT_EQ(lowers.size(), 2u);
  EXPECT_TRUE(fs::exists(lowers[0] / "app"));
  EXPECT_TRUE(fs::exists(lowers[1] / "etc/os-release"));
}

TEST_F(Store, TwoImagesSharingABaseLayerStoreItOnce) {
  auto s = open();
  auto a = s.import(layout("a", {base_layer(), make_layer({file("app", "a")})}), {});
  auto b = s.import(layout("b", {base_layer(), make_layer({file("app", "b")})}), {});
  ASSERT_TRUE(a && b);
  EXPECT_EQ(b->layers_present, 1u);
  EXPECT_EQ(b->layers_unpacked, 1u);
  EXPECT_EQ(finished_layers().size(), 3u);
  EXPECT_EQ(a->image.layers[0].dir, b->image.layers[0].dir);
  // Removing one keeps the shared layer for the other.
  ASSERT_TRUE(s.remove(a->image.id));
  EXPECT_EQ(finished_layers().size(), 2u);
  EXPECT_TRUE(fs::exists(b->image.layers[0].dir / "etc/os-release"));
  ASSERT_TRUE(s.use(b->image.id));
}

TEST_F(Store, ConcurrentThreadsUnpackEachLayerOnce) {
  auto ref = layout("img", {base_layer(), make_layer({file("big", std::string(4u << 20, 'x'))}),
                            make_layer({file("app", "v1")})});
  std::atomic<size_t> unpacked{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      auto s = open();
      auto r = s.import(ref, {});
      if (!r) {
        ++failures;
        return;
      }
      unpacked += r->layers_unpacked;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(unpacked.load(), 3u);
  EXPECT_EQ(finished_layers().size(), 3u);
  EXPECT_TRUE(temporaries().empty());
}

TEST_F(Store, ConcurrentProcessesUnpackEachLayerOnce) {
  auto ref = layout("img", {base_layer(), make_layer({file("big", std::string(4u << 20, 'y'))}),
                            make_layer({file("app", "v2")})});
  open();  // the store exists before the children race
  std::vector<pid_t> children;
  for (int i = 0; i < 3; ++i) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto s = img::store::open(test_store_options(state()));
      auto r = s ? s->import(ref, {}) : std::unexpected(s.error());
      ::_exit(r ? static_cast<int>(r->layers_unpacked) : 100);
    }
    children.push_back(pid);
  }
  int total = 0;
  for (pid_t pid : children) {
    int st = 0;
    ASSERT_EQ(::waitpid(pid, &st, 0), pid);
    ASSERT_TRUE(WIFEXITED(st));
    ASSERT_NE(WEXITSTATUS(st), 100) << "an import failed";
    total += WEXITSTATUS(st);
  }
  EXPECT_EQ(total, 3);
  EXPECT_EQ(finished_layers().size(), 3u);
}

TEST_F(Store, KilledMidUnpackLeavesNothingMistakenForALayer) {
  // 24 MiB of incompressible content: progress is reported every 8 MiB of blob read.
  std::string noise;
  for (int i = 0; noise.size() < (24u << 20); ++i) noise += sha256_hex(std::to_string(i));
  auto ref = layout("img", {make_layer({file("noise", noise)})});
  open();
  int pipefd[2];
  ASSERT_EQ(::pipe(pipefd), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(pipefd[0]);
    auto s = img::store::open(test_store_options(state()));
    img::import_options o;
    o.progress = [&](const img::import_event& e) {
      if (e.what == img::import_event::kind::layer_progress) {
        (void)!::write(pipefd[1], "m", 1);
        ::pause();  // mid-unpack: wait for the SIGKILL
      }
    };
    if (s) (void)s->import(ref, {}, o);
    ::_exit(1);
  }
  ::close(pipefd[1]);
  char c = 0;
  ASSERT_EQ(::read(pipefd[0], &c, 1), 1) << "the child never got mid-unpack";
  ::close(pipefd[0]);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  EXPECT_TRUE(finished_layers().empty());
  EXPECT_EQ(temporaries().size(), 1u) << "the killed unpack's temporary";

  auto s = open();
  auto r = s.import(ref, {});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->layers_unpacked, 1u);
  EXPECT_EQ(*read_file(r->image.layers[0].dir / "noise", 64u << 20), noise);
  auto gc = s.gc(std::nullopt);
  ASSERT_TRUE(gc) << gc.error().message;
  EXPECT_EQ(gc->temporaries_removed, 1);
  EXPECT_TRUE(temporaries().empty());
  EXPECT_EQ(finished_layers().size(), 1u);
}

TEST_F(Store, CancelledImportKeepsNoPartialLayer) {
  std::string noise;
  for (int i = 0; noise.size() < (20u << 20); ++i) noise += sha256_hex(std::to_string(i));
  auto s = open();
  std::atomic<bool> cancel{false};
  img::import_options o;
  o.cancel = &cancel;
  o.progress = [&](const img::import_event& e) {
    if (e.what == img::import_event::kind::layer_progress) cancel = true;
  };
  auto r = s.import(layout("img", {make_layer({file("noise", noise)})}), {}, o);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, error_kind::cancelled);
  EXPECT_TRUE(finished_layers().empty());
  EXPECT_TRUE(temporaries().empty());
}

TEST_F(Store, GcRemovesLeastRecentlyUsedImagesFirst) {
  auto s = open();
  std::vector<img::image_info> images;
  for (const char* name : {"old", "mid", "new"}) {
    auto r = s.import(layout(name, {make_layer({file(name, std::string(100000, name[0]))})}), {});
    ASSERT_TRUE(r) << r.error().message;
    images.push_back(r->image);
  }
  // Last use an hour apart: old, then mid, then new.
  for (size_t i = 0; i < images.size(); ++i) {
    fs::path used = state() / "images/records" / (images[i].id.substr(7) + ".used");
    struct timespec t[2] = {{static_cast<time_t>(1'700'000'000 + 3600 * i), 0},
                            {static_cast<time_t>(1'700'000'000 + 3600 * i), 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, used.c_str(), t, 0), 0);
  }
  auto gc = s.gc(250000);  // room for two
  ASSERT_TRUE(gc) << gc.error().message;
  EXPECT_EQ(gc->images_removed, 1);
  EXPECT_EQ(gc->layers_removed, 1);
  EXPECT_FALSE(s.lookup(images[0].id));
  EXPECT_TRUE(s.lookup(images[1].id));
  EXPECT_TRUE(s.lookup(images[2].id));
  EXPECT_LE(gc->bytes_after, 250000u);
}

TEST_F(Store, GcAndRmNeverRemoveAnImageARunHolds) {
  auto s = open();
  auto held_ref = layout("held", {make_layer({file("held", std::string(100000, 'h'))})});
  auto held = s.acquire(held_ref, {});
  ASSERT_TRUE(held) << held.error().message;
  auto other = s.import(layout("other", {make_layer({file("other", "o")})}), {});
  ASSERT_TRUE(other);
  auto rm = s.remove(held->image().id);
  ASSERT_FALSE(rm);
  EXPECT_EQ(rm.error().kind, error_kind::busy);
  auto gc = s.gc(0);
  ASSERT_TRUE(gc) << gc.error().message;
  EXPECT_EQ(gc->images_in_use, 1);
  EXPECT_EQ(gc->images_removed, 1);
  EXPECT_TRUE(fs::exists(held->lower_dirs().at(0) / "held"));
  held->release();
  auto again = s.gc(0);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->images_removed, 1);
  EXPECT_TRUE(finished_layers().empty());
}

// A run's hold on an image is a lock on each layer, which lives as long as any copy of its fd:
// released while a child between fork and exec holds one (another thread starting a
// program), the image is free for `image rm` at once, not when that child execs.
TEST_F(Store, AnImageReleasedWhileAForkedChildHoldsACopyIsFreeAtOnce) {
  auto s = open();
  auto held = s.acquire(layout("held", {make_layer({file("held", "h")})}), {});
  ASSERT_TRUE(held) << held.error().message;
  const std::string id = held->image().id;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // holds the layers' lock descriptions (inherited) for 500 ms
    ::usleep(500000);
    ::_exit(0);
  }
  held->release();
  auto rm = s.remove(id);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_TRUE(rm) << rm.error().message;
}

TEST_F(Store, GcRemovesLayersNoImageNames) {
  auto s = open();
  auto r = s.import(layout("img", {base_layer()}), {});
  ASSERT_TRUE(r);
  fs::remove(state() / "images/records" / (r->image.id.substr(7) + ".json"));
  auto gc = s.gc(std::nullopt);
  ASSERT_TRUE(gc) << gc.error().message;
  EXPECT_EQ(gc->layers_removed, 1);
  EXPECT_TRUE(finished_layers().empty());
  EXPECT_TRUE(fs::is_empty(state() / "images/locks"));
}

TEST_F(Store, AStoreMadeForAnotherOwnerIsAClearError) {
  open();
  auto o = test_store_options(state());
  if (::geteuid() != 0) GTEST_SKIP() << "only root can name another owner";
  o.owner_uid = 61000;
  o.owner_gid = 61000;
  auto s = img::store::open(o);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("belongs to 60000:60000"), std::string::npos)
      << s.error().message;
  EXPECT_NE(s.error().message.find("EVALBOX_SANDBOX_UID"), std::string::npos);
}

// What the preparer parses when it first opens the store (preparer_options carries the texts
// from the edge): "" keeps a limit, a malformed value is an error naming its variable.
TEST_F(Store, LimitsParseTheirTextsAndNameTheVariableOfABadOne) {
  img::layer_limits base;
  base.max_bytes = 5;
  base.max_entries = 6;
  auto same = img::parse_limits("", "", base);
  ASSERT_TRUE(same) << same.error().message;
  EXPECT_EQ(same->max_bytes, 5u);
  EXPECT_EQ(same->max_entries, 6u);
  auto l = img::parse_limits("8GiB", "1000", base);
  ASSERT_TRUE(l) << l.error().message;
  EXPECT_EQ(l->max_bytes, 8ull << 30);
  EXPECT_EQ(l->max_entries, 1000u);
  for (auto [bytes, entries, named] : {std::tuple{"0", "", "EVALBOX_IMAGE_MAX_LAYER_BYTES"},
                                       std::tuple{"", "0", "EVALBOX_IMAGE_MAX_LAYER_ENTRIES"},
                                       std::tuple{"", "12x", "EVALBOX_IMAGE_MAX_LAYER_ENTRIES"}}) {
    auto bad = img::parse_limits(bytes, entries);
    ASSERT_FALSE(bad) << bytes << " " << entries;
    EXPECT_NE(bad.error().message.find(named), std::string::npos) << bad.error().message;
  }
}

TEST_F(Store, DockerArchiveWithManifestLastImportsLikeTheLayout) {
  auto layers = std::vector<layer>{make_layer({file("a", "1")}, "none"),
                                   make_layer({file("b", "2")}, "none")};
  auto s = open();
  auto oci = s.import(layout("img", layers), {});
  fs::path tar = tmp_.path() / "save.tar";
  write_docker_archive(tar, layers, "localhost/app:latest");
  auto docker = s.import("docker-archive:" + tar.string() + ":localhost/app:latest", {});
  ASSERT_TRUE(oci && docker) << (oci ? docker.error().message : oci.error().message);
  EXPECT_EQ(docker->layers_present, 2u);
  ASSERT_EQ(docker->image.layers.size(), 2u);
  EXPECT_EQ(docker->image.layers[1].diff_id, oci->image.layers[1].diff_id);
  auto wrong = s.import("docker-archive:" + tar.string() + ":localhost/app:v2", {});
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.error().message.find("localhost/app:latest"), std::string::npos);
}

TEST_F(Store, EveryTransportGivesTheBusyboxImageTheSameLayers) {
  const fs::path bb = made_image("busybox");
  std::vector<std::string> refs = {"oci:" + (bb / "oci").string() + ":latest",
                                   "oci-archive:" + (bb / "busybox.oci.tar").string(),
                                   "docker-archive:" + (bb / "busybox.docker.tar").string()};
  // Each into a store of its own (every layer unpacked from that transport), then all three
  // into one (the later ones find every layer present).
  std::optional<img::image_info> first;
  for (size_t k = 0; k < refs.size(); ++k) {
    auto own = img::store::open(test_store_options(tmp_.path() / ("own" + std::to_string(k))));
    ASSERT_TRUE(own) << own.error().message;
    auto r = own->import(refs[k], {});
    ASSERT_TRUE(r) << refs[k] << ": " << r.error().message;
    EXPECT_EQ(r->layers_unpacked, 2u) << refs[k];
    auto os_release = read_file(r->image.layers[0].dir / "etc/os-release");
    ASSERT_TRUE(os_release) << refs[k];
    EXPECT_NE(os_release->find("evalbox test busybox"), std::string::npos);
    EXPECT_EQ(fs::read_symlink(r->image.layers[0].dir / "bin/sh"), "busybox") << refs[k];
    EXPECT_TRUE(fs::exists(fs::symlink_status(r->image.layers[1].dir / "etc/motd"))) << refs[k];
    if (!first) {
      first = r->image;
      continue;
    }
    EXPECT_EQ(r->image.id, first->id) << refs[k];
    ASSERT_EQ(r->image.layers.size(), first->layers.size()) << refs[k];
    for (size_t i = 0; i < first->layers.size(); ++i) {
      EXPECT_EQ(r->image.layers[i].diff_id, first->layers[i].diff_id) << refs[k];
      EXPECT_EQ(r->image.layers[i].entries, first->layers[i].entries) << refs[k];
      EXPECT_EQ(r->image.layers[i].bytes, first->layers[i].bytes) << refs[k];
    }
  }
  auto s = open();
  for (const auto& ref : refs) ASSERT_TRUE(s.import(ref, {})) << ref;
  auto listed = s.list();
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ(listed->front().references.size(), 3u);
  EXPECT_EQ(finished_layers().size(), 2u);
}

TEST_F(Store, RootfsDirectoryImportsAsOneLayer) {
  fs::path tree = tmp_.path() / "tree";
  ASSERT_TRUE(make_dirs(tree / "etc"));
  ASSERT_TRUE(write_file(tree / "etc/os-release", "ID=tree\n"));
  fs::create_symlink("etc/os-release", tree / "link");
  auto s = open();
  auto r = s.import("rootfs:" + tree.string(), {});
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->image.layers.size(), 1u);
  EXPECT_EQ(*read_file(r->image.layers[0].dir / "etc/os-release"), "ID=tree\n");
  EXPECT_EQ(fs::read_symlink(r->image.layers[0].dir / "link"), "etc/os-release");
  auto again = s.import("rootfs:" + tree.string(), {});
  ASSERT_TRUE(again);
  EXPECT_EQ(again->layers_unpacked, 0u);
}

TEST_F(Store, CopyFallbackFlattensTheLayersOntoOneTree) {
  // A host whose store can express no whiteout: each image becomes one tree, its layers
  // applied in order — deletions and opaque directories done, not marked.
  auto o = test_store_options(state());
  o.whiteout = sys::whiteout_form::copy;
  auto s = img::store::open(o);
  ASSERT_TRUE(s) << s.error().message;
  auto ref = layout(
      "img", {make_layer({dir("etc"), file("etc/os-release", "ID=base\n"), file("etc/motd", "gone"),
                          dir("opt/data"), file("opt/data/old", "hidden"), dir("opt/data/sub"),
                          file("opt/data/sub/deep", "hidden"), dir("ro", 0555), file("ro/a", "a"),
                          dir("was-dir"), file("was-dir/x", "x")}),
              make_layer({file("etc/.wh.motd", ""), file("opt/data/sub/mine", "kept"),
                          file("opt/data/.wh..wh..opq", ""), file("ro/b", "b"),
                          file("was-dir", "file now")},
                         "zstd")});
  auto r = s->import(ref, {});
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->image.layers.size(), 1u);
  EXPECT_EQ(r->image.layers[0].compression, "flattened");
  const fs::path root = r->image.layers[0].dir;
  EXPECT_EQ(*read_file(root / "etc/os-release"), "ID=base\n");
  EXPECT_FALSE(fs::exists(fs::symlink_status(root / "etc/motd")));
  EXPECT_FALSE(fs::exists(root / "opt/data/old"));
  EXPECT_FALSE(fs::exists(root / "opt/data/sub/deep"));
  EXPECT_EQ(*read_file(root / "opt/data/sub/mine"), "kept");
  EXPECT_EQ(*read_file(root / "ro/b"), "b");
  EXPECT_EQ(fs::status(root / "ro").permissions(), fs::perms(0555));
  EXPECT_EQ(*read_file(root / "was-dir"), "file now");
  // The chain id keys the tree: importing again finds it.
  auto again = s->import(ref, {});
  ASSERT_TRUE(again);
  EXPECT_EQ(again->layers_unpacked, 0u);
  EXPECT_EQ(again->image.layers[0].diff_id, r->image.layers[0].diff_id);
}

TEST_F(Store, CopyFallbackSkipsDeviceNodesOfEveryLayer) {
  auto o = test_store_options(state());
  o.whiteout = sys::whiteout_form::copy;
  auto s = img::store::open(o);
  ASSERT_TRUE(s) << s.error().message;
  auto ref = layout(
      "img",
      {make_layer({dir("dev"), file("dev/keep", "k"), {"dev/null", 'c', "", "", 0666, 1, 3}}),
       make_layer({{"dev/sda", 'b', "", "", 0660, 8, 0},
                   {"dev/zero", 'c', "", "", 0666, 1, 5},
                   file("dev/.wh.keep", "")},
                  "zstd")});
  auto r = s->import(ref, {});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->devices_skipped, 3u);
  ASSERT_EQ(r->image.layers.size(), 1u);
  EXPECT_EQ(r->image.layers[0].devices_skipped, 3u);
  const fs::path root = r->image.layers[0].dir;
  EXPECT_TRUE(fs::is_directory(root / "dev"));
  EXPECT_TRUE(fs::is_empty(root / "dev"));  // the whiteout deleted keep; no device was made
}

// The Debian test image keeps the device nodes mmdebstrap puts in /dev (tests/images/
// oci_layout.py), as base images made from a root filesystem tar do: they are skipped and
// counted, and the image is whole. (It runs: cli_sandbox_test, tests/integration/image_cli.sh.)
TEST_F(Store, DebianImageImportsWithPythonAndOsRelease) {
  const fs::path deb = made_image("debian");
  auto s = open();
  auto r = s.import("oci:" + (deb / "oci").string(), {});
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->image.layers.size(), 1u);
  EXPECT_EQ(r->image.layers[0].compression, "zstd");
  const fs::path root = r->image.layers[0].dir;
  auto os_release = read_file(root / "etc/os-release");
  ASSERT_TRUE(os_release);
  EXPECT_NE(os_release->find("bookworm"), std::string::npos);
  EXPECT_TRUE(fs::exists(fs::symlink_status(root / "usr/bin/python3")));
  EXPECT_TRUE(fs::exists(root / "usr/bin/git"));
  // mmdebstrap's /dev: console, full, null, ptmx, random, tty, urandom, zero.
  EXPECT_GE(r->devices_skipped, 8u);
  EXPECT_EQ(r->image.layers[0].devices_skipped, r->devices_skipped);
  EXPECT_TRUE(fs::is_directory(root / "dev"));
  for (const char* p : {"dev/null", "dev/console", "dev/zero", "dev/tty"})
    EXPECT_FALSE(fs::exists(fs::symlink_status(root / p))) << p;
  for (const auto& e : fs::recursive_directory_iterator(root))
    EXPECT_FALSE(fs::is_character_file(e.symlink_status()) || fs::is_block_file(e.symlink_status()))
        << e.path();
  auto meta = read_json_file(root.parent_path() / "layer.json");
  ASSERT_TRUE(meta);
  EXPECT_EQ((*meta)["devices_skipped"], r->devices_skipped);
}

}  // namespace
}  // namespace evalbox::testing::image
