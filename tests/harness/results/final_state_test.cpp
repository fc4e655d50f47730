// A run's kept final state (final_state.h): what is kept of a workspace compared with the
// fixture's (every kind of change; nothing unchanged), of a root's overlay layer (whiteouts,
// opaque directories), files stored once by content, the cap (nothing kept above it), and the
// way back: the manifest read and checked (hostile paths, types, digests refused) and written
// as a layer that holds exactly the changes (an object whose bytes changed is refused, a
// symlink in the manifest never leads a write out of the layer).
#include "harness/results/final_state.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <map>
#include <string>

#include "base/digest.h"
#include "base/fs.h"
#include "base/json.h"

namespace evalbox::harness {
namespace {

namespace fs = std::filesystem;

void put(const fs::path& p, std::string_view text, mode_t mode = 0644) {
  ASSERT_TRUE(make_dirs(p.parent_path()));
  ASSERT_TRUE(write_file(p, text, mode));
  ::chmod(p.c_str(), mode);
}

std::map<std::string, state_entry> by_path(const state_tree& t) {
  std::map<std::string, state_entry> out;
  for (const auto& e : t.entries) out[e.path] = e;
  return out;
}

// A base tree and a final tree that differs from it in every way a tree can.
struct two_trees {
  temp_dir tmp;
  fs::path base = tmp.path() / "base", final_ = tmp.path() / "final",
           results = tmp.path() / "results";
  std::vector<std::string> candidates;

