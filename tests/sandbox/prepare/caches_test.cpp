// The cache store: a filled tree stored under its key by one rename (links kept, setuid
// dropped), found and listed after; an entry a suite holds is never removed under it; a second
// store of the same key keeps the first unless asked to replace it; what a crashed store left
// is collected only once its process is gone; keys that are not 64 hex are refused.
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "base/digest.h"
#include "base/fs.h"
#include "base/json.h"
#include "sandbox/prepare/caches.h"
#include "sandbox/spec/request.h"

namespace evalbox::sandbox {
namespace {

namespace fs = std::filesystem;

const std::string key_a(64, 'a');
const std::string key_b = std::string(63, 'b') + "0";

class cache_store : public ::testing::Test {
 protected:
  void SetUp() override {
    filled_ = tmp_.path() / "filled";
    ASSERT_TRUE(make_dirs(filled_ / "wheels", 0755));
    ASSERT_TRUE(write_file(filled_ / "wheels" / "flask.whl", "PK wheel bytes", 0644));
    ASSERT_TRUE(write_file(filled_ / "tool", "#!/bin/sh\n", 04755));
    ASSERT_EQ(::chmod((filled_ / "tool").c_str(), 04755), 0);
    ASSERT_EQ(::symlink("wheels/flask.whl", (filled_ / "latest").c_str()), 0);
    state_ = tmp_.path() / "state";
  }
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(cache_store_dir(state_), ec))
      out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
  temp_dir tmp_{"evalbox-caches"};
  fs::path filled_, state_;
  cache_meta meta_{"pip", "/home/agent/.cache/pip", "suite.yaml", 1234};
};

TEST_F(cache_store, a_stored_cache_is_found_listed_and_described) {
  auto stored = store_cache(state_, key_a, filled_, meta_, false);
  ASSERT_TRUE(stored) << stored.error().message;
  EXPECT_EQ(stored->tree, cache_store_dir(state_) / key_a / "tree");
  EXPECT_EQ(read_file(stored->tree / "wheels" / "flask.whl").value_or(""), "PK wheel bytes");
  EXPECT_EQ(fs::read_symlink(stored->tree / "latest"), "wheels/flask.whl") << "a link stays one";
  struct stat st {};
  ASSERT_EQ(::stat((stored->tree / "tool").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 06000, 0u) << "setuid is dropped";
  EXPECT_EQ(st.st_uid, ::getuid());
  EXPECT_EQ(stored->digest, tree_digest(stored->tree).value());
  EXPECT_EQ(stored->bytes, 14u + 10u);
  EXPECT_EQ(stored->files, 4u);  // wheels/, wheels/flask.whl, tool, latest

  auto found = find_cache(state_, key_a);
  ASSERT_TRUE(found && *found);
  EXPECT_EQ((*found)->digest, stored->digest);
  EXPECT_EQ((*found)->meta.name, "pip");
  EXPECT_EQ((*found)->meta.target, "/home/agent/.cache/pip");
  EXPECT_EQ((*found)->meta.origin, "suite.yaml");
  EXPECT_EQ((*found)->meta.warm_ms, 1234u);
  auto none = find_cache(state_, key_b);
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none);
  auto all = list_caches(state_);
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ(all->front().key, key_a);
  EXPECT_EQ(entries(), std::vector<std::string>{key_a}) << "no temporaries are left";
}

TEST_F(cache_store, a_second_store_keeps_the_first_unless_told_to_replace_it) {
  ASSERT_TRUE(store_cache(state_, key_a, filled_, meta_, false));
  ASSERT_TRUE(write_file(filled_ / "wheels" / "flask.whl", "other bytes", 0644));
  auto kept = store_cache(state_, key_a, filled_, meta_, false);
  ASSERT_TRUE(kept);
  EXPECT_EQ(read_file(kept->tree / "wheels" / "flask.whl").value_or(""), "PK wheel bytes");
  auto replaced = store_cache(state_, key_a, filled_, meta_, true);
  ASSERT_TRUE(replaced) << replaced.error().message;
  EXPECT_EQ(read_file(replaced->tree / "wheels" / "flask.whl").value_or(""), "other bytes");
  EXPECT_EQ(entries(), std::vector<std::string>{key_a});
}

TEST_F(cache_store, a_held_cache_is_not_removed_and_a_free_one_is) {
  ASSERT_TRUE(store_cache(state_, key_a, filled_, meta_, false));
  {
    auto hold = hold_cache(state_, key_a);
    ASSERT_TRUE(hold) << hold.error().message;
    auto rm = remove_cache(state_, key_a);
    ASSERT_FALSE(rm);
    EXPECT_EQ(rm.error().kind, error_kind::busy);
    EXPECT_NE(rm.error().message.find("in use"), std::string::npos) << rm.error().message;
    auto again = store_cache(state_, key_a, filled_, meta_, true);
    ASSERT_FALSE(again) << "replacing is removing: refused while held";
    EXPECT_EQ(again.error().kind, error_kind::busy);
    EXPECT_TRUE(fs::exists(cache_store_dir(state_) / key_a / "tree" / "wheels" / "flask.whl"));
  }
  ASSERT_TRUE(remove_cache(state_, key_a));
  EXPECT_TRUE(entries().empty());
  auto gone = remove_cache(state_, key_a);
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().kind, error_kind::not_found);
}

