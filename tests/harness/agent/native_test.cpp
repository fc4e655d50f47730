// Copying native session files out of a managed home: the destination mapping, and that no
// symlink the agent left is followed.
#include "harness/agent/native.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/unique_fd.h"
#include "harness/transcripts/read_limits.h"

namespace evalbox::harness {
namespace {

namespace fs = std::filesystem;

class CopyNativeFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(make_dirs(home_ / ".agent/sessions/2026/11"));
    ASSERT_TRUE(write_file(home_ / ".agent/sessions/2026/11/s-1.jsonl", "{}\n"));
    ASSERT_TRUE(write_file(home_ / ".agent/sessions/2026/notes.txt", "x"));
    ASSERT_TRUE(make_dirs(outside_));
    ASSERT_TRUE(write_file(outside_ / "secret.jsonl", "host\n"));
  }

  temp_dir dir_;
  fs::path home_ = dir_.path() / "home";
  fs::path native_ = dir_.path() / "native";
  fs::path outside_ = dir_.path() / "outside";
};

std::optional<fs::path> jsonl_flat(const fs::path& rel) {
  if (rel.extension() != ".jsonl") return std::nullopt;
  return rel.filename();
}

TEST_F(CopyNativeFiles, CopiesWhatTheMappingKeeps) {
  copy_native_files(home_, ".agent/sessions", native_ / "sessions", jsonl_flat);
  EXPECT_EQ(read_file(native_ / "sessions/s-1.jsonl").value_or(""), "{}\n");
  EXPECT_FALSE(fs::exists(native_ / "sessions/notes.txt"));
}

TEST_F(CopyNativeFiles, KeepsRelativePathsWhenAsked) {
  copy_native_files(home_, ".agent/sessions", native_,
                    [](const fs::path& rel) { return std::optional<fs::path>(rel); });
  EXPECT_TRUE(fs::exists(native_ / "2026/11/s-1.jsonl"));
  EXPECT_TRUE(fs::exists(native_ / "2026/notes.txt"));
}

TEST_F(CopyNativeFiles, FollowsNoSymlink) {
  fs::create_symlink(outside_ / "secret.jsonl", home_ / ".agent/sessions/link.jsonl");
  fs::create_directory_symlink(outside_, home_ / ".agent/sessions/linked-dir");
  copy_native_files(home_, ".agent/sessions", native_, jsonl_flat);
  EXPECT_TRUE(fs::exists(native_ / "s-1.jsonl"));
  EXPECT_FALSE(fs::exists(native_ / "link.jsonl"));
  EXPECT_FALSE(fs::exists(native_ / "secret.jsonl"));
}

TEST_F(CopyNativeFiles, IgnoresALinkedRoot) {
  fs::create_directory_symlink(outside_, home_ / ".other");
  copy_native_files(home_, ".other", native_, jsonl_flat);
  EXPECT_FALSE(fs::exists(native_));
}

TEST_F(CopyNativeFiles, MissingRootIsNothingToCopy) {
  copy_native_files(home_, ".agent/none", native_, jsonl_flat);
  EXPECT_FALSE(fs::exists(native_));
}

// An agent's stream past max_native_stream_bytes is an error that names the file and the
// cap (it used to read as empty: a transcript with nothing in it); a missing one is empty.
TEST(ReadNativeStream, IsBoundedAndSaysSoPastTheCap) {
  temp_dir dir;
  const auto path = dir.path() / "stdout.jsonl";
  EXPECT_EQ(read_native_stream(path).value_or("?"), "") << "the agent wrote nothing";
  ASSERT_TRUE(write_file(path, "{\"type\":\"final\"}\n"));
  EXPECT_EQ(read_native_stream(path).value_or(""), "{\"type\":\"final\"}\n");
  {
    unique_fd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
    ASSERT_TRUE(fd);
    ASSERT_EQ(::ftruncate(fd.get(), static_cast<off_t>(max_native_stream_bytes) + 1), 0);
  }
  auto big = read_native_stream(path);
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().message,
            fmt::format("{} is {} bytes, larger than 64MiB: evalbox reads at most that of an "
                        "agent's output stream or session file (lower the run's output limit, "
                        "limits.output)",
                        path.string(), max_native_stream_bytes + 1));
}

TEST(TailLines, KeepsTheLastKeptLines) {
  temp_dir dir;
  ASSERT_TRUE(write_file(dir.path() / "err", "a\n\nnoise\nb\nc\nd"));
  auto keep = [](std::string_view line) { return !line.empty() && line != "noise"; };
  EXPECT_EQ(tail_lines(dir.path() / "err", 3, keep), "b | c | d");
  EXPECT_EQ(tail_lines(dir.path() / "missing", 3, keep), "");
}

}  // namespace
}  // namespace evalbox::harness
