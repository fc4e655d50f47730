// `evalbox gc` without a state root: --max-size's validation, the evalbox.gc.v1 shape and the
// text summary of a report made by hand, and when a collection counts as clean.
#include "harness/runner/gc.h"

#include <gtest/gtest.h>

#include "base/json.h"
#include "base/units.h"

namespace evalbox::harness {
namespace {

TEST(GcMaxSize, OnlyASizeAndOnlyWithImages) {
  auto none = parse_gc_max_size("", false);
  ASSERT_TRUE(none);
  EXPECT_EQ(*none, std::nullopt);
  auto size = parse_gc_max_size("20GiB", true);
  ASSERT_TRUE(size);
  EXPECT_EQ(*size, 20ull << 30);
  auto lone = parse_gc_max_size("20GiB", false);
  ASSERT_FALSE(lone);
  EXPECT_EQ(lone.error().kind, error_kind::invalid_argument);
  EXPECT_EQ(lone.error().message, "--max-size 20GiB: needs --images");
  auto bad = parse_gc_max_size("lots", true);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind, error_kind::invalid_argument);
  EXPECT_TRUE(bad.error().message.starts_with("--max-size lots: ")) << bad.error().message;
}

gc_report bare() {
  gc_report r;
  r.state_root = "/var/lib/evalbox";
  r.runs.runs_reclaimed = 2;
  r.runs.mounts_unmounted = 5;
  r.runs.cgroups_removed = 3;
  r.git.temporaries_removed = 1;
  r.git.mirrors = 4;
  r.git.trees = 6;
  r.cache_leftovers = 2;
  return r;
}

gc_report full() {
  gc_report r = bare();
  r.runs.errors = {"run-1: EBUSY"};
  r.sessions = {3, 1, {"ses-1: EBUSY"}};
  r.git.errors = {"mirror x: EACCES"};
  r.cache_errors = {"caches: EACCES"};
  sandbox::image_collection_report images;
  images.images_removed = 1;
  images.layers_removed = 3;
  images.temporaries_removed = 2;
  images.images_in_use = 1;
  images.bytes_freed = 3ull << 20;
  images.bytes_after = 1ull << 30;
  images.errors = {"layer y: EIO"};
  r.images = images;
  r.kept = {{"results/a", 2, 2048, 7, 4096}};
  return r;
}

TEST(GcJson, WithoutImagesOrResults) {
  const json j = gc_json(bare());
  EXPECT_EQ(j, json::parse(R"({
    "schema": "evalbox.gc.v1", "state_root": "/var/lib/evalbox",
    "runs_reclaimed": 2, "mounts_unmounted": 5, "cgroups_removed": 3, "errors": [],
    "sessions": {"removed": 0, "stopped": 0, "errors": []},
    "git": {"temporaries_removed": 1, "mirrors": 4, "trees": 6, "errors": []},
    "caches": {"leftovers_removed": 2, "errors": []}
  })"))
      << j.dump(2);
}

TEST(GcJson, WithImagesAndResults) {
  const json j = gc_json(full());
  EXPECT_EQ(j, json::parse(R"({
    "schema": "evalbox.gc.v1", "state_root": "/var/lib/evalbox",
    "runs_reclaimed": 2, "mounts_unmounted": 5, "cgroups_removed": 3,
    "errors": ["run-1: EBUSY"],
    "sessions": {"removed": 3, "stopped": 1, "errors": ["ses-1: EBUSY"]},
    "git": {"temporaries_removed": 1, "mirrors": 4, "trees": 6, "errors": ["mirror x: EACCES"]},
    "caches": {"leftovers_removed": 2, "errors": ["caches: EACCES"]},
    "images": {"images_removed": 1, "layers_removed": 3, "temporaries_removed": 2,
               "images_in_use": 1, "bytes_freed": 3145728, "bytes_after": 1073741824,
               "errors": ["layer y: EIO"]},
    "kept_workspaces": [{"results": "results/a", "runs": 2, "bytes": 2048,
                         "final_state_objects": 7, "final_state_bytes": 4096}]
  })"))
      << j.dump(2);
}

TEST(GcText, OneLinePerPartErrorsIndented) {
  EXPECT_EQ(gc_text(bare()),
            "evalbox gc — /var/lib/evalbox: 2 stale run(s) reclaimed, 5 mount(s) unmounted, 3 "
            "cgroup(s) removed\n"
            "sessions: 0 left by a dead server removed, 0 past their TTL stopped\n"
            "git: 1 partial fetch(es) or checkout(s) removed; 4 mirror(s), 6 tree(s) kept\n"
            "caches and bundles: 2 half-stored or half-removed entries and free warm lock(s) "
            "removed\n");
  const std::string text = gc_text(full());
  EXPECT_NE(text.find("removed\n  error: run-1: EBUSY\nsessions: 3 left by a dead server "
                      "removed, 1 past their TTL stopped\n  error: ses-1: EBUSY\ngit: "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("kept\n  error: mirror x: EACCES\ncaches and bundles: "), std::string::npos)
      << text;
  EXPECT_NE(text.find("removed\n  error: caches: EACCES\nimages: "), std::string::npos) << text;
  EXPECT_NE(text.find("images: 1 image(s) and 3 layer(s) removed, 2 partial layer(s) cleaned, "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(" left (1 image(s) kept: in use by a run)\n  error: layer y: EIO\n"),
            std::string::npos)
      << text;
  EXPECT_TRUE(text.ends_with("kept workspaces: results/a: 2 run(s), " + format_bytes(2048) +
                             "; final states: 7 object(s), " + format_bytes(4096) +
                             " (under objects/; they go with the results directory)\n"))
      << text;
}

TEST(GcReport, CleanOnlyWithoutErrorsInAnyPart) {
  EXPECT_TRUE(bare().clean());
  gc_report r = bare();
  r.images.emplace();
  EXPECT_TRUE(r.clean());
  r.images->errors = {"x"};
  EXPECT_FALSE(r.clean());
  r = bare();
  r.git.errors = {"x"};
  EXPECT_FALSE(r.clean());
  r = bare();
  r.runs.errors = {"x"};
  EXPECT_FALSE(r.clean());
  r = bare();
  r.sessions.errors = {"x"};
  EXPECT_FALSE(r.clean());
  r = bare();
  r.cache_errors = {"x"};
  EXPECT_FALSE(r.clean());
}

}  // namespace
}  // namespace evalbox::harness