  two_trees() {
    for (const auto& root : {base, final_}) {
      put(root / "same.txt", "unchanged");
      put(root / "edited.txt", "before");
      put(root / "doomed.txt", "bye");
      put(root / "tool.sh", "#!/bin/sh\n", 0644);
      put(root / "dir-to-file/inner.txt", "inside");
      put(root / "keep/deep/file.txt", "kept");
      fs::create_symlink("same.txt", root / "link");
    }
    fs::remove(final_ / "doomed.txt");
    put(final_ / "edited.txt", "after");
    ::chmod((final_ / "tool.sh").c_str(), 0755);
    fs::remove_all(final_ / "dir-to-file");
    put(final_ / "dir-to-file", "now a file");
    std::string binary("\0\x01\xff\xfe binary", 12);
    put(final_ / "new/nested/blob.bin", binary);
    fs::remove(final_ / "link");
    fs::create_symlink("/etc/passwd", final_ / "link");
    candidates = {"same.txt",   "edited.txt",         "doomed.txt",
                  "tool.sh",    "dir-to-file",        "dir-to-file/inner.txt",
                  "new",        "new/nested",         "new/nested/blob.bin",
                  "link",       "keep/deep/file.txt", "../outside",
                  "/etc/passwd"};
    EXPECT_TRUE(make_dirs(results / "runs" / "r1"));
  }
};

TEST(FinalState, KeepsEveryKindOfChangeAndNothingElse) {
  two_trees t;
  auto kept = keep_final_state(
      t.results, "r1", {{"workspace", "/workspace", t.final_, t.base, t.candidates}}, 1 << 20);
  ASSERT_TRUE(kept) << kept.error().message;
  EXPECT_EQ((*kept)["path"], "runs/r1/final-state.json");
  auto trees = read_final_state(t.results, "r1");
  ASSERT_TRUE(trees) << trees.error().message;
  ASSERT_EQ(trees->size(), 1u);
  auto e = by_path(trees->front());
  EXPECT_FALSE(e.count("same.txt"));
  EXPECT_FALSE(e.count("keep/deep/file.txt"));
  EXPECT_FALSE(e.count("../outside")) << "a candidate that is no relative path is ignored";
  EXPECT_FALSE(e.count("dir-to-file/inner.txt")) << "implied by dir-to-file's own entry";
  EXPECT_EQ(e.at("doomed.txt").type, state_entry::kind::deleted);
  EXPECT_EQ(e.at("edited.txt").type, state_entry::kind::file);
  EXPECT_EQ(e.at("edited.txt").digest, sha256_hex("after"));
  EXPECT_EQ(e.at("tool.sh").mode, 0755u);
  EXPECT_EQ(e.at("dir-to-file").type, state_entry::kind::file);
  EXPECT_EQ(e.at("new").type, state_entry::kind::directory);
  EXPECT_EQ(e.at("new/nested/blob.bin").size, 12u);
  EXPECT_EQ(e.at("link").type, state_entry::kind::symlink);
  EXPECT_EQ(e.at("link").target, "/etc/passwd") << "kept as text, never followed";
  // The object holds the bytes.
  const std::string d = e.at("new/nested/blob.bin").digest;
  auto obj = read_file(t.results / "objects/sha256" / d.substr(0, 2) / d.substr(2));
  ASSERT_TRUE(obj);
  EXPECT_EQ(*obj, std::string("\0\x01\xff\xfe binary", 12));
}

TEST(FinalState, IdenticalFilesOfTwoRunsAreStoredOnce) {
  two_trees t;
  ASSERT_TRUE(make_dirs(t.results / "runs" / "r2"));
  auto a = keep_final_state(t.results, "r1", {{"workspace", "/w", t.final_, t.base, t.candidates}},
                            1 << 20);
  auto b = keep_final_state(t.results, "r2", {{"workspace", "/w", t.final_, t.base, t.candidates}},
                            1 << 20);
  ASSERT_TRUE(a && b);
  EXPECT_GT((*a)["stored_bytes"].get<uint64_t>(), 0u);
  EXPECT_EQ((*b)["stored_bytes"], 0) << "the second run's files are all there already";
  EXPECT_EQ((*a)["bytes"], (*b)["bytes"]);
  // edited.txt, tool.sh (its mode changed: kept whole), dir-to-file and the blob.
  EXPECT_EQ(count_objects(t.results).objects, 4u);
}

TEST(FinalState, AboveTheCapNothingIsKept) {
  two_trees t;
  put(t.final_ / "big.bin", std::string(5000, 'x'));
  t.candidates.push_back("big.bin");
  auto kept = keep_final_state(t.results, "r1",
                               {{"workspace", "/w", t.final_, t.base, t.candidates}}, 4096);
  ASSERT_TRUE(kept) << kept.error().message;
  EXPECT_TRUE((*kept)["path"].is_null());
  EXPECT_NE((*kept)["reason"].get<std::string>().find("none kept"), std::string::npos);
  EXPECT_FALSE(fs::exists(t.results / "runs/r1/final-state.json"));
  EXPECT_EQ(count_objects(t.results).objects, 0u) << "no object of a state not kept";
  auto back = read_final_state(t.results, "r1");
  ASSERT_FALSE(back);
  EXPECT_EQ(back.error().kind, error_kind::not_found);
}

TEST(FinalState, ALayerIsKeptWholeWithItsWhiteoutsAndOpaqueDirectories) {
  if (::geteuid() != 0) GTEST_SKIP() << "whiteouts are device nodes: root makes them";
  temp_dir tmp;
  const fs::path upper = tmp.path() / "upper", results = tmp.path() / "results";
  put(upper / "usr/local/bin/tool", "#!/bin/sh\n", 0755);
  ASSERT_EQ(::mknod((upper / "gone").c_str(), S_IFCHR | 0000, makedev(0, 0)), 0);
  ASSERT_TRUE(make_dirs(upper / "opaque"));
  ASSERT_EQ(::setxattr((upper / "opaque").c_str(), "user.overlay.opaque", "y", 1, 0), 0);
  ASSERT_EQ(::mkfifo((upper / "fifo").c_str(), 0600), 0);
  ASSERT_TRUE(make_dirs(results / "runs" / "r1"));
  auto kept = keep_final_state(results, "r1", {{"root", "/", upper, {}, {}}}, 1 << 20);
  ASSERT_TRUE(kept) << kept.error().message;
  EXPECT_EQ((*kept)["skipped"], json::array({"root: fifo"}));
  auto trees = read_final_state(results, "r1");
  ASSERT_TRUE(trees) << trees.error().message;
  auto e = by_path(trees->front());
  EXPECT_EQ(e.at("gone").type, state_entry::kind::deleted);
  EXPECT_TRUE(e.at("opaque").opaque);
  EXPECT_EQ(e.at("usr/local/bin/tool").mode, 0755u);
  EXPECT_EQ(e.at("usr").type, state_entry::kind::directory);

  // Back as a layer: the same entries, owned as asked.
  const fs::path layer = tmp.path() / "layer";
  ASSERT_TRUE(write_state_layer(results, trees->front(), {}, layer, 1234, 1234));
  struct stat st {};
  ASSERT_EQ(::lstat((layer / "gone").c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0));
  char v[2] = {};
  EXPECT_EQ(::getxattr((layer / "opaque").c_str(), "user.overlay.opaque", v, sizeof v), 1);
  ASSERT_EQ(::lstat((layer / "usr/local/bin/tool").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  EXPECT_EQ(st.st_uid, 1234u);
  EXPECT_EQ(*read_file(layer / "usr/local/bin/tool"), "#!/bin/sh\n");
}

TEST(FinalState, AWorkspaceLayerHoldsTheChangesAndItsParentsTakeTheBasesModes) {
  if (::geteuid() != 0) GTEST_SKIP() << "whiteouts are device nodes: root makes them";
  two_trees t;
  ::chmod((t.base / "keep").c_str(), 0700);
  put(t.final_ / "keep/deep/added.txt", "new");
  t.candidates.push_back("keep/deep/added.txt");
  ASSERT_TRUE(keep_final_state(t.results, "r1",
                               {{"workspace", "/w", t.final_, t.base, t.candidates}}, 1 << 20));
  auto trees = read_final_state(t.results, "r1");
  ASSERT_TRUE(trees);
  const fs::path layer = t.tmp.path() / "layer";
  ASSERT_TRUE(write_state_layer(t.results, trees->front(), t.base, layer, 0, 0));
  struct stat st {};
  ASSERT_EQ(::stat((layer / "keep").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u) << "a parent the layer needs keeps the base's mode";
  EXPECT_EQ(*read_file(layer / "keep/deep/added.txt"), "new");
  EXPECT_FALSE(fs::exists(layer / "same.txt")) << "an unchanged file stays in the base";
  ASSERT_EQ(::lstat((layer / "doomed.txt").c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << "a deletion is a whiteout";
  EXPECT_EQ(fs::read_symlink(layer / "link"), "/etc/passwd");
  EXPECT_EQ(*read_file(layer / "dir-to-file"), "now a file");
}

// The manifest of `r1` rewritten by `edit`.
void edit_manifest(const fs::path& results, const std::function<void(json&)>& edit) {
  const fs::path file = results / "runs/r1/final-state.json";
  auto j = parse_json(*read_file(file), "m");
  ASSERT_TRUE(j);
  edit(*j);
  ASSERT_TRUE(write_file(file, j->dump()));
}

TEST(FinalState, AHostileManifestIsRefusedBeforeAnythingIsWritten) {
  two_trees t;
  ASSERT_TRUE(keep_final_state(t.results, "r1",
                               {{"workspace", "/w", t.final_, t.base, t.candidates}}, 1 << 20));
  const std::string good = *read_file(t.results / "runs/r1/final-state.json");
  const json file = {{"path", "x"},
                     {"type", "file"},
                     {"mode", 420},
                     {"size", 1},
                     {"digest", std::string(64, 'a')}};
  struct hostile {
    const char* why;
    std::function<void(json&)> edit;
    const char* says;
  };
  const hostile cases[] = {
      {"..",
       [&](json& m) {
         json e = file;
         e["path"] = "a/../../x";
         m["trees"][0]["entries"].push_back(e);
       },
       "the path"},
      {"absolute",
       [&](json& m) {
         json e = file;
         e["path"] = "/etc/x";
         m["trees"][0]["entries"].push_back(e);
       },
       "the path"},
      {"empty component",
       [&](json& m) {
         json e = file;
         e["path"] = "a//b";
         m["trees"][0]["entries"].push_back(e);
       },
       "the path"},
      {"twice",
       [&](json& m) {
         json e = file;
         e["path"] = "edited.txt";
         m["trees"][0]["entries"].push_back(e);
       },
       "twice"},
      {"bad digest",
       [&](json& m) {
         json e = file;
         e["digest"] = "../../etc/passwd";
         m["trees"][0]["entries"].push_back(e);
       },
       "digest"},
      {"setuid",
       [&](json& m) {
         json e = file;
         e["mode"] = 04755;
         m["trees"][0]["entries"].push_back(e);
       },
       "mode"},
      {"type",
       [&](json& m) {
         json e = file;
         e["type"] = "device";
         m["trees"][0]["entries"].push_back(e);
       },
       "type"},
      {"tree name", [&](json& m) { m["trees"][0]["name"] = "home"; }, "a tree named"},
      {"schema", [&](json& m) { m["schema"] = "evalbox.final-state.v9"; }, "schema"},
  };
  for (const auto& c : cases) {
    ASSERT_TRUE(write_file(t.results / "runs/r1/final-state.json", good));
    edit_manifest(t.results, c.edit);
    auto back = read_final_state(t.results, "r1");
    ASSERT_FALSE(back) << c.why;
    EXPECT_EQ(back.error().kind, error_kind::invalid_argument) << c.why;
    EXPECT_NE(back.error().message.find(c.says), std::string::npos)
        << c.why << ": " << back.error().message;
  }
}

TEST(FinalState, ALinkInTheManifestNeverLeadsAWriteOutOfTheLayer) {
  temp_dir tmp;
  const fs::path results = tmp.path() / "results", outside = tmp.path() / "outside";
  ASSERT_TRUE(make_dirs(outside));
  ASSERT_TRUE(make_dirs(results / "objects/sha256" / sha256_hex("evil").substr(0, 2)));
  ASSERT_TRUE(write_file(
      results / "objects/sha256" / sha256_hex("evil").substr(0, 2) / sha256_hex("evil").substr(2),
      "evil"));
  state_tree tree{"workspace", "/workspace", {}};
  state_entry link;
  link.path = "a";
  link.type = state_entry::kind::symlink;
  link.target = outside.string();
  state_entry through;
  through.path = "a/planted";
  through.type = state_entry::kind::file;
  through.mode = 0644;
  through.digest = sha256_hex("evil");
  tree.entries = {link, through};
  auto w = write_state_layer(results, tree, {}, tmp.path() / "layer", ::getuid(), ::getgid());
  ASSERT_FALSE(w);
  EXPECT_NE(w.error().message.find("not a directory of the state"), std::string::npos)
      << w.error().message;
  EXPECT_FALSE(fs::exists(outside / "planted"));
}

TEST(FinalState, AnObjectWhoseBytesChangedIsRefused) {
  two_trees t;
  ASSERT_TRUE(keep_final_state(t.results, "r1",
                               {{"workspace", "/w", t.final_, t.base, {"edited.txt"}}}, 1 << 20));
  const std::string d = sha256_hex("after");
  const fs::path obj = t.results / "objects/sha256" / d.substr(0, 2) / d.substr(2);
  ::chmod(obj.c_str(), 0644);
  ASSERT_TRUE(write_file(obj, "AFTER"));
  auto trees = read_final_state(t.results, "r1");
  ASSERT_TRUE(trees);
  auto w = write_state_layer(t.results, trees->front(), t.base, t.tmp.path() / "layer", ::getuid(),
                             ::getgid());
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().kind, error_kind::invalid_argument);
  EXPECT_NE(w.error().message.find("does not hold the bytes of its digest"), std::string::npos);
  fs::remove(obj);
  fs::remove_all(t.tmp.path() / "layer");
  w = write_state_layer(t.results, trees->front(), t.base, t.tmp.path() / "layer", ::getuid(),
                        ::getgid());
  ASSERT_FALSE(w);
  EXPECT_NE(w.error().message.find("is missing"), std::string::npos) << w.error().message;
}

}  // namespace
}  // namespace evalbox::harness
