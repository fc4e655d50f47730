#include "base/fs.h"

#include <grp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <ostream>

#include "base/unique_fd.h"

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

// The check that lets compile() skip normalize(): it must say yes exactly when normalize()
// would give the path back unchanged.
TEST(IsNormalAbsolute, SaysYesExactlyWhenNormalizeChangesNothing) {
  for (const char* p : {"/",       "/a",  "/a/b", "/a/.hidden", "/a/..b",  "/a/b.", "/dev/pts",
                        "",        "a",   "a/b",  "/a/",        "/a//b",   "//a",   "/a/./b",
                        "/a/../b", "/..", "/.",   "/a/b/.",     "/a/b/..", "./a"}) {
    EXPECT_EQ(is_normal_absolute(p), normalize(p).string() == p) << '"' << p << '"';
  }
  EXPECT_TRUE(is_normal_absolute("/home/agent/.codex/auth.json"));
  EXPECT_FALSE(is_normal_absolute("/home/agent/../../etc"));
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

// Where fstat says nothing of the length (a pipe, /proc): the string grows until end of file,
// and stops one byte past the limit rather than reading on.
TEST(ReadFd, ReadsWhatHasNoSizeAndStopsPastTheLimit) {
  for (const size_t limit : {size_t{10000}, size_t{9999}, size_t{4095}}) {
    int p[2];
    ASSERT_EQ(::pipe(p), 0);
    unique_fd r(p[0]), w(p[1]);
    const std::string data(10000, 'y');  // fits the pipe's buffer: no writer thread needed
    ASSERT_EQ(::write(w.get(), data.data(), data.size()), static_cast<ssize_t>(data.size()));
    w.reset();
    auto got = read_fd(r.get(), limit, "the pipe");
    if (limit >= data.size()) {
      ASSERT_TRUE(got) << got.error().message;
      EXPECT_EQ(*got, data);
    } else {
      ASSERT_FALSE(got) << limit;
      EXPECT_NE(got.error().message.find("the pipe is larger than"), std::string::npos);
      // It stopped at the limit: what is left is still in the pipe.
      char rest[16384];
      EXPECT_EQ(::read(r.get(), rest, sizeof rest), static_cast<ssize_t>(data.size() - limit - 1));
    }
  }
  auto status = read_file("/proc/self/status", 1 << 20);  // st_size 0
  ASSERT_TRUE(status) << status.error().message;
  EXPECT_NE(status->find("Pid:"), std::string::npos);
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

TEST(WriteFileReplace, ReplacesContentAndLeavesNoTemporary) {
  temp_dir dir;
  auto p = dir.path() / "run.json";
  ASSERT_TRUE(write_file_replace(p, "one", 0600));
  ASSERT_TRUE(write_file_replace(p, "two"));
  EXPECT_EQ(*read_file(p), "two");
  int entries = 0;
  for ([[maybe_unused]] auto& e : fs::directory_iterator(dir.path())) ++entries;
  EXPECT_EQ(entries, 1);
  // Into a directory that is gone: an error, and nothing is left.
  auto s = write_file_replace(dir.path() / "gone" / "run.json", "x");
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("gone"), std::string::npos) << s.error().message;
}

TEST(SyncDurable, SyncsTheFilesAndNamesOneThatIsMissing) {
  temp_dir dir;
  ASSERT_TRUE(write_file_replace(dir.path() / "run.json", "{}"));
  ASSERT_TRUE(write_file_replace(dir.path() / "transcript.jsonl", "{}\n"));
  EXPECT_TRUE(sync_durable(dir.path(), {dir.path() / "run.json", dir.path() / "transcript.jsonl"}));
  EXPECT_TRUE(sync_durable(dir.path(), {}));
  auto s = sync_durable(dir.path(), {dir.path() / "run.json", dir.path() / "missing.jsonl"});
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().sys_errno, ENOENT);
  EXPECT_NE(s.error().message.find("missing.jsonl"), std::string::npos) << s.error().message;
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

// A crash mid-append left a torn line: no reader counted it, so it is cut off before the next
// record, which starts on a line of its own.
TEST(AppendDurable, ATornLastLineIsCutOffBeforeTheNextRecord) {
  temp_dir dir;
  auto p = dir.path() / "results.jsonl";
  ASSERT_TRUE(write_file(p, "{\"whole\": 1}\n{\"torn"));
  ASSERT_TRUE(append_durable(p, "{\"next\": 2}\n"));
  EXPECT_EQ(*read_file(p), "{\"whole\": 1}\n{\"next\": 2}\n");
  // Only its newline missing: a whole record to the eye, but readers skipped it as torn and
  // its run was recorded again; ending it with a newline would count that run twice.
  ASSERT_TRUE(write_file(p, "{\"whole\": 1}\n{\"run\": 3}"));
  ASSERT_TRUE(append_durable(p, "{\"run\": 3}\n"));
  EXPECT_EQ(*read_file(p), "{\"whole\": 1}\n{\"run\": 3}\n");
  // A torn first line, longer than one read back.
  ASSERT_TRUE(write_file(p, "{\"torn\": \"" + std::string(10000, 'x')));
  ASSERT_TRUE(append_durable(p, "{\"next\": 2}\n"));
  EXPECT_EQ(*read_file(p), "{\"next\": 2}\n");
  // A whole file is appended to as it is.
  ASSERT_TRUE(append_durable(p, "{\"last\": 4}\n"));
  EXPECT_EQ(*read_file(p), "{\"next\": 2}\n{\"last\": 4}\n");
}

// A write that fails part-way (here EFBIG past a file size limit; ENOSPC on a full disk) is
// cut back off: the file ends with its last whole record, and a later append goes on from it.
TEST(AppendDurable, AWriteThatFailsPartWayLeavesNoPartialLine) {
  temp_dir dir;
  auto p = dir.path() / "results.jsonl";
  ASSERT_TRUE(append_durable(p, "first\n"));
  struct rlimit old_limit {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old_limit;
  small.rlim_cur = 64 * 1024;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  auto s = append_durable(p, std::string(100'000, 'z') + "\n");
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  ::signal(SIGXFSZ, old_handler);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().sys_errno, EFBIG) << s.error().message;
  EXPECT_EQ(*read_file(p), "first\n");
  ASSERT_TRUE(append_durable(p, "second\n"));
  EXPECT_EQ(*read_file(p), "first\nsecond\n");
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

// Without root, a directory of ours made 0000 (by a program in a sandbox, or overlayfs's
// work/work) cannot be opened; remove_tree gives it back its mode first. Run as an
// unprivileged user in a child process (as root the mode is no obstacle).
TEST(RemoveTree, ADirectoryOfOursWithoutPermissionsGoesToo) {
  temp_dir dir;
  const uid_t user = ::geteuid() == 0 ? 65534 : ::geteuid();
  auto tree = dir.path() / "mine/tree";
  ASSERT_TRUE(make_dirs(tree / "locked/inner"));
  ASSERT_TRUE(write_file(tree / "locked/inner/f", "y"));
  if (::geteuid() == 0) {
    ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
    for (const auto& p : {tree.parent_path(), tree, tree / "locked", tree / "locked/inner",
                          tree / "locked/inner/f"})
      ASSERT_EQ(::chown(p.c_str(), user, user), 0);
  }
  ASSERT_EQ(::chmod((tree / "locked").c_str(), 0), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    if (::geteuid() == 0 && (::setgroups(0, nullptr) != 0 || ::setresgid(user, user, user) != 0 ||
                             ::setresuid(user, user, user) != 0))
      ::_exit(3);
    ::_exit(remove_tree(tree) ? 0 : 1);
  }
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  EXPECT_FALSE(fs::exists(tree));
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
