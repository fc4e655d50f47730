#include "sandbox/base/fs.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <ostream>

namespace evalbox {
namespace {

namespace fs = std::filesystem;

TEST(IsWithin, ComparesWholeComponents) {
  EXPECT_TRUE(is_within("/a/b/c", "/a/b"));
  EXPECT_TRUE(is_within("/a/b", "/a/b/"));
  EXPECT_FALSE(is_within("/a/bc", "/a/b"));
  EXPECT_TRUE(is_within("/a/b/../b/c", "/a/b"));
  EXPECT_FALSE(is_within("/a/b/../c", "/a/b"));
}

TEST(IsSafeRelative, RejectsEscapes) {
  EXPECT_TRUE(is_safe_relative(".codex/auth.json"));
  EXPECT_FALSE(is_safe_relative("../x"));
  EXPECT_FALSE(is_safe_relative("a/../../x"));
  EXPECT_FALSE(is_safe_relative("/etc/passwd"));
  EXPECT_FALSE(is_safe_relative(""));
}

// The one read loop behind read_file, lookup_beneath and credential sources: everything up
// to the limit, and past it an invalid_argument error naming what was read.
TEST(ReadFd, ReadsToTheEndAndRefusesMoreThanTheLimit) {
  temp_dir dir("evalbox-readfd");
  const std::string big(200000, 'x');  // more than one read's buffer
  ASSERT_TRUE(write_file(dir.path() / "big", big));
  auto whole = read_file(dir.path() / "big", big.size());
  ASSERT_TRUE(whole) << whole.error().message;
  EXPECT_EQ(*whole, big);
  auto over = read_file(dir.path() / "big", big.size() - 1);
  ASSERT_FALSE(over);
  EXPECT_EQ(over.error().kind, error_kind::invalid_argument);
  EXPECT_NE(over.error().message.find("big is larger than 199999 bytes"), std::string::npos)
      << over.error().message;
}

TEST(WriteFileAtomic, ReplacesContentAndLeavesNoTemporary) {
  temp_dir dir;
  auto p = dir.path() / "f.json";
  ASSERT_TRUE(write_file_atomic(p, "one"));
  ASSERT_TRUE(write_file_atomic(p, "two"));
  EXPECT_EQ(*read_file(p), "two");
  int entries = 0;
  for ([[maybe_unused]] auto& e : fs::directory_iterator(dir.path())) ++entries;
  EXPECT_EQ(entries, 1);
}

TEST(WriteFileStreamed, WritesWhatTheStreamGetsAndLeavesNoTemporary) {
  temp_dir dir;
  auto p = dir.path() / "report.md";
  ASSERT_TRUE(write_file(p, "old"));
  // More than one 64 KiB buffer, so that it is written as it goes.
  std::string big(200'000, 'x');
  auto s = write_file_streamed(p, [&](std::ostream& out) -> status {
    out << "head\n" << big << 'z';
    return {};
  });
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(*read_file(p), "head\n" + big + "z");
  int entries = 0;
  for ([[maybe_unused]] auto& e : fs::directory_iterator(dir.path())) ++entries;
  EXPECT_EQ(entries, 1);
}

TEST(WriteFileStreamed, AFailedRenderLeavesTheOldFileAndNoTemporary) {
  temp_dir dir;
  auto p = dir.path() / "report.md";
  ASSERT_TRUE(write_file(p, "old"));
  auto s = write_file_streamed(p, [](std::ostream& out) -> status {
    out << std::string(100'000, 'y');
    return make_error(error_kind::io, "record 7 cannot be read back");
  });
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message, "record 7 cannot be read back");
  EXPECT_EQ(*read_file(p), "old");
  int entries = 0;
  for ([[maybe_unused]] auto& e : fs::directory_iterator(dir.path())) ++entries;
  EXPECT_EQ(entries, 1);
}

TEST(WriteFileStreamed, AFailedWriteIsAnErrorAndLeavesTheOldFile) {
  temp_dir dir;
  auto p = dir.path() / "report.md";
  ASSERT_TRUE(write_file(p, "old"));
  // A file size limit makes write(2) fail with EFBIG past 64 KiB (SIGXFSZ ignored).
  struct rlimit old_limit {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old_limit;
  small.rlim_cur = 64 * 1024;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  auto s = write_file_streamed(p, [](std::ostream& out) -> status {
    out << std::string(300'000, 'z');
    return {};
  });
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  ::signal(SIGXFSZ, old_handler);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("write " + p.string() + ".tmp-"), std::string::npos)
      << s.error().message;
  EXPECT_EQ(*read_file(p), "old");
  int entries = 0;
  for ([[maybe_unused]] auto& e : fs::directory_iterator(dir.path())) ++entries;
  EXPECT_EQ(entries, 1);
}

TEST(AppendDurable, Appends) {
  temp_dir dir;
  auto p = dir.path() / "results.jsonl";
  ASSERT_TRUE(append_durable(p, "a\n"));
  ASSERT_TRUE(append_durable(p, "b\n"));
  EXPECT_EQ(*read_file(p), "a\nb\n");
}

TEST(RemoveTree, RemovesSymlinksWithoutFollowingThem) {
  temp_dir dir;
  auto keep = dir.path() / "keep";
  ASSERT_TRUE(make_dirs(keep));
  ASSERT_TRUE(write_file(keep / "precious", "x"));
  auto tree = dir.path() / "tree";
  ASSERT_TRUE(make_dirs(tree / "a/b"));
  ASSERT_TRUE(write_file(tree / "a/b/f", "y"));
  ASSERT_EQ(::symlink(keep.c_str(), (tree / "a/link").c_str()), 0);
  ASSERT_TRUE(remove_tree(tree));
  EXPECT_FALSE(fs::exists(tree));
  EXPECT_TRUE(fs::exists(keep / "precious"));
}

TEST(RemoveTree, MissingPathIsFine) {
  temp_dir dir;
  EXPECT_TRUE(remove_tree(dir.path() / "nope"));
}

TEST(ReadFile, RefusesOversizedFiles) {
  temp_dir dir;
  ASSERT_TRUE(write_file(dir.path() / "big", std::string(100, 'x')));
  EXPECT_FALSE(read_file(dir.path() / "big", 10));
}

}  // namespace
}  // namespace evalbox