TEST_F(cache_store, keys_that_are_not_64_hex_are_refused_before_any_path_is_made) {
  const std::vector<std::string> bads = {"", "abc", "../" + key_a.substr(3), std::string(64, 'A'),
                                         key_a.substr(0, 63) + "/"};
  for (const std::string& bad : bads) {
    auto s = store_cache(state_, bad, filled_, meta_, false);
    ASSERT_FALSE(s) << bad;
    EXPECT_EQ(s.error().kind, error_kind::invalid_argument);
    EXPECT_FALSE(find_cache(state_, bad)) << bad;
    EXPECT_FALSE(remove_cache(state_, bad)) << bad;
    EXPECT_FALSE(hold_cache(state_, bad)) << bad;
  }
  EXPECT_FALSE(fs::exists(cache_store_dir(state_)));
}

TEST_F(cache_store, leftovers_of_gone_processes_and_free_warm_locks_are_collected) {
  ASSERT_TRUE(store_cache(state_, key_a, filled_, meta_, false));
  const fs::path store = cache_store_dir(state_);
  // A store cut short by a crash (a pid that cannot exist), and one still at work (ours).
  ASSERT_TRUE(make_dirs(store / fmt::format(".tmp-{}-{}-0", key_b.substr(0, 16), 999999999), 0700));
  ASSERT_TRUE(make_dirs(store / fmt::format(".rm-{}-{}-1", key_b.substr(0, 16), 999999999), 0700));
  const std::string ours = fmt::format(".tmp-{}-{}-2", key_b.substr(0, 16), ::getpid());
  ASSERT_TRUE(make_dirs(store / ours, 0700));
  {
    auto held = lock_cache_warm(state_, key_b);  // being warmed: kept
    ASSERT_TRUE(held);
    auto left = collect_store_leftovers(state_);
    ASSERT_TRUE(left) << left.error().message;
    EXPECT_EQ(*left, 2);
    EXPECT_EQ(entries(), (std::vector<std::string>{ours, ".warm-" + key_b + ".lock", key_a}));
  }
  // A bundle store's crashed temporary goes the same way.
  const fs::path bundle_tmp =
      bundle_store_dir(state_) / fmt::format(".tmp-{}-{}-0", key_b.substr(0, 16), 999999999);
  ASSERT_TRUE(make_dirs(bundle_tmp / "tree", 0700));
  auto left = collect_store_leftovers(state_);
  ASSERT_TRUE(left);
  EXPECT_EQ(*left, 2) << "the warm lock nobody holds, and the bundle's temporary";
  EXPECT_EQ(entries(), (std::vector<std::string>{ours, key_a})) << "the stored cache stays";
  EXPECT_FALSE(fs::exists(bundle_tmp));
}

// `evalbox cache rm` and `ls` name caches by a key, 6+ of its first lowercase hex digits, or
// the name they were stored under; fewer digits, uppercase and other text name nothing.
TEST(cache_names, a_cache_is_named_by_key_prefix_or_name) {
  auto cache = [](std::string key, std::string name) {
    stored_cache c;
    c.key = std::move(key);
    c.meta.name = std::move(name);
    return c;
  };
  const std::vector<stored_cache> all = {cache("abcdef01" + std::string(56, '1'), "pip"),
                                         cache("abcdef02" + std::string(56, '2'), "pip"),
                                         cache("abcdef99" + std::string(56, '3'), "npm"),
                                         cache("123456" + std::string(58, '4'), "abcdef0")};
  auto keys = [&](std::string_view q) {
    std::vector<std::string> out;
    for (const auto& c : caches_named(all, q)) out.push_back(c.key.substr(0, 8));
    return out;
  };
  using v = std::vector<std::string>;
  EXPECT_EQ(keys("pip"), (v{"abcdef01", "abcdef02"})) << "a name names every cache of it";
  EXPECT_EQ(keys("abcdef"), (v{"abcdef01", "abcdef02", "abcdef99"})) << "a shared prefix";
  EXPECT_EQ(keys("abcdef01"), v{"abcdef01"});
  EXPECT_EQ(keys(all[2].key), v{"abcdef99"}) << "a whole key";
  EXPECT_EQ(keys("abcde"), v{}) << "5 digits are too few";
  EXPECT_EQ(keys("ABCDEF01"), v{}) << "keys are lowercase";
  EXPECT_EQ(keys(all[2].key + "0"), v{}) << "longer than a key";
  EXPECT_EQ(keys("abcdef0"), (v{"abcdef01", "abcdef02", "12345644"}))
      << "a name that is also a prefix names both";
  EXPECT_EQ(keys(""), v{});
  EXPECT_EQ(keys("rust"), v{});
}

// cache.json's record, which `evalbox cache ls --json` lists: every field of the entry.
TEST_F(cache_store, the_record_names_every_field_of_a_cache) {
  auto stored = store_cache(state_, key_a, filled_, meta_, false);
  ASSERT_TRUE(stored) << stored.error().message;
  const json j = to_json(*stored);
  EXPECT_EQ(j.at("schema"), "evalbox.cache.v1");
  EXPECT_EQ(j.at("key"), key_a);
  EXPECT_EQ(j.at("name"), "pip");
  EXPECT_EQ(j.at("target"), "/home/agent/.cache/pip");
  EXPECT_EQ(j.at("origin"), "suite.yaml");
  EXPECT_EQ(j.at("digest"), stored->digest);
  EXPECT_EQ(j.at("bytes"), stored->bytes);
  EXPECT_EQ(j.at("files"), 4u);
  EXPECT_EQ(j.at("created"), stored->created);
  EXPECT_EQ(j.at("warm_ms"), 1234u);
  EXPECT_EQ(read_file(stored->tree.parent_path() / "cache.json").value_or(""), j.dump(2) + "\n")
      << "the record is what cache.json holds";
}

}  // namespace
}  // namespace evalbox::sandbox
